/**
 * The ID server's log: one JSON object per line (time, level, msg, then the
 * event's fields), the shape pino writes, so the usual tools read it. It is
 * also the `logger` handed to NextId, whose node events carry fields.
 */
import type { Logger } from "../observe.js";

export type LogLevel = "debug" | "info" | "warn" | "error";

const rank: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface JsonLogger extends Required<Logger> {
  readonly level: LogLevel;
}

export function jsonLogger(
  write: (line: string) => void,
  level: LogLevel = "info",
  base: Record<string, unknown> = {},
): JsonLogger {
  const at =
    (name: LogLevel) =>
    (msg: string, fields?: Record<string, unknown>): void => {
      if (rank[name] < rank[level]) return;
      // Wall-clock time here is for people reading the log, never for decisions.
      const entry = { time: new Date().toISOString(), level: name, msg, ...base, ...fields };
      write(`${JSON.stringify(entry, (_key, v) => (typeof v === "bigint" ? v.toString() : v))}\n`);
    };
  return { level, debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

export const logLevels: readonly LogLevel[] = ["debug", "info", "warn", "error"];
