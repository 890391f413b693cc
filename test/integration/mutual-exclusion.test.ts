import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Redis } from "ioredis";
import { QuorumError, Redlock } from "../../src/index.js";
import { findOverlaps, type Hold } from "../helpers/checkers.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";
import { describeSeed, prng, testSeed } from "../helpers/seed.js";

const workerCount = 16;
const acquisitionsPerWorker = 150;

describe("mutual exclusion under contention", () => {
  let cluster: TestCluster;

  before(async () => {
    cluster = await startCluster({ nodeCount: 5 });
  });
  after(() => cluster.stop());

  // One worker per instance: every wake-up crosses instances (pub/sub).
  // Four workers per instance: handoffs inside an instance, yields and
  // pub/sub between them.
  for (const instanceCount of [workerCount, 4]) {
    it(`${workerCount} workers on ${instanceCount} Redlock instances × ${acquisitionsPerWorker} acquisitions of one resource: no overlap, no lost update`, async () => {
      const seed = testSeed();
      const random = prng(seed);
      const ttlMs = 2_000;
      const holds: Hold[] = [];
      let overran = 0;
      let unconfirmedReleases = 0;
      // The shared counter lives on node 0 under another key; each holder
      // reads it, yields, and writes it back: a read-modify-write that loses
      // an update whenever two critical sections overlap.
      const counter: Redis = cluster.client(0);
      const counterKey = `mx:counter:${instanceCount}`;
      await counter.set(counterKey, "0");

      const redlocks = Array.from(
        { length: instanceCount },
        () => new Redlock(cluster.urls, { retry: { retries: 10_000, delayMs: 4, jitterMs: 4 } }),
      );
      const pauses = Array.from({ length: workerCount * acquisitionsPerWorker }, () =>
        Math.floor(random() * 3),
      );
      try {
        await Promise.all(
          Array.from({ length: workerCount }, async (_, worker) => {
            const redlock = redlocks[worker % instanceCount]!;
            for (let n = 0; n < acquisitionsPerWorker; n++) {
              const lock = await redlock.acquire([`mx:resource:${instanceCount}`], ttlMs);
              const startMs = performance.now();
              const value = Number(await counter.get(counterKey));
              const pauseMs = pauses[worker * acquisitionsPerWorker + n]!;
              await new Promise((r) => setTimeout(r, pauseMs));
              await counter.set(counterKey, String(value + 1));
              const endMs = performance.now();
              // A hold only counts as exclusive while the lock was valid.
              if (lock.remainingMs() <= 0) overran++;
              holds.push({ client: `worker-${worker}`, startMs, endMs });
              // Under load a release can miss its node timeout on a majority:
              // the keys then expire with their TTL. That costs the others
              // time, not exclusion, which is what this test checks.
              await lock.release().catch((error: unknown) => {
                if (!(error instanceof QuorumError)) throw error;
                unconfirmedReleases++;
              });
            }
          }),
        );
      } finally {
        await Promise.all(redlocks.map((r) => r.close()));
      }

      const context = `${describeSeed(seed)}; ${unconfirmedReleases} releases unconfirmed`;
      assert.equal(overran, 0, `critical sections outlived their validity; ${context}`);
      assert.equal(holds.length, workerCount * acquisitionsPerWorker);
      const overlaps = findOverlaps(holds);
      assert.deepEqual(overlaps, [], `overlapping holds; ${context}`);
      assert.equal(
        Number(await counter.get(counterKey)),
        workerCount * acquisitionsPerWorker,
        `lost updates; ${context}`,
      );
    });
  }

  it("negative control: the same workload without the lock is flagged by the checker", async () => {
    const counter: Redis = cluster.client(0);
    await counter.set("mx:unlocked", "0");
    const holds: Hold[] = [];
    await Promise.all(
      Array.from({ length: workerCount }, async (_, worker) => {
        for (let n = 0; n < 10; n++) {
          const startMs = performance.now();
          const value = Number(await counter.get("mx:unlocked"));
          await new Promise((r) => setTimeout(r, 1));
          await counter.set("mx:unlocked", String(value + 1));
          holds.push({ client: `worker-${worker}`, startMs, endMs: performance.now() });
        }
      }),
    );
    assert.ok(findOverlaps(holds).length > 0, "the checker must flag unprotected sections");
    assert.ok(Number(await counter.get("mx:unlocked")) < workerCount * 10, "updates must be lost");
  });
});
