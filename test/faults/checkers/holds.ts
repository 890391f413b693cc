/**
 * Holds as the client sees them: from acquire's `ok` to the earlier of its
 * release's invocation and its validity deadline (moved by `extend` oks).
 * An `info` acquire may or may not hold, so it makes no hold: counting it
 * would flag overlaps the lock never allowed.
 */

import { decimal, finite, groupBy, type Operation } from "./operations.js";
import type { Hold } from "./sweeps.js";

export interface LockHold extends Hold {
  readonly resource: string;
  /** The fencing token, when the acquire returned one. */
  readonly fence: bigint | undefined;
  readonly acquire: Operation;
  /** Why the hold ended: the release call, or the validity deadline. */
  readonly endedBy: "release" | "validity";
}

export interface ExtractedHolds {
  readonly holds: LockHold[];
  /** Acquires that returned an already-expired lock (validUntilMs ≤ ok time): no hold. */
  readonly expiredOnReturn: Operation[];
  readonly infoAcquires: number;
}

/** The holds of every process on every resource, from paired operations. */
export function extractHolds(operations: readonly Operation[]): ExtractedHolds {
  const holds: LockHold[] = [];
  const expiredOnReturn: Operation[] = [];
  let infoAcquires = 0;
  const lockOps = operations.filter(
    (op) => op.op === "acquire" || op.op === "release" || op.op === "extend",
  );
  for (const ops of groupBy(lockOps, (op) => `${op.process}\u0000${op.resource}`).values()) {
    let open: { acquire: Operation; startMs: number; validUntilMs: number } | undefined;
    const close = (endMs: number, endedBy: LockHold["endedBy"]) => {
      if (!open) return;
      const validityEnds = open.validUntilMs <= endMs;
      const hold = makeHold(open, validityEnds ? open.validUntilMs : endMs);
      holds.push({ ...hold, endedBy: validityEnds ? "validity" : endedBy });
      open = undefined;
    };
    for (const op of ops) {
      if (op.op === "release") close(op.invokeMs, "release");
      if (op.op === "extend" && op.type === "ok" && open) {
        open.validUntilMs = finite(op.result.validUntilMs, op, "extend's validUntilMs");
      }
      if (op.op !== "acquire") continue;
      if (op.type === "info") infoAcquires++;
      if (op.type !== "ok") continue;
      // A second acquire without a release: the first hold lasted at most
      // until its validity or until this one was asked for.
      close(op.invokeMs, "release");
      const validUntilMs = finite(op.result.validUntilMs, op, "acquire's validUntilMs");
      if (validUntilMs <= op.completeMs) expiredOnReturn.push(op);
      else open = { acquire: op, startMs: op.completeMs, validUntilMs };
    }
    close(Number.POSITIVE_INFINITY, "validity");
  }
  return { holds, expiredOnReturn, infoAcquires };
}

function makeHold(
  open: { acquire: Operation; startMs: number },
  endMs: number,
): Omit<LockHold, "endedBy"> {
  const { acquire } = open;
  const fence = acquire.result.fence;
  return {
    client: acquire.process,
    resource: acquire.resource ?? "",
    startMs: open.startMs,
    endMs,
    fence: fence === undefined ? undefined : decimal(fence, acquire, "acquire's fence"),
    acquire,
  };
}

/** "lock-1 op 3 held x 10.000–25.000 ms (fence 7, ended by release)". */
export function describeHold(hold: LockHold): string {
  const fence = hold.fence === undefined ? "" : `fence ${hold.fence}, `;
  return (
    `${hold.client} op ${hold.acquire.opId} held ${hold.resource} ` +
    `${hold.startMs.toFixed(3)}–${hold.endMs.toFixed(3)} ms (${fence}ended by ${hold.endedBy})`
  );
}
