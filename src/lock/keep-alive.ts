/**
 * The keep-alive of `Redlock.using`: runs a routine while extending its
 * lock before it runs out, aborts the routine's signal before the validity
 * ends when the lock cannot be kept, and releases the lock at the end;
 * when it extends and when it gives up is keep-alive-schedule.ts.
 */

import { assert } from "../assert.js";
import { ClosedError, LockExpiredError, LockLostError } from "../errors.js";
import type { KeepAliveOptions } from "./keep-alive-schedule.js";
import type { Lock } from "./lock.js";

/**
 * Runs `routine` while keeping `lock` extended, then releases it whatever
 * happens. The routine's signal aborts with `LockLostError` when the lock
 * cannot be kept: an extension was refused (the keys are gone), or
 * extensions kept failing until only `marginMs` of validity was left — so
 * always before the validity runs out. Every timer is cleared before this
 * returns.
 */
export async function runKeepingAlive<T>(
  lock: Lock,
  routine: (signal: AbortSignal, lock: Lock) => Promise<T>,
  options: KeepAliveOptions,
  running?: KeepAliveRegistry,
): Promise<T> {
  assert(
    options.marginMs < options.extendThresholdMs,
    "the margin must be below the extension threshold",
  );
  // Closed between the grant and now (a hook of the acquire's called
  // close(), say): the routine does not start, as an acquire granted
  // after close() is given up; close() abandoned the keep-alives already.
  if (running?.isClosed()) {
    await lock.release().catch(() => {});
    throw new ClosedError("Redlock");
  }
  const keeper = new KeepAlive(lock, options);
  keeper.start();
  running?.keepAlives.add(keeper);
  let result: T;
  try {
    result = await routine(keeper.signal, lock);
  } catch (error) {
    keeper.stop();
    // The routine's error comes out unchanged; the release is best effort.
    await lock.release().catch(() => {});
    throw error;
  } finally {
    running?.keepAlives.delete(keeper);
  }
  // A routine that held the event loop past the validity (no timer could
  // tell it) and returned without looking ran without the lock at the end:
  // lost, as if the deadline timer had fired. Only past the validity: one
  // that returns within the margin finished under the lock, and a lock the
  // routine released itself reads 0 but was not lost.
  keeper.expireIfRunOut();
  keeper.stop();
  if (abortedOf.call(keeper.signal)) {
    await lock.release().catch(() => {});
    throw keeper.signal.reason;
  }
  await lock.release();
  return result;
}

const abortedOf = Object.getOwnPropertyDescriptor(AbortSignal.prototype, "aborted")!.get!;

/** Where an instance keeps its running keep-alives, and whether it is closed. */
export interface KeepAliveRegistry {
  readonly keepAlives: Set<KeepAliveHandle>;
  isClosed(): boolean;
}

/** A running keep-alive, as its instance's `close()` sees it. */
export interface KeepAliveHandle {
  /**
   * The instance closes: no extension can be sent any more, so the lock
   * will not be kept. The routine's signal aborts now (`LockLostError`
   * with `cause` as its cause) rather than near the end of the validity,
   * and no timer is left.
   */
  abandon(cause: Error): void;
}

/** The timers that keep one lock extended, and the signal that says it was lost. */
class KeepAlive implements KeepAliveHandle {
  private readonly lock: Lock;
  private readonly options: KeepAliveOptions;
  private readonly controller = new AbortController();
  private stopped = false;
  /** An extension is running: its outcome re-arms the timers, not the lock's validity change. */
  private extending = false;
  private extendTimer: ReturnType<typeof setTimeout> | undefined;
  private deadlineTimer: ReturnType<typeof setTimeout> | undefined;

  /**
   * Aborts with `LockLostError` when the lock cannot be kept. Its timers
   * cannot fire while the event loop is held (a routine computing between
   * its checks, a stall elsewhere in the process), so reading `aborted` or
   * calling `throwIfAborted()` also checks the validity left, and aborts
   * then if it is down to the margin: a routine that checks its signal is
   * never told to go on past that.
   */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  constructor(lock: Lock, options: KeepAliveOptions) {
    this.lock = lock;
    this.options = options;
    const signal = this.controller.signal;
    const check = () => this.checkDeadline();
    Object.defineProperty(signal, "aborted", {
      get() {
        check();
        return abortedOf.call(signal);
      },
    });
    signal.throwIfAborted = () => {
      check();
      AbortSignal.prototype.throwIfAborted.call(signal);
    };
  }

