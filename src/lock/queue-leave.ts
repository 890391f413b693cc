/** A waiter leaving the nodes' queues (heir-queue.ts), when it gave up or was granted. */

import { limits } from "../limits.js";
import type { LockContext } from "./context.js";
import { leaveQueueScript } from "./release-script.js";

/**
 * Leaves the queues of `keys` on the nodes `where` says (a caller that gave
 * up: all; one granted: those that refused), and a reservation made for it
 * there passes on. Never rejects (the registrations expire anyway).
 */
export async function leaveNodeQueues(
  context: Pick<LockContext, "group" | "options" | "watch" | "track">,
  keys: readonly string[],
  waiterId: string,
  where: (index: number) => boolean,
): Promise<void> {
  const { group, options, watch } = context;
  if (!group.nodes.some((_, index) => where(index))) return;
  // Also while the instance closes (close() ended the wait): close() waits
  // for this, with the connections still open, and a waiter left queued
  // would be the heir of the next release, keeping the key from every other
  // caller until its reservation lapsed.
  const args = [waiterId, String(limits.heirReservationMs), watch.available ? "1" : "0"];
  const skipped = Promise.resolve(0);
  try {
    const leaving = group.round((node) => node.evalScript(leaveQueueScript, keys, args), {
      isYes: () => true,
      skip: (index) => (where(index) ? undefined : skipped),
      stop: "all",
      timeoutMs: options.nodeTimeoutMs,
    });
    await context.track(leaving);
  } catch {
    // the registrations expire anyway
  }
}
