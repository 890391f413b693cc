import type { Clock } from "../clock.js";
import { LockExpiredError } from "../errors.js";

/** What a Lock needs from the Redlock that granted it. Internal. */
export interface LockOwner {
  readonly clock: Clock;
  extendLock(lock: Lock, ttlMs: number, signal: AbortSignal | undefined): Promise<number>;
  releaseLock(lock: Lock): Promise<void>;
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
  private releasing: Promise<void> | undefined;

  /** @internal Locks come from `Redlock.acquire`. */
  constructor(
    owner: LockOwner,
    resources: readonly string[],
    keys: readonly string[],
    value: string,
    validUntilMs: number,
    grantedNodeCount: number,
    fences: ReadonlyMap<string, bigint> = new Map(),
  ) {
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
    return this.validUntil;
  }

  /** Milliseconds of validity left; 0 once it has run out. */
  remainingMs(): number {
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

  /** @internal Told whenever the validity changes (the keep-alive of `using` re-arms its timers). */
  onValidityChange: (() => void) | undefined;

  get released(): boolean {
    return this.releasing !== undefined;
  }

  /**
   * Sets the TTL of every key to `ttlMs` again, on a majority. The new
   * validity counts from the start of this call. Fails with
   * `LockExpiredError` when the validity has already run out (it never
   * re-creates keys), or `QuorumError` when too few nodes answered; on
   * failure the lock keeps its old validity.
   */
  async extend(ttlMs: number, options: { signal?: AbortSignal } = {}): Promise<void> {
    if (this.releasing)
      throw new LockExpiredError("extend", this.resources, "cannot extend a released lock");
    this.validUntil = await this.owner.extendLock(this, ttlMs, options.signal);
    this.onValidityChange?.();
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
    this.releasing ??= this.owner.releaseLock(this);
    return this.releasing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }
}
