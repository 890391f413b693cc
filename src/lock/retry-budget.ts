/**
 * An acquire's retries as it spends them (acquire.ts): which of its rounds
 * and passed turns count against `retries`, and when a failed round was
 * its last.
 *
 * A round a release's notice woke a multi-resource waiter for counts
 * as a fraction of a retry (limits.noticedRoundsPerRetry): the notice
 * concerns one of its keys, and its round may be refused for another
 * still held (the nodes pass such a key on, and do not reserve it for
 * the waiter again for a while: heir-queue.ts, passOrKeep). Such
 * rounds also end with the time its retries stand for (`endMs`).
 * A single-key waiter's woken round is a contest for the only key it
 * needs, and counts as one.
 */

import type { Clock } from "../clock.js";
import { limits } from "../limits.js";
import type { ResolvedRetry } from "./options.js";

/** The retries of one acquire, counted as its rounds and turns go by. */
export class RetryBudget {
  private readonly retries: number;
  private readonly clock: Clock;
  /**
   * Attempts counted against `retries`, including turns that passed while
   * others went first; not those a release's notice woke a multi-resource
   * waiter for.
   */
  private counted = 0;
  /** Attempts a release's notice woke it for (counted apart). */
  private noticed = 0;
  /**
   * The end of the time its retries stand for (each wait at most delayMs +
   * jitterMs), from its first attempt: what bounds its notice-woken ones.
   */
  private readonly endMs: number;

  constructor(retry: ResolvedRetry, keyCount: number, clock: Clock) {
    this.retries = retry.retries;
    this.clock = clock;
    // Only a multi-resource waiter's rounds are bounded by it: the common
    // single-key call reads no clock here.
    this.endMs =
      keyCount > 1
        ? clock.now() + retry.retries * (retry.delayMs + retry.jitterMs)
        : Number.POSITIVE_INFINITY;
  }

  /** Every attempt made: the number an error reports. */
  get made(): number {
    return this.counted + this.noticed;
  }

  /** How many more attempts `retries` allows (turns passed count as attempts). */
  get left(): number {
    return this.retries - this.counted;
  }

  /** A round starts: one a release's notice woke a multi-resource waiter for, or any other. */
  roundStarted(noticeWoken: boolean): void {
    if (noticeWoken) this.noticed++;
    else this.counted++;
  }

  /** `turns` passed while others went first: each counts as an attempt. */
  passed(turns: number): void {
    this.counted += turns;
  }

  /** Whether the round that just failed (notice-woken or not, as it started) was the last. */
  spent(noticeWoken: boolean): boolean {
    const noticedRetries = Math.floor(this.noticed / limits.noticedRoundsPerRetry);
    if (this.counted + noticedRetries > this.retries) return true;
    return noticeWoken && this.clock.now() >= this.endMs;
  }
}
