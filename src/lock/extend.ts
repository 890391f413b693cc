/**
 * Extending a lock: one round that sets the TTL of every key again where
 * the keys still hold our value, and the new validity, counted from the
 * start of the round — or why it could not be extended.
 */

import { LockExpiredError } from "../errors.js";
import type { RoundResult } from "../quorum/round.js";
import { validUntilMs } from "../quorum/validity.js";
import { requireTtl } from "./call-arguments.js";
import type { LockContext } from "./context.js";
import { extendArgs, extendScript, isExtended } from "./extend-script.js";
import type { Extension, Lock } from "./lock.js";

export type ExtendContext = Pick<
  LockContext,
  "group" | "options" | "run" | "quarantineArg" | "assertOpen" | "track"
>;

/** Extends `lock` to `ttlMs` from now; resolves to its new end of validity and the nodes' answers. */
export async function extendLock(
  context: ExtendContext,
  lock: Lock,
  ttlMs: number,
  signal: AbortSignal | undefined,
): Promise<Extension> {
  context.assertOpen();
  const { options, group } = context;
  const ttl = requireTtl(ttlMs, options);
  signal?.throwIfAborted();
  if (group.refused) throw group.refused;
  if (lock.remainingMs() <= 0) throw new LockExpiredError("extend", lock.resources);
  const startMs = options.clock.now();
  const validUntil = validUntilMs(startMs, ttl, options.driftFactor, options.driftMs);
  const args = extendArgs(lock.value, ttl, context.quarantineArg);
  const round = await context.track(
    group.round((node, index) => context.run(node, index, extendScript, lock.keys, args), {
      isYes: isExtended,
      stop: "decided",
      signal,
      timeoutMs: options.nodeTimeoutMs,
    }),
  );
  if (round.yesCount >= group.quorum && validUntil > options.clock.now() && !round.aborted) {
    return { validUntilMs: validUntil, holders: round.settled, answered: round.done };
  }
  // Failed, but some nodes may have applied the new TTL: never trust more
  // than that TTL gives from the start of this call.
  lock.limitValidity(validUntil);
  // Judged at once on the answers so far, a node still to answer taken to
  // hold our keys (its grant may have timed out and still landed): lost
  // even then, it is lost for sure, and must not wait for the slowest
  // node. Otherwise judged again once every node answered: the round ends
  // once decided, and later answers (each within the node timeout) may
  // still say our keys are gone.
  const endpoints = group.nodes.map((node) => node.endpoint);
  const lostNow = judgeHolders(lock, round, group.quorum, "yes", endpoints);
  if (round.aborted) throw signal?.reason;
  if (!lostNow) await round.done;
  if (lostNow || judgeHolders(lock, round, group.quorum, undefined, endpoints)) {
    throw new LockExpiredError(
      "extend",
      lock.resources,
      `cannot extend: the lock is no longer held on a majority (${countNo(round)} of ` +
        `${group.nodes.length} nodes no longer have our value)`,
    );
  }
  throw extendFailure(context, lock, ttl, round);
}

/**
 * Nodes that held our keys and now say they do not (expired early,
 * evicted, deleted, restarted): if the nodes holding them now (those that
 * just said so, and the holders that did not say otherwise) are fewer than
 * a majority, another client may hold the lock, and ours has no validity
 * left, whatever its TTL said. A node with no answer yet counts as
 * `unanswered` says. Whether it was lost so.
 */
function judgeHolders(
  lock: Lock,
  round: RoundResult<unknown>,
  quorum: number,
  unanswered: "yes" | undefined,
  endpoints: readonly string[],
): boolean {
  const { settled } = round;
  return lock.loseIfNotHeld((i) => settled[i]?.kind ?? unanswered, quorum, endpoints);
}

function countNo(round: RoundResult<unknown>): number {
  return round.settled.filter((outcome) => outcome?.kind === "no").length;
}

/** Why a round that did not extend the lock failed: too slow, the lock gone, or too few nodes. */
function extendFailure(
  context: Pick<LockContext, "group">,
  lock: Lock,
  ttl: number,
  round: RoundResult<unknown>,
): Error {
  const { group } = context;
  if (round.yesCount >= group.quorum) {
    return new LockExpiredError(
      "extend",
      lock.resources,
      `a majority extended ${JSON.stringify(lock.resources[0])} but the validity ran out during ` +
        `the round (TTL ${ttl} ms): nodes answered too slowly for this TTL`,
    );
  }
  // A list the cluster's members no longer fit: say so, not "too few nodes".
  return group.refused ?? group.quorumError("extend", round);
}
