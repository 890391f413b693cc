/**
 * LV: while a majority is healthy the operation keeps succeeding (no gap
 * longer than `maxGapMs` without an `ok`); while it is not, for the rows
 * unavailable by design (L3 with 3 down, L9), nothing succeeds.
 */

import type { CheckResult, HistoryEvent, OpName } from "../history.js";
import { upperBound } from "./mutual-exclusion.js";
import { describeOperation, pairOperations, verdictOf } from "./operations.js";
import { availabilityWindows, historySpan, type Window } from "./windows.js";

export interface LivenessOptions {
  /** The operation that must succeed (default "acquire"). */
  readonly op?: OpName;
  /** Only this resource's operations count (default: all). */
  readonly resource?: string;
  /** Only these processes' operations count (default: all), e.g. the partitioned client of L9. */
  readonly processes?: readonly string[];
  /** The longest stretch of a healthy window allowed without an `ok` (required to check healthy windows). */
  readonly maxGapMs?: number;
  /** Where the operation must succeed. Default: derived with `nodeCount`, else the whole history. */
  readonly healthyWindows?: readonly Window[];
  /** Where no operation invoked inside may complete `ok`. Default: derived with `nodeCount`, else none. */
  readonly unavailableWindows?: readonly Window[];
  /** Derive both kinds of window from the fault log (FaultEvents naming nodes). */
  readonly nodeCount?: number;
  /** Time allowed to recover at the start of each derived healthy window after a fault (e.g. a TTL). */
  readonly recoveryMs?: number;
  /** Faults that leave a node able to vote, when deriving (default: latency). */
  readonly harmlessFaults?: readonly string[];
}

export function checkLiveness(
  events: readonly HistoryEvent[],
  options: LivenessOptions = {},
): CheckResult {
  const name = options.op ?? "acquire";
  const ops = pairOperations(events).filter(
    (op) =>
      op.op === name &&
      (options.resource === undefined || op.resource === options.resource) &&
      (options.processes === undefined || options.processes.includes(op.process)),
  );
  const oks = ops.filter((op) => op.type === "ok");
  const { healthy, unavailable } = windowsFor(events, options);
  const violations: string[] = [];
  if (options.maxGapMs !== undefined) {
    const times = oks.map((op) => op.completeMs).sort((a, b) => a - b);
    for (const window of healthy) violations.push(...gaps(name, window, times, options.maxGapMs));
  }
  for (const window of unavailable) {
    for (const op of oks) {
      if (op.invokeMs >= window.startMs && op.completeMs <= window.endMs) {
        violations.push(
          `${name} succeeded while unavailable by design (${describeWindow(window)}): ` +
            describeOperation(op),
        );
      }
    }
  }
  return {
    checker: "LV",
    verdict: verdictOf(violations),
    violations,
    stats: {
      operations: ops.length,
      ok: oks.length,
      healthyWindows: healthy.length,
      unavailableWindows: unavailable.length,
    },
  };
}

function windowsFor(events: readonly HistoryEvent[], options: LivenessOptions) {
  const { fromMs, toMs } = historySpan(events);
  if (options.nodeCount === undefined) {
    return {
      healthy: options.healthyWindows ?? [{ startMs: fromMs, endMs: toMs }],
      unavailable: options.unavailableWindows ?? [],
    };
  }
  const derived = availabilityWindows(events, fromMs, toMs, {
    nodeCount: options.nodeCount,
    harmlessFaults: options.harmlessFaults,
  });
  // A window after a fault starts with the recovery the row allows (quarantine, TTL).
  const recovered = derived.healthy
    .map((w) =>
      w.startMs === fromMs ? w : { ...w, startMs: w.startMs + (options.recoveryMs ?? 0) },
    )
    .filter((w) => w.endMs > w.startMs);
  return {
    healthy: options.healthyWindows ?? recovered,
    unavailable: options.unavailableWindows ?? derived.majorityDown,
  };
}

/** Stretches of `window` longer than `maxGapMs` with no `ok` completion in `sortedTimes`. */
function gaps(name: string, window: Window, sortedTimes: readonly number[], maxGapMs: number) {
  const first = upperBound(sortedTimes, (t) => t < window.startMs);
  const last = upperBound(sortedTimes, (t) => t <= window.endMs);
  const points = [window.startMs, ...sortedTimes.slice(first, last), window.endMs];
  const violations: string[] = [];
  for (let i = 1; i < points.length; i++) {
    const gapMs = points[i]! - points[i - 1]!;
    if (gapMs > maxGapMs) {
      violations.push(
        `no ok ${name} for ${gapMs.toFixed(1)} ms (${points[i - 1]!.toFixed(3)}–` +
          `${points[i]!.toFixed(3)} ms) while a majority was healthy (${describeWindow(window)}); ` +
          `allowed ${maxGapMs} ms`,
      );
    }
  }
  return violations;
}

function describeWindow(window: Window): string {
  const label = window.label ? `${window.label}, ` : "";
  return `${label}window ${window.startMs.toFixed(3)}–${window.endMs.toFixed(3)} ms`;
}
