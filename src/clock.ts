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
  /**
   * Microseconds since the Unix epoch, for NextId's `proposals: "clock"`
   * only: a value to propose, never a duration, and never what safety rests
   * on. Optional for injected clocks that are not asked for it.
   */
  epochMicros?(): bigint;
}

export const systemClock: Clock = {
  now: () => performance.now(),
  sleep: (ms, signal) => sleep(ms, signal),
  // The wall clock at process start, advanced by the monotonic clock: every
  // process on a machine reads the same scale to a few microseconds (Date.now
  // has only milliseconds), and a wall-clock step after start cannot make it
  // go back. It does not follow such a step either: a process started before
  // one keeps its offset (only how many rounds it wins depends on that).
  epochMicros: () => BigInt(Math.floor((performance.timeOrigin + performance.now()) * 1_000)),
};

/** How often `repeatWhile` calls again. */
const repeatEveryMs = 20;

/**
 * `attempt()`, called again every 20 ms while `again` holds of what it
 * gave, for at most `timeoutMs` (`first`: what a call gave already): what
 * the last call gave. For a state another client is writing node by node
 * (a first membership record, an init's marks), which a read half-way
 * through would take for nodes that lost their memory, and for writes to
 * nodes that gave no answer.
 */
export async function repeatWhile<T>(
  attempt: () => Promise<T>,
  again: (result: T) => boolean,
  timeoutMs: number,
  first?: T,
): Promise<T> {
  const until = performance.now() + timeoutMs;
  let last = first ?? (await attempt());
  while (again(last) && performance.now() < until) {
    await sleep(repeatEveryMs);
    last = await attempt();
  }
  return last;
}

/** Calls `callback` after `ms`; returns a function that cancels it. */
export type Timer = (ms: number, callback: () => void) => () => void;

const timerStopped = new Error("timer cancelled");

/**
 * A cancellable timer on `clock`: plain setTimeout for the system clock
 * (hot paths park thousands of waiters a second), else the clock's `sleep`.
 */
export function timerOf(clock: Clock): Timer {
  if (clock === systemClock) {
    return (ms, callback) => {
      const timer = setTimeout(callback, ms);
      return () => clearTimeout(timer);
    };
  }
  return (ms, callback) => {
    const stop = new AbortController();
    clock.sleep(ms, stop.signal).then(callback, () => {});
    return () => stop.abort(timerStopped); // a given reason: a default one costs a DOMException
  };
}

/** Randomness for lock values (must be unpredictable and unique) and retry jitter. */
export interface RandomSource {
  /** `count` cryptographically strong random bytes. */
  bytes(count: number): Uint8Array;
  /** An integer in [min, max]. */
  integer(min: number, max: number): number;
}

/**
 * One `randomBytes` call costs a few microseconds whatever its size, so bytes
 * are drawn 4 KiB at a time and handed out once each (the same trick as
 * Node's `randomUUID` cache); every value still comes from the CSPRNG.
 */
const poolBytes = 4096;
let pool = randomBytes(0);
let poolOffset = 0;

function pooledRandomBytes(count: number): Uint8Array {
  if (count > poolBytes) return randomBytes(count);
  if (poolOffset + count > pool.length) {
    pool = randomBytes(poolBytes);
    poolOffset = 0;
  }
  const bytes = pool.subarray(poolOffset, poolOffset + count);
  poolOffset += count;
  return bytes;
}

export const cryptoRandom: RandomSource = {
  bytes: pooledRandomBytes,
  integer: (min, max) => (max <= min ? min : randomInt(min, max + 1)),
};

/** Per signal: the callbacks waiting for its abort, behind its one listener (onAbort). */
const abortWatch = new WeakMap<AbortSignal, { callbacks: Set<() => void>; listener: () => void }>();

const noWatch = () => {};

/**
 * Calls `callback` once when `signal` aborts (never if it has aborted
 * already: the caller checks first), until the function returned removes
 * it. Every callback of one signal shares one listener on it, removed
 * with its last callback: a caller's signal passed to many concurrent
 * calls would otherwise carry a listener per call (and Node warns past
 * ten, as if they leaked).
 */
export function onAbort(signal: AbortSignal | undefined, callback: () => void): () => void {
  if (!signal) return noWatch;
  let watch = abortWatch.get(signal);
  if (!watch) {
    const callbacks = new Set<() => void>();
    const listener = () => {
      abortWatch.delete(signal);
      // As an EventTarget would: one removed meanwhile is not called.
      for (const each of [...callbacks]) if (callbacks.has(each)) each();
    };
    watch = { callbacks, listener };
    abortWatch.set(signal, watch);
    signal.addEventListener("abort", listener, { once: true });
  }
  const { callbacks, listener } = watch;
  callbacks.add(callback);
  return () => {
    if (!callbacks.delete(callback) || callbacks.size > 0) return;
    if (abortWatch.get(signal)?.callbacks !== callbacks) return; // aborted already
    abortWatch.delete(signal);
    signal.removeEventListener("abort", listener);
  };
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const unwatch = onAbort(signal, () => {
      clearTimeout(timer);
      reject(signal?.reason);
    });
    const timer = setTimeout(() => {
      unwatch();
      resolve();
    }, ms);
  });
}

/**
 * `promise`, unless `signal` aborts first (rejects with its reason) or
 * `timeoutMs` passes (rejects with `onTimeout()`); the timer and listener
 * are removed either way. The promise itself keeps running.
 */
export function raceAbort<T>(
  promise: Promise<T>,
  signal: AbortSignal | undefined,
  timeoutMs = Number.POSITIVE_INFINITY,
  onTimeout: () => unknown = () => new Error(`not done within ${timeoutMs} ms`),
): Promise<T> {
  if (!signal && !Number.isFinite(timeoutMs)) return promise;
  if (signal?.aborted) {
    // The work is under way already: its later failure (a node's "Connection
    // is closed") is nobody's to read, and must not surface as unhandled.
    promise.catch(() => {});
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const done = () => {
      clearTimeout(timer);
      unwatch();
    };
    const unwatch = onAbort(signal, () => {
      done();
      reject(signal?.reason);
    });
    const timer = Number.isFinite(timeoutMs)
      ? setTimeout(
          () => {
            done();
            reject(onTimeout());
          },
          Math.max(0, timeoutMs),
        )
      : undefined;
    promise.then(
      (value) => {
        done();
        resolve(value);
      },
      (error: unknown) => {
        done();
        reject(error);
      },
    );
  });
}
