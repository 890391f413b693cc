/**
 * A granted lock as its holder sees it: keys, value, fencing tokens and
 * validity, with extend and release, which it passes back to the Redlock
 * that granted it (`LockOwner`).
 */

import type { Clock } from "../clock.js";
import { LockExpiredError } from "../errors.js";
import { rejectUnknownOptions, requireOptionsObject, requireSignal } from "../validate.js";

/** Per node, its answer in a round, filled in as late answers come (see `Lock.holders`). */
export type NodeAnswers = ReadonlyArray<{ readonly kind: string } | undefined>;

/** A successful extension: the new validity, each node's answer, and when all are in. */
export interface Extension {
  readonly validUntilMs: number;
  readonly holders: NodeAnswers;
  /** Resolves once every node answered or timed out (the round's `done`). */
  readonly answered: Promise<void>;
}

/** What a Lock needs from the Redlock that granted it. Internal. */
export interface LockOwner {
  readonly clock: Clock;
  /** @internal */
  extendLock(lock: Lock, ttlMs: number, signal: AbortSignal | undefined): Promise<Extension>;
  /** @internal `valid`: whether the lock still had validity when `release()` was called. */
  releaseLock(lock: Lock, valid: boolean): Promise<void>;
}

/**
 * A granted lock. Valid until `validUntilMs` on the monotonic clock; after
 * that, mutual exclusion is no longer guaranteed and `extend` fails.
 * `release()` is idempotent, and `await using` releases on scope exit.
 */
export class Lock implements AsyncDisposable {
  /** The resources as given (without the key prefix). */
  readonly resources: readonly string[];
  /** The Redis keys (prefix + resource). */
  readonly keys: readonly string[];
  /** The random value (20 bytes, hex) that marks this grant's keys as ours. */
  readonly value: string;
  /** Nodes that granted the lock when it was acquired (the round may end before all answer). */
  readonly grantedNodeCount: number;
  /**
   * Fencing token per resource (with fencing on): strictly increasing across
   * every grant of that resource, by any client. Pass it to the protected
   * resource, which rejects a token lower than one it has seen.
   */
  readonly fences: ReadonlyMap<string, bigint>;
  private readonly owner: LockOwner;
  private validUntil: number;
  /**
   * Per node, the answer of the round that gave the current validity (the
   * grant, or the last extension), filled in as late answers come: the
   * nodes answering "yes" hold our keys until at least that validity.
   */
  private holders: NodeAnswers;
  /** Resolves once `holders` is complete: every node answered or timed out. */
  private answered: Promise<void>;
  private releasing: Promise<void> | undefined;
  /**
   * The extension running now, if any: extensions of one lock run one at a
   * time. Two that overlap could settle in either order while every node
   * applies them in the order sent, and the validity of the one that
   * settled last would win, though the keys carry the TTL of the one sent
   * last (a 30 s validity over keys that expire in 1 s).
   */
  private extending: Promise<unknown> = Promise.resolve();

  /** @internal Locks come from `Redlock.acquire`. */
  constructor(
    owner: LockOwner,
    resources: readonly string[],
    keys: readonly string[],
    value: string,
    validUntilMs: number,
    grantedNodeCount: number,
    fences: ReadonlyMap<string, bigint> = new Map(),
    holders: NodeAnswers = [],
    answered: Promise<void> = Promise.resolve(),
  ) {
    this.holders = holders;
    this.answered = answered;
    this.fences = fences;
    this.owner = owner;
    this.resources = resources;
    this.keys = keys;
    this.value = value;
    this.validUntil = validUntilMs;
    this.grantedNodeCount = grantedNodeCount;
  }

  /** The fencing token of the first resource (undefined with fencing off). */
  get fence(): bigint | undefined {
    return this.fences.get(this.resources[0]!);
  }

  /** End of validity on the owner's monotonic clock (`performance.now()` scale by default). */
  get validUntilMs(): number {
    return this.releasing ? Number.NEGATIVE_INFINITY : this.validUntil;
  }

  /** Milliseconds of validity left; 0 once it has run out or `release()` was called. */
  remainingMs(): number {
    if (this.releasing) return 0;
    return Math.max(0, this.validUntil - this.owner.clock.now());
  }

  /**
   * @internal After an extension that may have reached nodes but failed:
   * keys may now carry the new, possibly shorter TTL, so the validity can
   * only go down to what that extension would have given.
   */
  limitValidity(validUntilMs: number): void {
    this.validUntil = Math.min(this.validUntil, validUntilMs);
    this.onValidityChange?.();
  }

