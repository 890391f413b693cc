import type { Clock } from "../../src/index.js";
import { sleep } from "./sleep.js";

/**
 * A monotonic clock on which no fallback poll ever fires (timers of 50 ms
 * or more wait until aborted; the few-millisecond jitter before acting on a
 * release notice runs): a waiter on it can only get a lock by being woken
 * (a release in its instance, a handoff, or a pub/sub notice).
 */
export const noTimers: Clock = {
  now: () => performance.now(),
  sleep: (ms, signal) =>
    new Promise((resolve, reject) => {
      const timer = ms < 50 ? setTimeout(resolve, ms) : undefined;
      signal?.addEventListener(
        "abort",
        () => {
          clearTimeout(timer);
          reject(signal.reason);
        },
        { once: true },
      );
    }),
};

/** Polls `check` every 2 ms until it holds; fails after 5 s naming `what`. */
export async function until(what: string, check: () => Promise<boolean> | boolean): Promise<void> {
  const deadline = performance.now() + 5_000;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(2);
  }
}
