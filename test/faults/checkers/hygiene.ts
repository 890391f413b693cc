/**
 * HY: what the workload processes report about themselves (history.ts
 * SampleEvents, written by workloads/common.ts): no unhandled rejection, no
 * timer or socket left at exit, only documented error codes, and memory and
 * outstanding-command samples that stay flat over a window.
 */

import type { CheckResult, HistoryEvent, SampleEvent } from "../history.js";
import { describeOperation, groupBy, pairOperations, verdictOf } from "./operations.js";
import type { Window } from "./windows.js";

export interface BoundedSample {
  /** A SampleEvent value, e.g. "heapUsedBytes" or "outstandingCommands". */
  readonly key: string;
  /** No sample may exceed this. */
  readonly max?: number;
  /**
   * The floor (minimum) of the last third of the window may exceed the floor
   * of the first third by at most this: minima, so that a GC sawtooth is not growth.
   */
  readonly growthMax?: number;
}

export interface HygieneOptions {
  /** Error codes the docs promise (e.g. ERR_QUORUM, STALE_FENCE); default: any code. */
  readonly allowedErrorCodes?: readonly string[];
  /** The sample counting unhandled rejections (default "unhandledRejections"). */
  readonly unhandledKey?: string;
  /** Samples that must be 0 in each process's last sample, taken after close (default timers and sockets). */
  readonly exitKeys?: readonly string[];
  /** Samples that must stay bounded, per process. */
  readonly bounded?: readonly BoundedSample[];
  /** Where `bounded` applies (default: the whole history), e.g. a stalled node's minutes (I15). */
  readonly window?: Window;
  /**
   * Processes with no clean exit to check (besides those a `kill` fault
   * targets as "client NAME", found in the fault log): a killed process
   * never took its exit sample.
   */
  readonly killed?: readonly string[];
}

export function checkHygiene(
  events: readonly HistoryEvent[],
  options: HygieneOptions = {},
): CheckResult {
  const samples = events.filter((e): e is SampleEvent => e.kind === "sample");
  const byProcess = groupBy(
    [...samples].sort((a, b) => a.timeMs - b.timeMs),
    (s) => s.process,
  );
  const violations: string[] = [];
  const unhandledKey = options.unhandledKey ?? "unhandledRejections";
  const exitKeys = options.exitKeys ?? ["activeTimers", "activeSockets"];
  const killed = new Set([...(options.killed ?? []), ...killedClients(events)]);
  for (const [process, own] of byProcess) {
    const unhandled = own.reduce((n, s) => Math.max(n, s.values[unhandledKey] ?? 0), 0);
    if (unhandled > 0) violations.push(`${process}: ${unhandled} unhandled rejection(s)`);
    const last = own.at(-1)!;
    for (const key of killed.has(process) ? [] : exitKeys) {
      const left = last.values[key] ?? 0;
      if (left > 0) {
        violations.push(
          `${process}: ${left} ${key} left at exit (sample at ${last.timeMs.toFixed(3)} ms)`,
        );
      }
    }
    for (const bound of options.bounded ?? []) {
      violations.push(...unbounded(process, own, bound, options.window));
    }
  }
  const errors = errorViolations(events, options.allowedErrorCodes);
  violations.push(...errors.violations);
  return {
    checker: "HY",
    verdict: verdictOf(violations),
    violations,
    stats: { processes: byProcess.size, samples: samples.length, errors: errors.count },
  };
}

/** Client processes the runner killed: "client lock-2" as a `kill` fault's target. */
function killedClients(events: readonly HistoryEvent[]): string[] {
  const names: string[] = [];
  for (const event of events) {
    if (event.kind !== "fault" || event.phase !== "start" || !event.fault.includes("kill"))
      continue;
    const match = /^client\s+(\S+)$/.exec(event.target.trim());
    if (match) names.push(match[1]!);
  }
  return names;
}

function errorViolations(events: readonly HistoryEvent[], allowed?: readonly string[]) {
  const failed = pairOperations(events).filter((op) => op.error !== undefined);
  const violations: string[] = [];
  if (allowed) {
    const codes = new Set(allowed);
    for (const op of failed) {
      if (!codes.has(op.error!.code)) {
        violations.push(
          `undocumented error ${op.error!.code} (${op.error!.message}): ${describeOperation(op)}`,
        );
      }
    }
  }
  return { count: failed.length, violations };
}

function unbounded(
  process: string,
  samples: readonly SampleEvent[],
  bound: BoundedSample,
  window?: Window,
): string[] {
  const values = samples
    .filter((s) => !window || (s.timeMs >= window.startMs && s.timeMs <= window.endMs))
    .flatMap((s) => (s.values[bound.key] === undefined ? [] : [s.values[bound.key]!]));
  if (values.length === 0) return [];
  const violations: string[] = [];
  const highest = values.reduce((a, b) => Math.max(a, b));
  if (bound.max !== undefined && highest > bound.max) {
    violations.push(`${process}: ${bound.key} reached ${highest}, above ${bound.max}`);
  }
  if (bound.growthMax !== undefined && values.length >= 3) {
    const third = Math.floor(values.length / 3);
    const floor = (part: number[]) => part.reduce((a, b) => Math.min(a, b));
    const growth = floor(values.slice(-third)) - floor(values.slice(0, third));
    if (growth > bound.growthMax) {
      violations.push(
        `${process}: ${bound.key} grew by ${growth} over the window (floor of the first third ` +
          `to floor of the last), above ${bound.growthMax}`,
      );
    }
  }
  return violations;
}
