/**
 * Reading fencing votes, and remembering the counters seen. A node that
 * granted the lock (or, in a fencing round, still holds it) votes yes with
 * {code, current_1, accepted_1, ...} (see fencing/scripts.ts): per
 * resource, whether it raised the counter to our proposal, and the value it
 * had. A token is committed when a majority accepted the same proposal.
 */

import { maxId, parseCounter } from "../decimal.js";
import { fenceLimits } from "../limits.js";
import type { RoundResult } from "../quorum/round.js";
import { fenceVote } from "./scripts.js";

export interface FenceTally {
  /** Per resource: how many granting nodes accepted the proposal. */
  readonly accepted: number[];
  /** Per resource: the highest counter value any node reported. */
  readonly highest: bigint[];
}

/** Whether a yes vote's reply accepted each of its `count` proposals. */
export function acceptedAll(reply: unknown, count: number): boolean {
  if (!Array.isArray(reply)) return false;
  for (let i = 0; i < count; i++) if (reply[2 + 2 * i] !== fenceVote.accepted) return false;
  return true;
}

/** The fencing votes of a round whose yes votes carry counters (an acquire with fences, a fence round). */
export function tallyFences(round: RoundResult<unknown>, count: number): FenceTally {
  const accepted = new Array<number>(count).fill(0);
  const highest = new Array<bigint>(count).fill(0n);
  for (const outcome of round.outcomes) {
    if (outcome?.kind !== "yes") continue;
    const reply = outcome.value as unknown[];
    for (let i = 0; i < count; i++) {
      const current = parseCounter(reply[1 + 2 * i]);
      if (current > highest[i]!) highest[i] = current;
      if (reply[2 + 2 * i] === fenceVote.accepted) accepted[i]!++;
    }
  }
  return { accepted, highest };
}

/**
 * How many nodes that voted yes in `round` reported resource `index`'s
 * counter at the last token (2^63 - 1). Counters never go down (a node that
 * lost its memory is raised from the others before it votes again), so
 * such a node can never accept another token for it.
 */
export function nodesAtLastToken(round: RoundResult<unknown>, index: number): number {
  let count = 0;
  for (const outcome of round.outcomes) {
    if (outcome?.kind !== "yes") continue;
    if (parseCounter((outcome.value as unknown[])[1 + 2 * index]) === maxId) count++;
  }
  return count;
}

/**
 * What this client last saw of each resource's counter, so the next
 * proposal is usually right the first time. Bounded: the oldest entries go.
 */
export class FenceMemory {
  private readonly known = new Map<string, bigint>();
  private readonly limit: number;

  constructor(limit: number = fenceLimits.memoryEntriesMax) {
    this.limit = limit;
  }

  /**
   * One above the highest value seen, at most 2^63 - 1: tokens stay within
   * a signed 64-bit integer (a store's BIGINT column, Redis' INCR), so a
   * counter already there refuses it and the grant fails: the resource has
   * no token left.
   */
  proposal(resource: string): bigint {
    const next = (this.known.get(resource) ?? 0n) + 1n;
    return next > maxId ? maxId : next;
  }

  learn(resource: string, value: bigint): void {
    const before = this.known.get(resource);
    if (before !== undefined && before >= value) return;
    this.known.delete(resource);
    this.known.set(resource, value);
    if (this.known.size > this.limit) {
      const oldest = this.known.keys().next().value;
      if (oldest !== undefined) this.known.delete(oldest);
    }
  }
}
