import { assert } from "../assert.js";
import { LockExpiredError, LockLostError } from "../errors.js";
import type { Lock } from "./lock.js";

export interface KeepAliveOptions {
  /** The TTL each extension asks for, in milliseconds. */
  ttlMs: number;
  /** Extend once the validity left drops to this, in milliseconds. */
  extendThresholdMs: number;
  /** Give up (abort with LockLostError) once the validity left drops to this, in milliseconds. */
  marginMs: number;
  /** Wait before another try after a failed extension, in milliseconds. */
  retryDelayMs: number;
}

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
): Promise<T> {
  const { ttlMs, extendThresholdMs, marginMs, retryDelayMs } = options;
  assert(marginMs < extendThresholdMs, "the margin must be below the extension threshold");
  const controller = new AbortController();
  let stopped = false;
  let extendTimer: ReturnType<typeof setTimeout> | undefined;
  let deadlineTimer: ReturnType<typeof setTimeout> | undefined;

  let extending = false;
  const stop = () => {
    stopped = true;
    lock.onValidityChange = undefined;
    clearTimeout(extendTimer);
    clearTimeout(deadlineTimer);
  };
  const lose = (cause: unknown) => {
    if (controller.signal.aborted) return;
    stop();
    controller.abort(new LockLostError(lock.resources, cause));
  };
  // Independent of how extensions go: abort before the validity ends.
  const armDeadline = () => {
    clearTimeout(deadlineTimer);
    deadlineTimer = setTimeout(
      () => {
        if (lock.remainingMs() <= marginMs) {
          lose(
            new LockExpiredError(
              "keep",
              lock.resources,
              "extensions failed until the validity ran low",
            ),
          );
        } else {
          armDeadline();
        }
      },
      Math.max(0, lock.remainingMs() - marginMs),
    );
  };
  const scheduleExtension = (delayMs: number) => {
    if (stopped) return;
    extendTimer = setTimeout(extend, Math.max(0, delayMs));
  };
  const extend = async () => {
    if (stopped) return;
    extending = true;
    try {
      await lock.extend(ttlMs);
      extending = false;
      if (stopped) return;
      armDeadline();
      scheduleExtension(lock.remainingMs() - extendThresholdMs);
    } catch (error) {
      extending = false;
      if (stopped) return;
      // A failed extension may have lowered the validity: re-arm first.
      armDeadline();
      // Refused: the keys are gone or no longer ours; no retry can help.
      if (error instanceof LockExpiredError) return lose(error);
      // Nodes failing: try again while there is validity to spare.
      if (lock.remainingMs() - retryDelayMs > marginMs) scheduleExtension(retryDelayMs);
      else lose(error);
    }
  };
  // The routine may extend (or a failed extension shorten) the lock itself:
  // the deadline and the next extension follow the validity it now has.
  lock.onValidityChange = () => {
    if (stopped || extending) return;
    armDeadline();
    clearTimeout(extendTimer);
    scheduleExtension(lock.remainingMs() - extendThresholdMs);
  };

  armDeadline();
  scheduleExtension(lock.remainingMs() - extendThresholdMs);
  let result: T;
  try {
    result = await routine(controller.signal, lock);
  } catch (error) {
    stop();
    // The routine's error comes out unchanged; the release is best effort.
    await lock.release().catch(() => {});
    throw error;
  }
  stop();
  if (controller.signal.aborted) {
    await lock.release().catch(() => {});
    throw controller.signal.reason;
  }
  await lock.release();
  return result;
}