  /**
   * @internal After an extension that failed: `answerOf(i)` is node i's
   * answer to it ("yes": it holds our keys, "no": they are not all there,
   * else unknown). A node holds them if it just said so, or held them and
   * did not say otherwise; if fewer than `quorum` do, a majority may no
   * longer hold the lock (another client may have it): no validity is
   * left. Whether it was lost so.
   */
  loseIfNotHeld(
    answerOf: (index: number) => string | undefined,
    quorum: number,
    endpoints: readonly string[],
  ): boolean {
    if (this.validUntil === Number.NEGATIVE_INFINITY) return true;
    let held = 0;
    const refused: string[] = [];
    for (let i = 0; i < this.holders.length; i++) {
      const answer = answerOf(i);
      if (answer === "yes" || (answer !== "no" && this.holders[i]?.kind === "yes")) held++;
      if (answer === "no") refused.push(endpoints[i] ?? `node ${i}`);
    }
    if (held >= quorum) return false;
    this.lostDetail =
      `at most ${held} of ${this.holders.length} nodes still hold them, ${quorum} needed` +
      (refused.length > 0 ? `; an extension was refused on ${refused.join(", ")}` : "");
    this.validUntil = Number.NEGATIVE_INFINITY;
    this.onValidityChange?.();
    return true;
  }

  /**
   * @internal Each node's answer in the round that gave the validity as of
   * this call, once every node answered or timed out (a round ends at its
   * majority; the rest come within the node timeout).
   */
  async allAnswers(): Promise<NodeAnswers> {
    const { holders, answered } = this;
    await answered;
    return holders;
  }

  /**
   * @internal Whether node `index` refused this lock in the round that gave
   * its validity (the grant, or the last extension): none of our keys is
   * there, so a release that finds none says nothing about the lock.
   */
  neverHeldBy(index: number): boolean {
    return this.holders[index]?.kind === "no";
  }

  /** @internal Told whenever the validity changes (the keep-alive of `using` re-arms its timers). */
  onValidityChange: (() => void) | undefined;

  /** @internal For a lock found lost (`loseIfNotHeld`): how many nodes still hold it, and which refused. */
  lostDetail: string | undefined;

  get released(): boolean {
    return this.releasing !== undefined;
  }

  /**
   * Sets the TTL of every key to `ttlMs` again, on a majority. The new
   * validity counts from the start of this call. Fails with
   * `LockExpiredError` when the validity has already run out (it never
   * re-creates keys), or `QuorumError` when too few nodes answered; on
   * failure the lock keeps its old validity (or less, if some nodes may have
   * applied a shorter TTL). Resolves to this lock.
   */
  extend(ttlMs: number, options: { signal?: AbortSignal } = {}): Promise<this> {
    let signal: AbortSignal | undefined;
    try {
      const checked = requireOptionsObject("extend options", options);
      rejectUnknownOptions("extend options", checked, ["signal"]);
      signal = requireSignal("extend options.signal", checked.signal);
    } catch (error) {
      return Promise.reject(error);
    }
    const run = this.extending.then(() => this.extendNow(ttlMs, signal));
    this.extending = run.catch(() => {});
    // Resolves to this same lock, so node-redlock's `lock = await lock.extend(t)` keeps working.
    return run.then(() => this);
  }

  private async extendNow(ttlMs: number, signal: AbortSignal | undefined): Promise<void> {
    if (this.releasing) throw this.releasedError();
    const { validUntilMs, holders, answered } = await this.owner.extendLock(this, ttlMs, signal);
    // A release that started meanwhile wins: its delete went out after this
    // extension on every node.
    if (this.releasing) throw this.releasedError();
    this.validUntil = validUntilMs;
    this.holders = holders;
    this.answered = answered;
    this.onValidityChange?.();
  }

  private releasedError(): LockExpiredError {
    return new LockExpiredError("extend", this.resources, "cannot extend a released lock");
  }

  /**
   * Deletes our keys on every node (only keys that still hold our value).
   * Rejects with `LockExpiredError` if the validity had run out before the
   * call — the critical section overran and may not have been exclusive —
   * and with `QuorumError` when fewer than a majority answered (the lock then
   * lingers on the others until its TTL). Idempotent: later calls return the
   * first call's promise.
   */
  release(): Promise<void> {
    if (!this.releasing) {
      const valid = this.remainingMs() > 0;
      // From now on the lock reports no validity (also once handed off to a waiter).
      this.releasing = this.owner.releaseLock(this, valid);
    }
    return this.releasing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }
}