  start(): void {
    // The routine may extend (or a failed extension shorten or end) the
    // lock itself: the deadline and the next extension follow the validity
    // it now has, and a lock found lost is given up at once.
    this.lock.onValidityChange = () => {
      if (this.stopped) return;
      if (this.checkDeadline() || this.stopped || this.extending) return;
      this.armDeadline();
      clearTimeout(this.extendTimer);
      this.scheduleExtension(this.lock.remainingMs() - this.options.extendThresholdMs);
    };
    this.armDeadline();
    this.scheduleExtension(this.lock.remainingMs() - this.options.extendThresholdMs);
  }

  stop(): void {
    this.stopped = true;
    this.lock.onValidityChange = undefined;
    clearTimeout(this.extendTimer);
    clearTimeout(this.deadlineTimer);
  }

  /** Aborts if the validity has run out (not merely down to the margin), unless the lock was released. */
  expireIfRunOut(): void {
    if (!this.lock.released) this.checkDeadline(0);
  }

  abandon(cause: Error): void {
    this.lose(cause);
  }

  private lose(cause: unknown): void {
    if (abortedOf.call(this.controller.signal)) return;
    this.stop();
    // The validity as it is now, before the abort's listeners run: a lock
    // found lost has none left, and `redquorum lock` times its SIGKILL
    // from this (at once then, not at the deadline it was last told).
    this.tellDeadline();
    this.controller.abort(new LockLostError(this.lock.resources, cause));
  }

  /**
   * Gives the lock up if its validity is down to `leftMs` (the margin);
   * whether it is given up. A lock the routine released itself reads 0 but
   * was not lost: there is nothing left to keep, and the keep-alive stops.
   */
  private checkDeadline(leftMs = this.options.marginMs): boolean {
    if (this.stopped) return abortedOf.call(this.controller.signal);
    if (this.lock.released) {
      this.stop();
      return false;
    }
    if (this.lock.remainingMs() > leftMs) return false;
    // validUntilMs is -Infinity only for a lock found lost (released is above).
    const why =
      this.lock.validUntilMs === Number.NEGATIVE_INFINITY
        ? `its keys were found gone: ${this.lock.lostDetail ?? "too few nodes still hold them (an extension was refused there)"}`
        : this.lock.remainingMs() > 0
          ? "extensions failed until the validity ran low"
          : "the lock's validity ran out before an extension landed";
    this.lose(new LockExpiredError("keep", this.lock.resources, why));
    return true;
  }

  /** Independent of how extensions go: abort before the validity ends. */
  private armDeadline(): void {
    if (this.stopped) return;
    const { lock } = this;
    clearTimeout(this.deadlineTimer);
    this.deadlineTimer = setTimeout(
      () => {
        if (!this.checkDeadline()) this.armDeadline();
      },
      Math.max(0, lock.remainingMs() - this.options.marginMs),
    );
    // After the timer: a hook that throws must not leave the lock without its deadline.
    this.tellDeadline();
  }

  private tellDeadline(): void {
    try {
      this.options.onDeadline?.(this.lock.remainingMs());
    } catch {
      // the hook's own failure; the keep-alive goes on
    }
  }

  private scheduleExtension(delayMs: number): void {
    if (this.stopped) return;
    this.extendTimer = setTimeout(() => void this.extend(), Math.max(0, delayMs));
  }

  private async extend(): Promise<void> {
    if (this.stopped) return;
    const { lock } = this;
    const { ttlMs, extendThresholdMs, marginMs, retryDelayMs } = this.options;
    this.extending = true;
    try {
      await lock.extend(ttlMs);
      this.extending = false;
      if (this.stopped) return;
      this.armDeadline();
      this.scheduleExtension(lock.remainingMs() - extendThresholdMs);
    } catch (error) {
      this.extending = false;
      if (this.stopped) return;
      // The routine released the lock itself ("cannot extend a released
      // lock"): not a loss, and nothing left to keep.
      if (lock.released) return this.stop();
      // A failed extension may have lowered the validity: re-arm first.
      this.armDeadline();
      // Refused: the keys are gone or no longer ours; no retry can help.
      if (error instanceof LockExpiredError) return this.lose(error);
      // Nodes failing: try again while there is validity to spare.
      if (lock.remainingMs() - retryDelayMs > marginMs) this.scheduleExtension(retryDelayMs);
      else this.lose(error);
    }
  }
}
