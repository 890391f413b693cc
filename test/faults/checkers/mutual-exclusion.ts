/**
 * MX: for one resource no two holds overlap; a process that acts on the
 * resource after its own hold ended (a GC pause past validity, FAULTS.md
 * L15) must not do so while another process holds it; and with fencing the
 * tokens strictly increase in hold order (acquire-ok time).
 */

import type { CheckResult, HistoryEvent } from "../history.js";
import { describeHold, extractHolds, type LockHold } from "./holds.js";
import {
  describeOperation,
  groupBy,
  type Operation,
  pairOperations,
  verdictOf,
} from "./operations.js";
import { findOverlaps } from "./sweeps.js";

export interface MutualExclusionOptions {
  /** Check that fencing tokens strictly increase in hold order; every hold must carry one. */
  readonly fencing?: boolean;
  /** Flag `use`s and fenced `write`s made outside the process's own hold (default true). */
  readonly staleUse?: boolean;
}

export function checkMutualExclusion(
  events: readonly HistoryEvent[],
  options: MutualExclusionOptions = {},
): CheckResult {
  const operations = pairOperations(events);
  const { holds, expiredOnReturn, infoAcquires } = extractHolds(operations);
  const violations: string[] = [];
  const byResource = groupBy(holds, (hold) => hold.resource);
  let overlaps = 0;
  for (const [resource, resourceHolds] of byResource) {
    for (const { first, second } of findOverlaps(resourceHolds)) {
      overlaps++;
      violations.push(`overlap on ${resource}: ${describeHold(first)} and ${describeHold(second)}`);
    }
    if (options.fencing) violations.push(...fenceOrderViolations(resourceHolds));
  }
  let staleUses = 0;
  if (options.staleUse ?? true) {
    const found = staleUseViolations(operations, byResource);
    staleUses = found.length;
    violations.push(...found);
  }
  return {
    checker: "MX",
    verdict: verdictOf(violations),
    violations,
    stats: {
      holds: holds.length,
      resources: byResource.size,
      overlaps,
      staleUses,
      infoAcquires,
      expiredOnReturn: expiredOnReturn.length,
    },
  };
}

/** With fencing, each hold's token is above the token of the hold before it. */
function fenceOrderViolations(holds: readonly LockHold[]): string[] {
  const sorted = [...holds].sort((a, b) => a.startMs - b.startMs);
  const violations: string[] = [];
  let previous: LockHold | undefined;
  for (const hold of sorted) {
    if (hold.fence === undefined) {
      violations.push(`no fencing token: ${describeHold(hold)}`);
      continue;
    }
    if (previous?.fence !== undefined && hold.fence <= previous.fence) {
      violations.push(
        `fence order: ${describeHold(hold)} got a token not above ${describeHold(previous)}`,
      );
    }
    previous = hold;
  }
  return violations;
}

/** Acting on the resource: a `use`, or a fenced `write`, that may have happened (not `fail`). */
function isAction(op: Operation): boolean {
  if (op.type === "fail" || op.resource === undefined) return false;
  return op.op === "use" || (op.op === "write" && op.args.fence !== undefined);
}

/**
 * Actions outside the actor's own hold that overlap another process's hold.
 * An action that never completed (the process died) is taken to have
 * happened at its invocation.
 */
function staleUseViolations(
  operations: readonly Operation[],
  byResource: ReadonlyMap<string, LockHold[]>,
): string[] {
  const violations: string[] = [];
  const indexes = new Map<string, HoldIndex>();
  for (const [resource, holds] of byResource) indexes.set(resource, new HoldIndex(holds));
  for (const op of operations) {
    if (!isAction(op)) continue;
    const index = indexes.get(op.resource!);
    if (!index || index.covers(op.process, op.invokeMs)) continue;
    const endMs = Number.isFinite(op.completeMs) ? op.completeMs : op.invokeMs;
    const other = index.otherHoldOverlapping(op.process, op.invokeMs, endMs);
    if (!other) continue;
    const own = index.lastEndedBefore(op.process, op.invokeMs);
    const after = own ? `after its hold ended at ${own.endMs.toFixed(3)} ms` : "without a hold";
    violations.push(`stale use: ${describeOperation(op)} ${after}, while ${describeHold(other)}`);
  }
  return violations;
}

/**
 * Holds of one resource, for interval queries in O(log n): by process
 * (sorted, disjoint per process), and by start with, for each prefix, the
 * two latest-ending holds of different processes — enough to answer "does a
 * hold of another process overlap [from, to)".
 */
class HoldIndex {
  private readonly byStart: LockHold[];
  private readonly prefixTop: Array<[LockHold, LockHold | undefined]> = [];
  private readonly byProcess: Map<string, LockHold[]>;

  constructor(holds: readonly LockHold[]) {
    this.byStart = [...holds].sort((a, b) => a.startMs - b.startMs);
    let top: [LockHold, LockHold | undefined] | undefined;
    for (const hold of this.byStart) {
      top = pushTop(top, hold);
      this.prefixTop.push(top);
    }
    this.byProcess = groupBy(this.byStart, (hold) => hold.client);
  }

  /** The process holds the resource at `timeMs`. */
  covers(process: string, timeMs: number): boolean {
    const hold = this.lastStartedBy(process, timeMs);
    return hold !== undefined && timeMs < hold.endMs;
  }

  lastEndedBefore(process: string, timeMs: number): LockHold | undefined {
    const hold = this.lastStartedBy(process, timeMs);
    return hold && hold.endMs <= timeMs ? hold : undefined;
  }

  otherHoldOverlapping(process: string, fromMs: number, toMs: number): LockHold | undefined {
    // Holds starting before the action ended (an instant action meets a hold starting with it).
    const instant = fromMs === toMs;
    const count = upperBound(this.byStart, (hold) =>
      instant ? hold.startMs <= toMs : hold.startMs < toMs,
    );
    if (count === 0) return undefined;
    const [first, second] = this.prefixTop[count - 1]!;
    const candidate = first.client !== process ? first : second;
    return candidate && candidate.endMs > fromMs ? candidate : undefined;
  }

  private lastStartedBy(process: string, timeMs: number): LockHold | undefined {
    const own = this.byProcess.get(process) ?? [];
    const count = upperBound(own, (hold) => hold.startMs <= timeMs);
    return count === 0 ? undefined : own[count - 1];
  }
}

/** Keeps the two latest-ending holds of different processes. */
function pushTop(
  top: [LockHold, LockHold | undefined] | undefined,
  hold: LockHold,
): [LockHold, LockHold | undefined] {
  if (!top) return [hold, undefined];
  const [first, second] = top;
  if (hold.endMs > first.endMs) {
    return [hold, first.client !== hold.client ? first : second];
  }
  if (hold.client === first.client) return top;
  return !second || hold.endMs > second.endMs ? [first, hold] : top;
}

/** The number of leading items for which `before` holds (it must be monotone). */
export function upperBound<T>(items: readonly T[], before: (item: T) => boolean): number {
  let low = 0;
  let high = items.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (before(items[mid]!)) low = mid + 1;
    else high = mid;
  }
  return low;
}
