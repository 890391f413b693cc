import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Redis } from "ioredis";
import { QuorumError, Redlock } from "../../src/index.js";
import { acquireScript, releaseScript } from "../../src/lock/scripts.js";
import { IoredisTransport } from "../../src/node/ioredis-transport.js";
import { batchMarker } from "../../src/node/lua-script.js";
import type { NodeTransport } from "../../src/node/transport.js";
import { findOverlaps, type Hold } from "../helpers/checkers.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";
import { describeSeed, prng, testSeed } from "../helpers/seed.js";

const workerCount = 16;
const acquisitionsPerWorker = 150;
const retry = { retries: 10_000, delayMs: 4, jitterMs: 4 };

interface Verdict {
  /** Holds that outlived their lock's validity. */
  overran: number;
  holds: Hold[];
  /** Increments of the shared counter lost to overlapping read-modify-writes. */
  lostUpdates: number;
  unconfirmedReleases: number;
}

/**
 * The harness: `workerCount` workers, worker w on `redlocks[w % length]`,
 * each takes `resource` `acquisitionsPerWorker` times and, holding it,
 * reads a counter on node 0 (under another key), yields 0-2 ms (seeded),
 * and writes it back plus one: a read-modify-write that loses an update
 * whenever two critical sections overlap.
 */
async function runHarness(
  cluster: TestCluster,
  redlocks: readonly Redlock[],
  resource: string,
  seed: number,
): Promise<Verdict> {
  const random = prng(seed);
  const ttlMs = 2_000;
  const holds: Hold[] = [];
  let overran = 0;
  let unconfirmedReleases = 0;
  const counter: Redis = cluster.client(0);
  const counterKey = `mx:counter:${resource}`;
  await counter.set(counterKey, "0");
  const pauses = Array.from({ length: workerCount * acquisitionsPerWorker }, () =>
    Math.floor(random() * 3),
  );
  try {
    await Promise.all(
      Array.from({ length: workerCount }, async (_, worker) => {
        const redlock = redlocks[worker % redlocks.length]!;
        for (let n = 0; n < acquisitionsPerWorker; n++) {
          const lock = await redlock.acquire([resource], ttlMs);
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
  const lostUpdates = workerCount * acquisitionsPerWorker - Number(await counter.get(counterKey));
  return { overran, holds, lostUpdates, unconfirmedReleases };
}

/**
 * A broken node for the negative control: every command goes to the real
 * node, except the acquire script, which it grants at once without
 * touching Redis (1, or with fencing {1, "0", 1} per counter: "accepted"),
 * and the release script, which it answers as if it had deleted every key.
 * Three of these among five nodes are a majority that says yes to anyone.
 */
const grantAll = (_keyCount: number, argv: readonly string[]) => {
  const fenceCount = Number(argv[3] ?? "0");
  if (fenceCount === 0) return 1;
  return [1, ...Array.from({ length: fenceCount }, () => ["0", 1]).flat()];
};
const deletedAll = (keyCount: number, argv: readonly string[]) =>
  argv[1] === undefined ? keyCount : [keyCount, 0];

function yesMan(url: string): NodeTransport {
  const endpoint = new URL(url).host;
  const inner = IoredisTransport.fromUrl(url, endpoint);
  const isScript = (args: readonly string[], script: { sha1: string; source: string }) =>
    (args[0] === "EVALSHA" && args[1] === script.sha1) ||
    (args[0] === "EVAL" && args[1] === script.source);
  return {
    endpoint,
    get epoch() {
      return inner.epoch;
    },
    send(args, timeoutMs) {
      const keyCount = Number(args[2]);
      const argv = args.slice(3 + keyCount);
      const answer = isScript(args, acquireScript)
        ? grantAll
        : isScript(args, releaseScript)
          ? deletedAll
          : undefined;
      if (!answer) return inner.send(args, timeoutMs);
      if (argv[0] !== batchMarker) return Promise.resolve(answer(keyCount, argv));
      // A batch (many calls of one tick): every entry answered alike.
      const replies: unknown[] = [];
      for (let a = 2; a < argv.length; ) {
        const [keys, count] = [Number(argv[a]), Number(argv[a + 1])];
        replies.push(answer(keys, argv.slice(a + 2, a + 2 + count)));
        a += 2 + count;
      }
      return Promise.resolve(replies);
    },
    close: () => inner.close(),
  };
}

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
    it(`${workerCount} workers on ${instanceCount} Redlock instances × ${acquisitionsPerWorker} acquisitions of one resource: no overlap, no lost update`, async (t) => {
      const seed = testSeed();
      t.diagnostic(describeSeed(seed));
      const redlocks = Array.from(
        { length: instanceCount },
        () => new Redlock(cluster.urls, { retry }),
      );
      const verdict = await runHarness(cluster, redlocks, `mx:resource:${instanceCount}`, seed);
      const context = `${describeSeed(seed)}; ${verdict.unconfirmedReleases} releases unconfirmed`;
      assert.equal(verdict.overran, 0, `critical sections outlived their validity; ${context}`);
      assert.equal(verdict.holds.length, workerCount * acquisitionsPerWorker);
      assert.deepEqual(findOverlaps(verdict.holds), [], `overlapping holds; ${context}`);
      assert.equal(verdict.lostUpdates, 0, `lost updates; ${context}`);
    });
  }

  it("negative control: the same harness with a broken lock (a faked majority) is flagged", async (t) => {
    const seed = testSeed();
    t.diagnostic(describeSeed(seed));
    // Nodes 1, 2, 3 grant every acquire without looking at Redis: every
    // worker gets "the lock" at once, as with a lock that does not exclude.
    const redlocks = Array.from(
      { length: workerCount },
      () =>
        new Redlock(
          cluster.urls.map((url, i) => (i >= 1 && i <= 3 ? yesMan(url) : url)),
          { retry },
        ),
    );
    const verdict = await runHarness(cluster, redlocks, "mx:resource:broken", seed);
    const overlaps = findOverlaps(verdict.holds).length;
    const context = `${describeSeed(seed)}; ${overlaps} overlaps, ${verdict.lostUpdates} lost updates`;
    t.diagnostic(context);
    assert.equal(verdict.holds.length, workerCount * acquisitionsPerWorker, context);
    assert.ok(
      overlaps > 0 || verdict.lostUpdates > 0,
      `the harness missed a broken lock; ${context}`,
    );
  });

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
