import { parseCounter } from "../decimal.js";
import type { RoundResult } from "../quorum/round.js";

/**
 * Reading fencing votes. A node that granted the lock (or, in a fencing
 * round, still holds it) answers {1, current_1, accepted_1, ...}: per
 * resource, whether it raised the counter to our proposal, and the value it
 * had. A token is committed when a majority accepted the same proposal.
 */
export function isGrantReply(reply: unknown): boolean {
  return Array.isArray(reply) && (reply[0] === 1 || reply[0] === 2);
}

export interface FenceTally {
  /** Per resource: how many granting nodes accepted the proposal. */
  readonly accepted: number[];
  /** Per resource: the highest counter value any node reported. */
  readonly highest: bigint[];
}

export function tallyFences(round: RoundResult<unknown>, count: number): FenceTally {
  const accepted = new Array<number>(count).fill(0);
  const highest = new Array<bigint>(count).fill(0n);
  for (const outcome of round.outcomes) {
    if (!outcome || outcome.kind === "error" || !isGrantReply(outcome.value)) continue;
    const reply = outcome.value as unknown[];
    for (let i = 0; i < count; i++) {
      const current = parseCounter(reply[1 + 2 * i]);
      if (current > highest[i]!) highest[i] = current;
      if (reply[2 + 2 * i] === 1) accepted[i]!++;
    }
  }
  return { accepted, highest };
}

/** The counter key of a resource's fencing tokens. */
export function fenceKeyOf(keyPrefix: string, resource: string): string {
  return `redquorum:fence:${keyPrefix}${resource}`;
}

/**
 * What this client last saw of each resource's counter, so the next
 * proposal is usually right the first time. Bounded: the oldest entries go.
 */
export class FenceMemory {
  private readonly known = new Map<string, bigint>();
  private readonly limit: number;

  constructor(limit = 10_000) {
    this.limit = limit;
  }

  proposal(resource: string): bigint {
    return (this.known.get(resource) ?? 0n) + 1n;
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
