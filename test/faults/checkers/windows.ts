/**
 * Time windows from the fault log: when each fault lasted, and when a
 * majority of nodes was up. The liveness checker and the report use them.
 */

import type { FaultEvent, HistoryEvent } from "../history.js";

export interface Window {
  readonly startMs: number;
  readonly endMs: number;
  readonly label?: string;
}

export interface FaultWindow extends Window {
  readonly fault: string;
  readonly target: string;
  readonly faultId: number;
  /** An instant fault (no `end` event): drawn as a mark, not a span. */
  readonly instant: boolean;
}

/** Each fault as a window: start → end, or start → start for an instant fault. */
export function faultWindows(events: readonly HistoryEvent[]): FaultWindow[] {
  const starts = new Map<number, FaultEvent>();
  const ends = new Map<number, FaultEvent>();
  for (const event of events) {
    if (event.kind !== "fault") continue;
    (event.phase === "start" ? starts : ends).set(event.faultId, event);
  }
  return [...starts.values()]
    .map((start) => {
      const end = ends.get(start.faultId);
      const detail = start.detail ? ` (${start.detail})` : "";
      return {
        startMs: start.timeMs,
        endMs: end?.timeMs ?? start.timeMs,
        label: `${start.fault} ${start.target}${detail}`,
        fault: start.fault,
        target: start.target,
        faultId: start.faultId,
        instant: end === undefined,
      };
    })
    .sort((a, b) => a.startMs - b.startMs);
}

/** The node numbers a fault target names: "node-2" → [2], "nodes 3,4" → [3, 4]; else []. */
export function targetNodes(target: string): number[] {
  const match = /^nodes?[\s-]*([\d\s,]+)$/i.exec(target.trim());
  if (!match) return [];
  return match[1]!
    .split(/[\s,]+/)
    .filter((s) => s !== "")
    .map(Number);
}

export interface AvailabilityOptions {
  readonly nodeCount: number;
  /** Faults that leave a node able to vote (default: latency). */
  readonly harmlessFaults?: readonly string[];
  /** Instant faults that bring a node back (default: names starting with "restart"). */
  readonly restoringFaults?: readonly string[];
}

/**
 * Splits [fromMs, toMs] into windows where at most a minority of nodes is
 * down (`healthy`) and where a majority is (`majorityDown`). A lasting fault
 * takes its nodes down from start to end; an instant one (a kill) until a
 * restoring fault names the node again.
 */
export function availabilityWindows(
  events: readonly HistoryEvent[],
  fromMs: number,
  toMs: number,
  options: AvailabilityOptions,
): { healthy: Window[]; majorityDown: Window[] } {
  const harmless = new Set(options.harmlessFaults ?? ["latency"]);
  const restoring = (fault: string) =>
    options.restoringFaults ? options.restoringFaults.includes(fault) : fault.startsWith("restart");
  const changes: Array<{ timeMs: number; node: number; delta: number }> = [];
  const killedAt = new Map<number, number>();
  for (const window of faultWindows(events)) {
    for (const node of targetNodes(window.target)) {
      if (harmless.has(window.fault)) continue;
      if (!window.instant) {
        changes.push({ timeMs: window.startMs, node, delta: 1 });
        changes.push({ timeMs: window.endMs, node, delta: -1 });
      } else if (restoring(window.fault)) {
        if (killedAt.delete(node)) changes.push({ timeMs: window.startMs, node, delta: -1 });
      } else if (!killedAt.has(node)) {
        killedAt.set(node, window.startMs);
        changes.push({ timeMs: window.startMs, node, delta: 1 });
      }
    }
  }
  return splitByMajority(changes, fromMs, toMs, options.nodeCount);
}

function splitByMajority(
  changes: Array<{ timeMs: number; node: number; delta: number }>,
  fromMs: number,
  toMs: number,
  nodeCount: number,
): { healthy: Window[]; majorityDown: Window[] } {
  changes.sort((a, b) => a.timeMs - b.timeMs);
  const minority = Math.floor((nodeCount - 1) / 2);
  const downBy = new Map<number, number>();
  const healthy: Window[] = [];
  const majorityDown: Window[] = [];
  let since = fromMs;
  let lost = false; // a majority is down
  const close = (untilMs: number) => {
    const startMs = Math.max(since, fromMs);
    const endMs = Math.min(untilMs, toMs);
    if (endMs > startMs) (lost ? majorityDown : healthy).push({ startMs, endMs });
    since = untilMs;
  };
  for (const change of changes) {
    downBy.set(change.node, (downBy.get(change.node) ?? 0) + change.delta);
    const down = [...downBy.values()].filter((n) => n > 0).length;
    if (down > minority === lost) continue;
    close(change.timeMs);
    lost = !lost;
  }
  close(toMs);
  return { healthy, majorityDown };
}

/** The first and last event times (0, 0 for an empty history); a loop, not a spread, for big histories. */
export function historySpan(events: readonly HistoryEvent[]): { fromMs: number; toMs: number } {
  let fromMs = Number.POSITIVE_INFINITY;
  let toMs = Number.NEGATIVE_INFINITY;
  for (const event of events) {
    if (event.timeMs < fromMs) fromMs = event.timeMs;
    if (event.timeMs > toMs) toMs = event.timeMs;
  }
  return events.length === 0 ? { fromMs: 0, toMs: 0 } : { fromMs, toMs };
}
