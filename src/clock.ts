/**
 * The time source. Algorithms read only this monotonic clock, so a wall-clock
 * jump on the client cannot change a lock's validity, and the fault suite or a
 * simulator can substitute its own clock.
 */
import { randomBytes, randomInt } from "node:crypto";
import { performance } from "node:perf_hooks";

export interface Clock {
  /** Milliseconds on a monotonic scale; only differences are meaningful. */
  now(): number;
  /** Resolves after `ms`, or rejects with `signal.reason` when aborted. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => performance.now(),
  sleep: (ms, signal) => sleep(ms, signal),
};

/** Randomness for lock values (must be unpredictable and unique) and retry jitter. */
export interface RandomSource {
  /** `count` cryptographically strong random bytes. */
  bytes(count: number): Uint8Array;
  /** An integer in [min, max]. */
  integer(min: number, max: number): number;
}

export const cryptoRandom: RandomSource = {
  bytes: (count) => randomBytes(count),
  integer: (min, max) => (max <= min ? min : randomInt(min, max + 1)),
};

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
