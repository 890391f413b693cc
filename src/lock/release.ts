/**
 * Releasing a lock: hand it to a waiter of this instance, or delete our
 * keys on every node, where each node reserves the key for the head of its
 * queue and tells that waiter (heir-queue.ts); then whether the lock was
 * still ours on a majority. Also the release round itself, which a failed acquire
 * attempt runs to undo what it set.
 */

import { LockExpiredError, NodeError } from "../errors.js";
import { limits } from "../limits.js";
import type { RoundResult, RoundStop } from "../quorum/round.js";
import type { LockContext } from "./context.js";
import {
  type HandoffOutcome,
  handedOffVotes,
  handOff,
  type ReleaseVotes,
  releaseVotes,
} from "./handoff.js";
import type { Lock } from "./lock.js";
import { instanceOfWaiter } from "./queue-keys.js";
import { type QueueArgs, registrationArgs } from "./queue-registration.js";
import { heirOf, releasedCount, releaseScript, waitersQueued } from "./release-script.js";
import { Waiter } from "./waiter.js";

export type ReleaseContext = Pick<
  LockContext,
  | "group"
  | "options"
  | "waits"
  | "watch"
  | "turns"
  | "timer"
  | "assertOpen"
  | "isClosed"
  | "track"
  | "wakeLater"
>;

/**
 * Releases `lock`; `expired`: its validity had run out when `release()` was
 * called (the keys are still deleted, then it rejects).
 */
export async function releaseLock(
  context: ReleaseContext,
  lock: Lock,
  expired: boolean,
): Promise<void> {
  context.assertOpen();
  // A waiter of this instance for exactly these keys takes them over in
  // its own acquire round (the keys hold our value until it replaces it):
  // one round per grant instead of a release round plus an acquire round.
  const heir = expired ? undefined : context.waits.heirFor(lock.keys, limits.handoffRunMin);
  const handedOff = heir instanceof Waiter ? await handOff(heir, lock.value) : undefined;
  if (handedOff?.won) {
    // Another instance's waiter heads a node's queue: this run of handoffs
    // ends soon, however long runs grew while nobody else waited.
    if (handedOff.othersWait) context.waits.othersWait(lock.keys[0]!, limits.handoffRunMin);
    if (handedOff.final) void context.track(clearLeftBehind(context, lock, handedOff.final));
    // The heir holds a majority now; where it found our value, ours is gone.
    return assertHeldUntilRelease(context, lock, handedOffVotes(handedOff));
  }
  // Within this instance's turn the key is left free for its next acquire
  // instead of being reserved for another instance's waiter (turns.ts).
  const turn =
    heir === undefined ? context.turns.turnOf(lock, context.options.clock.now()) : undefined;
  const round =
    turn !== undefined
      ? await keptRelease(context, lock, turn)
      : await announcedRelease(context, lock, heir === "yield");
  const neverHeld = (index: number) => lock.neverHeldBy(index);
  let judged = round;
  if (round.yesCount < context.group.quorum) {
    // Fewer than a majority deleted our keys by the time the round was
    // decided. The nodes that refused the lock count as released (a lock
    // granted by 3 of 5 nodes, one of which went down, could otherwise
    // never be released), but only every answer says whether those that
    // held it still did: each call is bounded by the round's timeout.
    await round.done;
    judged = { ...round, outcomes: round.settled };
  }
  const votes = releaseVotes(judged, handedOff, neverHeld);
  if (expired) throw new LockExpiredError("release", lock.resources);
  assertHeldUntilRelease(context, lock, votes);
  if (votes.yes < context.group.quorum) {
    // The nodes that answered without our value are named beside those
    // that failed: "reached 2 of 5" alone left an operator to guess why.
    const { nodes } = context.group;
    const gone = votes.noAt.map(
      (index) =>
        new NodeError(
          nodes[index]!.endpoint,
          new Error("no longer held this lock's value (expired there, or deleted)"),
        ),
    );
    throw context.group.quorumError("release", { ...judged, yesCount: votes.yes }, undefined, gone);
  }
}

/**
 * After a handoff the heir won: where its call failed or was never sent,
 * our value may still hold the keys, and would keep them from every caller
 * there until they expire. A release there (it deletes only our value)
 * frees them. Never rejects: the keys expire anyway.
 */
async function clearLeftBehind(
  context: ReleaseContext,
  lock: Lock,
  final: Promise<HandoffOutcome>,
): Promise<void> {
  const { replaced, notHeld } = await final;
  const left = (index: number) => !replaced[index] && !notHeld[index] && !lock.neverHeldBy(index);
  if (context.isClosed() || !context.group.nodes.some((_, index) => left(index))) return;
  await releaseKeys(context, lock.keys, lock.value, "all", { mayHold: left }).catch(() => {});
}

/** Rejects a release that found the lock gone from a majority: it was lost before. */
function assertHeldUntilRelease(
  context: Pick<LockContext, "group">,
  lock: Lock,
  votes: ReleaseVotes,
): void {
  const { quorum, nodes } = context.group;
  // Nodes without our keys at the release: those that lost them, and those
  // that never had them (they count as released, but held nothing of the
  // lock until now). More than N - Q: fewer than a majority held it.
  const without = votes.no + votes.neverHeld;
  if (without > nodes.length - quorum) {
    throw new LockExpiredError(
      "release",
      lock.resources,
      `released, but the lock was no longer held on a majority (${without} of ` +
        `${nodes.length} nodes did not have our value): it was lost before release`,
    );
  }
}

/**
 * The release round of a lock not handed off, and what it means for the
 * waiters: the nodes reserve the key for the head of their queue and tell
 * it. If that heir is ours, it is woken now; if no node named one, our own
 * first waiter tries. With `yielding` (a run of handoffs ended) the next
 * run is short while a waiter of another instance was the heir.
 */
