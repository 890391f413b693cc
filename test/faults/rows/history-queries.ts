/** Small queries over a merged history for the rows' own `verify` steps. */
import type { HistoryEvent, OpEvent, OpName } from "../history.js";

export interface Call {
  readonly invoke: OpEvent;
  readonly done: OpEvent | undefined;
}

export function calls(events: readonly HistoryEvent[], op?: OpName, process?: string): Call[] {
  const open = new Map<string, { invoke: OpEvent; done: OpEvent | undefined }>();
  const out: Array<{ invoke: OpEvent; done: OpEvent | undefined }> = [];
  for (const e of events) {
    if (e.kind !== "op") continue;
    const key = `${e.process}#${e.opId}`;
    if (e.type === "invoke") {
      if ((op && e.op !== op) || (process && e.process !== process)) continue;
      const call = { invoke: e, done: undefined };
      open.set(key, call);
      out.push(call);
    } else {
      const call = open.get(key);
      if (call) call.done = e;
    }
  }
  return out;
}

export const ok = (c: Call) => c.done?.type === "ok";

/** The fault's [start, end] windows with this name (end: Infinity while it lasts). */
export function faultWindows(
  events: readonly HistoryEvent[],
  fault: string,
): Array<[number, number]> {
  const starts = new Map<number, number>();
  const windows: Array<[number, number]> = [];
  for (const e of events) {
    if (e.kind !== "fault" || e.fault !== fault) continue;
    if (e.phase === "start") starts.set(e.faultId, e.timeMs);
    else if (starts.has(e.faultId)) windows.push([starts.get(e.faultId)!, e.timeMs]);
  }
  return windows;
}

/**
 * Validity accounting: no granted lock claims more than its TTL from the
 * moment it was returned (the attempt that won started after the
 * invocation when it retried), nor comes back already expired. "Expired"
 * is judged at the completion's last timer turn (history.ts, timerTurnMs),
 * before which the library cannot have made its last check: a validity
 * that ended between that turn and the record is a process stopped in
 * between, which the library cannot see, not a lock returned expired. A
 * library that returns a lock whose round outlasted the validity is still
 * caught: the process waits for the round's replies with timers turning.
 */
export function validityViolations(events: readonly HistoryEvent[]): string[] {
  return calls(events, "acquire")
    .filter(ok)
    .flatMap((c) => {
      const ttlMs = Number(c.invoke.value?.ttlMs);
      const validUntilMs = Number(c.done!.value?.validUntilMs);
      return validUntilMs > c.done!.timeMs + ttlMs
        ? [
            `${c.invoke.process}: validity until ${validUntilMs.toFixed(1)} beyond return + ttl ${(c.done!.timeMs + ttlMs).toFixed(1)}`,
          ]
        : validUntilMs <= (c.done!.timerTurnMs ?? c.done!.timeMs)
          ? [
              `${c.invoke.process}: acquire returned an expired lock (validity ends ${validUntilMs.toFixed(1)}, returned ${c.done!.timeMs.toFixed(1)}, last timer turn before it ${(c.done!.timerTurnMs ?? Number.NaN).toFixed(1)})`,
            ]
          : [];
    });
}
