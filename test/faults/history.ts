/**
 * The recorded history of a fault run: what the workload processes did and
 * what the runner did to the nodes, one JSON object per line. Times are
 * CLOCK_MONOTONIC milliseconds (`monotonicMs()`), shared by every process
 * on this machine, so events from different processes compare directly.
 *
 * Operations follow Jepsen's shape: an `invoke` event, then exactly one
 * completion with the same `process` and `opId` — `ok` (it happened),
 * `fail` (it certainly did not happen) or `info` (indeterminate: it may or
 * may not have happened, e.g. a timeout or a crash; checkers must allow
 * both). A process that dies leaves invocations without completions: they
 * count as `info` that never ends.
 *
 * This file is the contract between the workloads and tools that write
 * histories and the checkers and report that read them: change it only
 * with both sides.
 */

import { appendFileSync, readFileSync } from "node:fs";

/** CLOCK_MONOTONIC in milliseconds (Linux: the same clock in every process). */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/**
 * What an operation does.
 * - `acquire`: a lock on `resource`; ok value: `{ fence?: string, validUntilMs: number }`
 *   (validUntilMs on the monotonic clock, the client's own validity deadline).
 * - `release`, `extend`: of the lock the process holds on `resource`;
 *   extend's ok value: `{ validUntilMs: number }`.
 * - `use`: the process acts on the resource under its lock (the moment of
 *   the critical section that matters: a pause before it is the GC pause).
 *   Invoke value: `{ fence?: string }`.
 * - `read`, `write`: of a shared value (lock-set's read-modify-write);
 *   read's ok value and write's invoke value: `{ value: number, fence?: string }`.
 *   A fenced write the store refused completes `fail` with error code
 *   `STALE_FENCE`.
 * - `ids`: NextId.next() / nextBatch(count); invoke value `{ count }`, ok
 *   value `{ ids: string[] }` (decimal strings: IDs may exceed 2^53).
 */
export type OpName = "acquire" | "release" | "extend" | "use" | "read" | "write" | "ids";

export type OpType = "invoke" | "ok" | "fail" | "info";

export interface OpEvent {
  readonly kind: "op";
  readonly type: OpType;
  /** The workload process, e.g. "lock-3"; one operation at a time per process. */
  readonly process: string;
  /** Pairs an invocation with its completion; unique within the process. */
  readonly opId: number;
  readonly op: OpName;
  readonly timeMs: number;
  readonly resource?: string;
  /** Arguments on `invoke`, result on `ok` (see OpName). */
  readonly value?: Record<string, unknown>;
  /** On `fail` / `info`: the error's stable code (e.g. ERR_QUORUM) and message. */
  readonly error?: { readonly code: string; readonly message: string };
  /**
   * On `ok`: when the process last ran a timer before this completion was
   * recorded (see workloads/common.ts, `lastTimerTurnMs`). The call's own
   * last steps ran after it: between the two, the process may have been
   * stopped (descheduled, a GC pause) without a timer turn to show it.
   */
  readonly timerTurnMs?: number;
}

/**
 * A fault the runner injected: `start` and, for faults that last, `end`
 * with the same `faultId`. Instant faults (a kill) have only `start`.
 */
export interface FaultEvent {
  readonly kind: "fault";
  readonly phase: "start" | "end";
  readonly faultId: number;
  /** e.g. "kill", "pause", "restart-empty", "latency", "blackhole", "clock-jump", "power-loss". */
  readonly fault: string;
  /** e.g. "node-2", "client lock-1", "nodes 3,4". */
  readonly target: string;
  readonly timeMs: number;
  readonly detail?: string;
}

/** A sample for hygiene and liveness (memory, open handles, outstanding commands). */
export interface SampleEvent {
  readonly kind: "sample";
  readonly process: string;
  readonly timeMs: number;
  readonly values: Record<string, number>;
}

export type HistoryEvent = OpEvent | FaultEvent | SampleEvent;

/** Appends events to a JSONL file (synchronously: a crash loses nothing written). */
export class HistoryWriter {
  constructor(readonly path: string) {}

  write(event: HistoryEvent): void {
    appendFileSync(this.path, `${JSON.stringify(event)}\n`);
  }
}

/** Reads a JSONL history; a torn last line (a process killed mid-write) is dropped. */
export function readHistory(path: string): HistoryEvent[] {
  const lines = readFileSync(path, "utf8").split("\n");
  const events: HistoryEvent[] = [];
  for (const [i, line] of lines.entries()) {
    if (line.trim() === "") continue;
    try {
      events.push(JSON.parse(line) as HistoryEvent);
    } catch (error) {
      if (i === lines.length - 1 || (i === lines.length - 2 && lines.at(-1) === "")) break;
      throw new Error(`${path}:${i + 1}: not a history event (${(error as Error).message})`);
    }
  }
  return events.sort((a, b) => a.timeMs - b.timeMs);
}

/** What a checker concludes about one history. */
export interface CheckResult {
  /** "MX", "ID", "RS", "LV", "HY", "WGL". */
  readonly checker: string;
  /** `unknown`: the history does not hold what this checker needs (e.g. WGL over its size bound). */
  readonly verdict: "ok" | "violation" | "unknown";
  /** One line each, naming the processes, operations and times involved. */
  readonly violations: readonly string[];
  /** Counts worth reporting (operations checked, stale writes refused, …). */
  readonly stats: Record<string, number>;
}
