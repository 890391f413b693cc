/**
 * In-process handoff accounting. A release can hand its keys to a waiter
 * of the same instance for exactly those keys (see wait-queue.ts): the
 * heir's acquire round replaces the releasing lock's value where it still
 * holds it, instead of a release round plus an acquire round. Here: what
 * the heir's round tells the releaser, node by node, and how the releaser
 * counts those answers as its own release votes.
 */

import type { RoundResult } from "../quorum/round.js";
import { othersWaitAfterHandoff, replacedHandedOff } from "./acquire-reply.js";
import type { Waiter } from "./waiter.js";

/** What the releasing lock passes to the waiter it hands off to. */
export interface Handoff {
  /** The releasing lock's value: the heir's acquire may replace it. */
  readonly fromValue: string;
  /**
   * Called once by the heir: `replaced[i]` tells whether node i still held
   * `fromValue` (now replaced by the heir's value), `won` whether the heir
   * got the lock. If it did not, the releaser still has to release.
   */
  settle(outcome: HandoffOutcome): void;
}

export interface HandoffOutcome {
  readonly won: boolean;
  /** Per node: it held the releasing lock's value and the heir replaced it. */
  readonly replaced: readonly boolean[];
  /** Per node: it answered the heir, but did not hold the releasing lock's value. */
  readonly notHeld: readonly boolean[];
  /**
   * Per node: the heir's call was sent there, so it may have run even
   * unanswered. A call never sent (the heir's signal aborted, or the
   * instance closed, before its round) touched nothing of ours. Complete
   * only for a handoff the heir did not win (see `settleHandoff`), the one
   * case that reads it.
   */
  readonly sent: readonly boolean[];
  /** Some node that granted the heir said a waiter of another instance heads its queue. */
  readonly othersWait: boolean;
  /**
   * For a handoff the heir won (settled at once, before its slower nodes
   * answered): the outcome once every call of its round settled.
   */
  readonly final?: Promise<HandoffOutcome>;
}

/** Hands a release of the lock with value `fromValue` to a parked heir; settles once its round did. */
export function handOff(heir: Waiter, fromValue: string): Promise<HandoffOutcome> {
  return new Promise<HandoffOutcome>((settle) => heir.handOff({ fromValue, settle }));
}

/**
 * What an heir's acquire round tells the releasing lock, node by node;
 * `round` undefined when the heir never got to its round. A handoff the
 * heir did not win is judged once every call of its round settled
 * (`round.done`): a node with no outcome then was never sent the call.
 */
export function handoffOutcome(
  round: RoundResult<unknown> | undefined,
  won: boolean,
  nodeCount: number,
): HandoffOutcome {
  const replaced: boolean[] = new Array(nodeCount).fill(false);
  const notHeld: boolean[] = new Array(nodeCount).fill(false);
  const sent: boolean[] = new Array(nodeCount).fill(false);
  let othersWait = false;
  // `settled` holds every outcome `outcomes` does, and those that came after the round ended.
  round?.settled.forEach((outcome, i) => {
    if (outcome === undefined) return;
    sent[i] = true;
    if (outcome.kind === "error") return;
    if (outcome.kind === "yes" && replacedHandedOff(outcome.value)) {
      replaced[i] = true;
      othersWait ||= othersWaitAfterHandoff(outcome.value);
    } else notHeld[i] = true;
  });
  return { won, replaced, notHeld, sent, othersWait };
}

/**
 * Settles `handoff` with what the heir's round told, once it can be told:
 * at once for a grant or a round never begun, else when every call of the
 * round settled (within the round's node timeout), so that a node not yet
 * heard from is known to have been sent the call or not.
 */
export function settleHandoff(
  handoff: Handoff,
  round: RoundResult<unknown> | undefined,
  won: boolean,
  nodeCount: number,
): void {
  if (round === undefined) handoff.settle(handoffOutcome(round, won, nodeCount));
  else if (won) {
    const final = round.done.then(() => handoffOutcome(round, true, nodeCount));
    handoff.settle({ ...handoffOutcome(round, true, nodeCount), final });
  } else void round.done.then(() => handoff.settle(handoffOutcome(round, false, nodeCount)));
}

/**
 * A release's votes: nodes where our value was gone by our hand, or that
 * never held the lock and have none of its keys (yes), or where it was gone
 * before (no).
 */
export interface ReleaseVotes {
  readonly yes: number;
  readonly no: number;
  /** The nodes that said no, by index: a failed release names them. */
  readonly noAt: readonly number[];
  /** Of the yes votes, the nodes that never held the lock: none held it until the release. */
  readonly neverHeld: number;
}

/** The votes of a release the heir took over: where it found our value, ours is gone. */
export function handedOffVotes(handedOff: HandoffOutcome): ReleaseVotes {
  let yes = 0;
  const noAt: number[] = [];
  for (let i = 0; i < handedOff.replaced.length; i++) {
    if (handedOff.replaced[i]) yes++;
    else if (handedOff.notHeld[i]) noAt.push(i);
  }
  return { yes, no: noAt.length, noAt, neverHeld: 0 };
}

/**
 * The votes of a release round, after a handoff the heir did not win (if
 * any): a node where the heir replaced our value released it.
 */
export function releaseVotes(
  round: Pick<RoundResult<unknown>, "outcomes">,
  handedOff: HandoffOutcome | undefined,
  neverHeld: (index: number) => boolean = () => false,
): ReleaseVotes {
  let yes = 0;
  let neverHeldCount = 0;
  const noAt: number[] = [];
  round.outcomes.forEach((outcome, i) => {
    // Where the heir's answer was lost (a timeout: say the event loop
    // stalled), its script may still have replaced our value, and its
    // clean-up deleted it: our value being gone there is no sign that
    // the lock was lost (it was within its validity when handed over).
    // Where its call was never sent, it touched nothing: judged as ever.
    const heirUnknown =
      handedOff?.sent[i] === true && !handedOff.replaced[i] && !handedOff.notHeld[i];
    if (handedOff?.replaced[i] || outcome?.kind === "yes") yes++;
    else if (outcome?.kind === "no") {
      if (heirUnknown) yes++;
      else if (neverHeld(i)) {
        // It refused the lock and has none of our keys: released, and it
        // held nothing of the lock until now.
        yes++;
        neverHeldCount++;
      } else noAt.push(i);
    }
  });
  return { yes, no: noAt.length, noAt, neverHeld: neverHeldCount };
}
