/**
 * The checkers the runner runs over a merged history, by name. Interim
 * sweeps of its own until faults-checkers' checkers are merged (then this
 * file only maps names to theirs).
 */
import type { CheckResult, HistoryEvent, OpEvent } from "../history.js";
import type { CheckerName } from "./types.js";

function ops(events: readonly HistoryEvent[]): OpEvent[] {
  return events.filter((e): e is OpEvent => e.kind === "op");
}

/** Pairs each invoke with its completion (undefined: none, the process died). */
function pairs(events: readonly HistoryEvent[]): Array<{ invoke: OpEvent; done?: OpEvent }> {
  const open = new Map<string, { invoke: OpEvent; done?: OpEvent }>();
  const all: Array<{ invoke: OpEvent; done?: OpEvent }> = [];
  for (const e of ops(events)) {
    const key = `${e.process}#${e.opId}`;
    if (e.type === "invoke") {
      const pair = { invoke: e };
      open.set(key, pair);
      all.push(pair);
    } else {
      const pair = open.get(key);
      if (pair) pair.done = e;
    }
  }
  return all;
}

function result(checker: string, violations: string[], stats: Record<string, number>): CheckResult {
  return { checker, verdict: violations.length > 0 ? "violation" : "ok", violations, stats };
}

interface Hold {
  process: string;
  resource: string;
  start: number;
  end: number;
  fence?: bigint;
}

/** MX: holds of one resource never overlap; fences rise in hold order; a `use` lies inside its own hold. */
export function checkMutualExclusion(events: readonly HistoryEvent[]): CheckResult {
  const holds: Hold[] = [];
  const current = new Map<string, Hold>();
  const uses: OpEvent[] = [];
  const sorted = ops(events);
  for (const e of sorted) {
    if (!e.resource) continue;
    const key = `${e.process}|${e.resource}`;
    if (e.op === "acquire" && e.type === "ok") {
      const v = e.value as { fence?: string; validUntilMs: number };
      const hold: Hold = {
        process: e.process,
        resource: e.resource,
        start: e.timeMs,
        end: v.validUntilMs,
        fence: v.fence === undefined ? undefined : BigInt(v.fence),
      };
      holds.push(hold);
      current.set(key, hold);
    } else if (e.op === "extend" && e.type === "ok") {
      const hold = current.get(key);
      if (hold) hold.end = Math.max(hold.end, (e.value as { validUntilMs: number }).validUntilMs);
    } else if (e.op === "release" && e.type === "invoke") {
      const hold = current.get(key);
      if (hold) hold.end = Math.min(hold.end, e.timeMs);
      current.delete(key);
    } else if (e.op === "use" && e.type === "invoke") {
      uses.push(e);
    }
  }
  const violations: string[] = [];
  const byResource = new Map<string, Hold[]>();
  for (const h of holds) byResource.set(h.resource, [...(byResource.get(h.resource) ?? []), h]);
  for (const [resource, list] of byResource) {
    list.sort((a, b) => a.start - b.start);
    let latest: Hold | undefined;
    for (const h of list) {
      if (latest && h.start < latest.end && h.process !== latest.process) {
        violations.push(
          `${resource}: ${h.process} acquired at ${h.start.toFixed(1)} while ${latest.process} held it until ${latest.end.toFixed(1)}`,
        );
      }
      if (latest?.fence !== undefined && h.fence !== undefined && h.fence <= latest.fence) {
        violations.push(
          `${resource}: fence ${h.fence} of ${h.process} not above ${latest.fence} of ${latest.process}`,
        );
      }
      if (!latest || h.end > latest.end || h.start >= latest.end) latest = h;
    }
  }
  // A use outside the user's own hold while another process holds: holds overlap as the clients see them.
  for (const use of uses) {
    const list = byResource.get(use.resource!) ?? [];
    const own = list.some(
      (h) => h.process === use.process && h.start <= use.timeMs && use.timeMs <= h.end,
    );
    if (own) continue;
    const other = list.find(
      (h) => h.process !== use.process && h.start <= use.timeMs && use.timeMs <= h.end,
    );
    if (other) {
      violations.push(
        `${use.resource}: ${use.process} used it at ${use.timeMs.toFixed(1)} after its validity, while ${other.process} held it`,
      );
    }
  }
  return result("MX", violations, { holds: holds.length, uses: uses.length });
}

