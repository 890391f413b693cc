import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { Redlock } from "../../src/index.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";
import { noTimers, until } from "../helpers/no-timers.js";

/**
 * Callers the nodes' queue (src/lock/heir-queue.ts) used to leave out. A
 * try-lock (`retries: 0`) never waits, so it has no place in the queue;
 * while waiters queue for a key, every release reserves it for the
 * queue's head, so the key is always held or reserved, and a try-lock
 * that may not take a reserved key hardly ever gets it. Now it takes a
 * free key however it is reserved ("barging", as node-redlock does).
 */

/** Every release hands over at once (no turn kept, src/lock/turns.ts). */
const strict = { turnMs: 0 };

/**
 * A waiter only a notice wakes: no fallback poll fires on its clock, and
 * its registrations (4 × the poll delay) outlast any test here, though it
 * never polls to renew them.
 */
const toldOnly = {
  ...strict,
  clock: noTimers,
  nodeTimeoutMs: 1_000,
  retry: { retries: 10_000, delayMs: 5_000, jitterMs: 0 },
};

/** Per node: the waiters queued for `key`, in order. */
function queued(cluster: TestCluster, key: string): Promise<string[][]> {
  return cluster.onAll((c) => c.zrange(`redquorum:queue:${key}`, 0, -1));
}

describe("multi-key acquires and try-locks get their share of a contended key", () => {
  let cluster: TestCluster;

  before(async () => {
    cluster = await startCluster({ nodeCount: 5 });
  });
  after(() => cluster.stop());

  describe("how they queue and barge", () => {
    beforeEach(() => cluster.flushAll());

    it("a try-lock takes a free key reserved for a waiter, and its release reserves the key for that waiter again", async () => {
      // The waiter's clock has no fallback poll: only a notice wakes it.
      const waiter = new Redlock(cluster.urls, toldOnly);
      const trier = new Redlock(cluster.urls, { ...strict, retry: { retries: 0 } });
      try {
        // Queued behind a key set by hand, then reserved for it by hand
        // (as a release would, without the notice that would wake it).
        await cluster.onAll((c) => c.set("t", "by-hand", "PX", 60_000));
        const waiting = waiter.acquire(["t"], 10_000, { signal: AbortSignal.timeout(10_000) });
        await until("the waiter to queue on every node", async () =>
          (await queued(cluster, "t")).every((q) => q.length === 1),
        );
        await until("the waiter to listen on every node", async () =>
          (await cluster.heirSubscribers()).every((n) => n === 1),
        );
        const [heir] = (await queued(cluster, "t"))[0]!;
        await cluster.onAll(async (c) => {
          await c.del("t");
          await c.set("redquorum:heir:t", heir!, "PX", 60_000);
          await c.set("redquorum:heir-last:t", heir!, "PX", 60_000);
        });
        const barged = await trier.acquire(["t"], 10_000);
        await until("the reservation to end on every node", async () =>
          (await cluster.onAll((c) => c.exists("redquorum:heir:t"))).every((n) => n === 0),
        );
        assert.equal(waiter.waitingCount, 1, "the waiter still waits");
        // Its turn was not spent: the release reserves the key for it and
        // tells it (a head reserved a second time without having taken the
        // key would be dropped as gone, and never told).
        await barged.release();
        const got = await waiting.catch((error: unknown) =>
          assert.fail(`the waiter was not handed the key after the try-lock's release: ${error}`),
        );
        assert.ok(got.fence! > barged.fence!, "tokens rise from the try-lock to the waiter");
        await got.release();
      } finally {
        await Promise.all([waiter.close(), trier.close()]);
      }
    });
  });
});
