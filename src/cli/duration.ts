/**
 * Durations on the command line: an integer followed by a unit, `500ms`,
 * `30s`, `5m` or `1h`. A bare number is refused (seconds or milliseconds?).
 */
import { Option } from "commander";
import { UsageError } from "./errors.js";

const unitMs: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

export const durationHint = "an integer followed by ms, s, m or h, e.g. 500ms, 30s, 5m";

/** The longest duration: Node's timers take at most 2^31 - 1 ms (about 24 days). */
const durationMaxMs = 2 ** 31 - 1;

/** Milliseconds of `text`; throws `UsageError` naming `argument` when it is not a duration. */
export function parseDuration(text: string, argument: string): number {
  const match = /^(\d+)(ms|s|m|h)$/.exec(text.trim());
  if (!match) {
    throw new UsageError(
      argument,
      `${JSON.stringify(text)} is not a duration: expected ${durationHint}`,
    );
  }
  const ms = Number(match[1]) * unitMs[match[2]!]!;
  // Written right but too long: saying "not a duration" would contradict the help.
  if (!Number.isSafeInteger(ms) || ms > durationMaxMs) {
    throw new UsageError(
      argument,
      `${JSON.stringify(text)} is too long: at most ${formatDuration(durationMaxMs)} (about 24 days)`,
    );
  }
  return ms;
}

/**
 * Formats milliseconds back the way they are written on the command line,
 * in the largest unit that is exact: what --help says (1h, not 60m).
 */
export function formatDuration(ms: number): string {
  if (ms >= 3_600_000 && ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms >= 1_000 && ms % 1_000 === 0) return `${ms / 1_000}s`;
  return `${ms}ms`;
}

/**
 * A duration option with its default written as on the command line, and
 * optionally a range: a value outside it is refused naming the option. A
 * range short of the longest duration is written into the help from the
 * same numbers as the error, so the two cannot disagree.
 */
export function durationOption(
  flags: string,
  description: string,
  fallback: string,
  range: { minMs: number; maxMs: number } = { minMs: 0, maxMs: durationMaxMs },
): Option {
  const name = flags.split(" ", 1)[0]!;
  const bounded = range.maxMs < durationMaxMs;
  const bounds = bounded
    ? `${formatDuration(range.minMs)} to ${formatDuration(range.maxMs)}`
    : `at least ${formatDuration(range.minMs)}`;
  const shown = bounded ? `; ${bounds}` : "";
  return new Option(flags, `${description} (${durationHint}${shown})`)
    .default(parseDuration(fallback, name), fallback)
    .argParser((text) => {
      const ms = parseDuration(text, name);
      if (ms < range.minMs || ms > range.maxMs) {
        throw new UsageError(name, `${JSON.stringify(text)}: expected ${bounds}`);
      }
      return ms;
    });
}