async function announcedRelease(
  context: ReleaseContext,
  lock: Lock,
  yielding: boolean,
): Promise<RoundResult<unknown>> {
  const { waits, watch } = context;
  const round = await releaseKeys(context, lock.keys, lock.value, "decided", {
    timeoutMs: limits.releaseWaitMs,
    reserveMs: limits.heirReservationMs,
    notify: watch.available,
    instanceId: watch.instanceId,
  });
  const heir = round.outcomes
    .map((outcome) => (outcome?.kind === "error" ? undefined : heirOf(outcome?.value)))
    .find(Boolean);
  const key = lock.keys[0]!;
  waits.reallyReleased(key);
  const heirElsewhere = heir !== undefined && instanceOfWaiter(heir) !== watch.instanceId;
  if (heir !== undefined && !heirElsewhere) waits.wakeHeir(heir);
  if (yielding) waits.yielded(key, heirElsewhere, limits.handoffRunMin, limits.handoffRunMax);
  // No node named an heir: our own first waiter tries — after a yield as
  // late as a notice would come, so pollers elsewhere have a window too.
  if (heir === undefined) {
    if (yielding) context.wakeLater(key);
    else waits.released(lock.keys);
  }
  return round;
}

/**
 * The release round of a lock whose instance's turn goes on: the key is
 * freed and not reserved, and our own first waiter may try. If the nodes
 * have waiters queued and no acquire of the key by this instance follows at
 * once, the turn passes: a second release round, which finds none of our
 * keys left (its value is this lock's), reserves the key for the head of
 * each node's queue and tells that waiter, as an announced release does.
 */
async function keptRelease(
  context: ReleaseContext,
  lock: Lock,
  turnBegan: number,
): Promise<RoundResult<unknown>> {
  const round = await releaseKeys(context, lock.keys, lock.value, "decided", {
    timeoutMs: limits.releaseWaitMs,
    keep: true,
    instanceId: context.watch.instanceId,
  });
  const queued = round.outcomes.some(
    (outcome) => outcome?.kind !== "error" && waitersQueued(outcome?.value),
  );
  // Nobody queued on the nodes: nobody else to let in, the run of handoffs starts again.
  if (!queued) context.waits.reallyReleased(lock.keys[0]!);
  const passTurn = () => announcedRelease(context, lock, false);
  if (context.isClosed()) {
    // Closing: nobody of ours will retake it, and a pass left for later
    // would find the connections closed. This release passes it itself.
    if (queued) await passTurn().catch(() => {});
    return round;
  }
  // A pass left for later is tracked: close() runs it at once and waits.
  context.turns.kept(lock.keys[0]!, turnBegan, queued, context.timer, () => {
    void context.track(passTurn()).catch(() => {});
  });
  context.waits.released(lock.keys);
  return round;
}

/** What a release round does besides deleting our keys (see releaseScript). */
export interface ReleaseRoundOptions {
  /** Bound on each node's answer (ms); `nodeTimeoutMs` by default (a lock's release: `limits.releaseWaitMs`). */
  readonly timeoutMs?: number;
  /** Reserve each key left free for its queue's head this long (ms); 0 or absent: no reservation. */
  readonly reserveMs?: number;
  /**
   * The releaser's turn goes on: a key it freed that has waiters is
   * reserved for its own instance (`instanceId`) for a moment instead, and
   * the reply says whether anyone is queued.
   */
  readonly keep?: boolean;
  /**
   * The releasing instance: a reservation for it counts as none (its turn
   * ends here); with `keep`, the instance the key is reserved for.
   */
  readonly instanceId?: string;
  /** Publish the reservation to the heir's instance. */
  readonly notify?: boolean;
  /** Queue this waiter on the nodes after the delete (a failed attempt keeps its place). */
  readonly requeue?: QueueArgs;
  /** Which nodes get the call (the others are known to hold none of our keys, and need no requeue). */
  readonly mayHold?: (index: number) => boolean;
}

/**
 * Release script on every node, sent at once (each node runs it after the
 * lock's earlier calls: one connection per node keeps their order, and
 * `RedisNode` never lets a NOSCRIPT retry overtake a later command). With
 * `stop: "decided"` it resolves once the outcome is known (the rest complete in
 * the background, and `close()` waits for them); a failed acquire attempt
 * waits for every node instead, so no key of the attempt is left when the
 * next attempt or the error comes.
 */
export function releaseKeys(
  context: Pick<LockContext, "group" | "options">,
  keys: readonly string[],
  value: string,
  stop: RoundStop,
  options: ReleaseRoundOptions = {},
): Promise<RoundResult<unknown>> {
  // A node votes yes when it deleted every key: then the lock was still ours there.
  const isYes = (reply: unknown) => releasedCount(reply) === keys.length;
  const { reserveMs = 0, keep = false, notify = false, requeue, mayHold = () => true } = options;
  const args = keep
    ? [value, "keep", String(limits.turnReservationMs)]
    : [value, String(reserveMs), notify ? "1" : "0"];
  args.push(options.instanceId ?? "");
  if (requeue) args.push(...registrationArgs(requeue));
  // A node skipped deleted nothing, and needs nothing deleted: its answer is
  // never read as a vote (only an undo passes mayHold, and reads no votes).
  const skipped = Promise.resolve(keys.length);
  return context.group.round((node) => node.evalScript(releaseScript, keys, args), {
    isYes,
    skip: (index) => (mayHold(index) ? undefined : skipped),
    stop,
    timeoutMs: options.timeoutMs ?? context.options.nodeTimeoutMs,
    // A release protects no validity: a node's answer, read late because
    // this process stalled, still says whether it deleted our keys.
    acceptLateReplies: true,
  });
}