/** ID: no duplicates; an ID call that returned before another was invoked got smaller IDs. */
export function checkIds(events: readonly HistoryEvent[]): CheckResult {
  const calls = pairs(events)
    .filter((p) => p.invoke.op === "ids" && p.done?.type === "ok")
    .map((p) => ({
      process: p.invoke.process,
      start: p.invoke.timeMs,
      end: p.done!.timeMs,
      ids: ((p.done!.value as { ids: string[] }).ids ?? []).map(BigInt),
    }));
  const violations: string[] = [];
  const seen = new Map<bigint, string>();
  for (const c of calls) {
    for (const id of c.ids) {
      const other = seen.get(id);
      if (other) violations.push(`duplicate ID ${id}: ${other} and ${c.process}`);
      else seen.set(id, c.process);
    }
  }
  const byEnd = [...calls].sort((a, b) => a.end - b.end);
  const byStart = [...calls].sort((a, b) => a.start - b.start);
  let maxDone: { id: bigint; process: string } | undefined;
  let i = 0;
  for (const c of byStart) {
    while (i < byEnd.length && byEnd[i]!.end < c.start) {
      const top = byEnd[i]!.ids.reduce((a, b) => (b > a ? b : a), -1n);
      if (!maxDone || top > maxDone.id) maxDone = { id: top, process: byEnd[i]!.process };
      i++;
    }
    const low = c.ids.reduce((a, b) => (b < a ? b : a), c.ids[0] ?? 0n);
    if (maxDone && c.ids.length > 0 && low <= maxDone.id) {
      violations.push(
        `${c.process} got ${low} at ${c.start.toFixed(1)}, not above ${maxDone.id} returned earlier to ${maxDone.process}`,
      );
    }
  }
  return result("ID", violations.slice(0, 50), { calls: calls.length, ids: seen.size });
}

/** RS: accepted writes of a resource's value rise by one (no lost update) and never with a lower fence. */
export function checkResource(events: readonly HistoryEvent[]): CheckResult {
  const writes = pairs(events).filter((p) => p.invoke.op === "write");
  const violations: string[] = [];
  let refused = 0;
  const last = new Map<string, { value: number; fence?: bigint; process: string }>();
  const accepted = writes
    .filter((w) => w.done?.type === "ok")
    .sort((a, b) => a.done!.timeMs - b.done!.timeMs);
  refused = writes.filter((w) => w.done?.error?.code === "STALE_FENCE").length;
  for (const w of accepted) {
    const r = w.invoke.resource!;
    const v = w.invoke.value as { value: number; fence?: string };
    const fence = v.fence === undefined ? undefined : BigInt(v.fence);
    const prev = last.get(r);
    if (prev && v.value !== prev.value + 1) {
      violations.push(
        `${r}: ${w.invoke.process} wrote ${v.value} after ${prev.process} wrote ${prev.value} (lost update)`,
      );
    }
    if (prev?.fence !== undefined && fence !== undefined && fence < prev.fence) {
      violations.push(
        `${r}: stale fence ${fence} of ${w.invoke.process} accepted after ${prev.fence}`,
      );
    }
    last.set(r, { value: v.value, fence, process: w.invoke.process });
  }
  return result("RS", violations, { writes: accepted.length, staleWritesRefused: refused });
}

/** LV: the workloads got work done (rows add their own liveness expectations). */
export function checkLiveness(events: readonly HistoryEvent[]): CheckResult {
  const done = pairs(events).filter((p) => p.done);
  const ok = done.filter((p) => p.done!.type === "ok").length;
  return result("LV", ok === 0 && done.length > 0 ? ["no operation succeeded"] : [], {
    ok,
    completed: done.length,
  });
}

/** HY: no unhandled rejection in any workload. */
export function checkHygiene(events: readonly HistoryEvent[]): CheckResult {
  const worst = new Map<string, number>();
  for (const e of events) {
    if (e.kind !== "sample") continue;
    worst.set(e.process, Math.max(worst.get(e.process) ?? 0, e.values.unhandledRejections ?? 0));
  }
  const violations = [...worst]
    .filter(([, n]) => n > 0)
    .map(([p, n]) => `${p}: ${n} unhandled rejection(s)`);
  return result("HY", violations, { processes: worst.size });
}

const checkers: Partial<Record<CheckerName, (events: readonly HistoryEvent[]) => CheckResult>> = {
  MX: checkMutualExclusion,
  ID: checkIds,
  RS: checkResource,
  LV: checkLiveness,
  HY: checkHygiene,
};

export function runChecker(name: CheckerName, events: readonly HistoryEvent[]): CheckResult {
  const check = checkers[name];
  if (!check) return { checker: name, verdict: "unknown", violations: [], stats: {} };
  return check(events);
}
