import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Redis } from "ioredis";
import { LockExpiredError, QuorumError, Redlock, ResourceLockedError } from "../../src/index.js";
import { acquireScript } from "../../src/lock/acquire-script.js";
import { releaseScript } from "../../src/lock/release-script.js";
import { IoredisTransport } from "../../src/node/ioredis-transport.js";
import { batchMarker } from "../../src/node/lua-script.js";
import type { NodeTransport } from "../../src/node/transport.js";
import { findOverlaps, type Hold } from "../helpers/checkers.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";
import { byScale } from "../helpers/scale.js";
import { describeSeed, prng, testSeed } from "../helpers/seed.js";

const workerCount = 16;
const acquisitionsPerWorker = byScale(12, 150);
const retry = { retries: 10_000, delayMs: 4, jitterMs: 4 };

/** A hold with its fencing token (holds of a lock without fencing have none). */
type FencedHold = Hold & { fence?: bigint };

/**
 * Fencing order: holds that do not overlap follow one another, and each
 * fenced one's token is above every fenced token before it. The first
 * hold found out of order, or undefined.
 */
function fenceOutOfOrder(holds: readonly FencedHold[]): string | undefined {
  let last: FencedHold | undefined;
  for (const hold of [...holds].sort((a, b) => a.startMs - b.startMs)) {
    if (hold.fence === undefined) continue;
    if (last?.fence !== undefined && hold.fence <= last.fence) {
      return `${hold.client} held with token ${hold.fence} after ${last.client} held with ${last.fence}`;
    }
    last = hold;
  }
  return undefined;
}

interface Verdict {
  /** Holds that outlived their lock's validity. */
  overran: number;
  holds: FencedHold[];
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
  const holds: FencedHold[] = [];
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
          holds.push({ client: `worker-${worker}`, startMs, endMs, fence: lock.fence });
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

/** The split-votes harness's counts: try-lock workers, their grants, the rival's holds. */
const split = {
  workers: 8,
  grantsPerWorker: byScale(15, 150),
  rivalHolds: byScale(20, 150),
  ttlMs: 2_000,
} as const;

interface SplitVerdict extends Verdict {
  /** Worker attempts refused although some nodes granted them (votes split). */
  splitRefusals: number;
  /** Worker releases that found the lock gone from a majority. */
  lostBeforeRelease: number;
  rivalHolds: number;
  attempts: number;
}

/**
 * Votes that split: `split.workers` independent Redlock instances, each
 * with try-locks only (no retries, so no wait queue orders them; every
 * other one without fencing, whose commit would need a majority too), and
 * a rival that is not redquorum: a minimal Redlock client with plain
 * `SET NX PX` that reaches only 3 of the 5 nodes (a seeded 3 each time,
 * as a client partitioned from the other 2 would), holds only if all 3
 * granted, and else deletes what it set; every other try it reaches only
 * 2 (a minority: it never holds, and deletes its keys a moment later).
 * While the rival holds, a worker's attempt finds the key free on the
 * other 2 nodes: 2 votes of 5, which must not grant. Every holder does the
 * same read-modify-write of a counter as `runHarness`, recorded as a hold.
 * Runs until every worker was granted `split.grantsPerWorker` times and
 * the rival held `split.rivalHolds` times. Each participant draws from its
 * own seeded stream (the interleaving is the machine's).
 */
async function runSplitHarness(
  cluster: TestCluster,
  resource: string,
  seed: number,
): Promise<SplitVerdict> {
  const { ttlMs } = split;
  const holds: FencedHold[] = [];
  const counter: Redis = cluster.client(0);
  const counterKey = `mx:counter:${resource}`;
  await counter.set(counterKey, "0");
  const redlocks = Array.from(
    { length: split.workers },
    (_, w) => new Redlock(cluster.urls, { retry: { retries: 0 }, fencing: w % 2 === 0 }),
  );
  const granted = new Array<number>(split.workers).fill(0);
  let rivalHolds = 0;
  let splitRefusals = 0;
  let attempts = 0;
  let overran = 0;
  let unconfirmedReleases = 0;
  let lostBeforeRelease = 0;
  let updates = 0;
  // Until both counts are reached; a broken lock that grants too often
  // ends the run at ten times the workers' count (its holds then overlap).
  const grantsWanted = split.workers * split.grantsPerWorker;
  let failure: { error: unknown } | undefined;
  const done = () =>
    failure !== undefined ||
    (rivalHolds >= split.rivalHolds && granted.every((n) => n >= split.grantsPerWorker)) ||
    updates >= 10 * grantsWanted;
  // Not a timing: a bound on attempts, so that a harness whose premise
  // broke (the rival never gets the key) fails with a message, not a hang.
  const attemptsMax = 400 * (grantsWanted + split.rivalHolds);
  const pause = (random: () => number) =>
    new Promise((r) => setTimeout(r, Math.floor(random() * 3)));
  const criticalSection = async (
    random: () => number,
    client: string,
    validUntilMs: number,
    fence?: bigint,
  ) => {
    const startMs = performance.now();
    const value = Number(await counter.get(counterKey));
    await pause(random);
    await counter.set(counterKey, String(value + 1));
    const endMs = performance.now();
    if (endMs >= validUntilMs) overran++;
    updates++;
    holds.push({ client, startMs, endMs, fence });
  };
  const worker = async (w: number) => {
    const redlock = redlocks[w]!;
    const random = prng(seed + 1 + w);
    while (!done()) {
      attempts++;
      assert.ok(attempts < attemptsMax, `${attempts} attempts: the harness is stuck`);
      const lock = await redlock.acquire([resource], ttlMs).catch((error: unknown) => {
        if (error instanceof ResourceLockedError) {
          const yes = error.nodeCount - error.heldNodeCount - error.nodeErrors.length;
          if (yes > 0) splitRefusals++;
          return undefined;
        }
        if (error instanceof QuorumError) return undefined; // a loaded machine's timeouts
        throw error;
      });
      if (lock) {
        const validUntilMs = performance.now() + lock.remainingMs();
        await criticalSection(random, `worker-${w}`, validUntilMs, lock.fence);
        granted[w]!++;
        await lock.release().catch((error: unknown) => {
          // The lock was gone from a majority before its release: someone
          // else's grant took it (counted, and checked below).
          if (error instanceof LockExpiredError) lostBeforeRelease++;
          else if (error instanceof QuorumError) unconfirmedReleases++;
          else throw error;
        });
      }
      await pause(random);
    }
  };
  const deleteIfOurs =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";
  const rival = async () => {
    const random = prng(seed);
    for (let n = 0; !done(); n++) {
      attempts++;
      assert.ok(attempts < attemptsMax, `${attempts} attempts: the harness is stuck`);
      const nodes = [0, 1, 2, 3, 4];
      for (let i = nodes.length - 1; i > 0; i--) {
        const j = Math.floor(random() * (i + 1));
        [nodes[i], nodes[j]] = [nodes[j]!, nodes[i]!];
      }
      // Every other try it reaches only 2 nodes (it never holds then): its
      // keys, there for a moment, keep those nodes' fencing counters
      // behind the others' when a worker is granted on the other 3.
      const majority = n % 2 === 0;
      nodes.length = majority ? 3 : 2;
      const value = `rival-${seed}-${n}`;
      const startMs = performance.now();
      const replies = await Promise.all(
        nodes.map((i) => cluster.client(i).set(resource, value, "PX", ttlMs, "NX")),
      );
      if (!majority) await pause(random);
      else if (replies.every((r) => r === "OK")) {
        // Its validity as Redlock counts it (drift 1% + 2 ms).
        const validUntilMs = startMs + ttlMs - ttlMs * 0.01 - 2;
        await criticalSection(random, "rival", validUntilMs);
        rivalHolds++;
      }
      await Promise.all(nodes.map((i) => cluster.client(i).eval(deleteIfOurs, 1, resource, value)));
      await pause(random);
    }
  };
  // One participant's failure stops the others (they check done()).
  const participant = (run: () => Promise<void>) =>
    run().catch((error: unknown) => {
      failure ??= { error };
    });
  try {
    await Promise.all([
      participant(rival),
      ...redlocks.map((_, w) => participant(() => worker(w))),
    ]);
  } finally {
    await Promise.all(redlocks.map((r) => r.close()));
  }
  if (failure) throw failure.error;
  const lostUpdates = updates - Number(await counter.get(counterKey));
  return {
    overran,
    holds,
    lostUpdates,
    unconfirmedReleases,
    lostBeforeRelease,
    splitRefusals,
    rivalHolds,
    attempts,
  };
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
    it(`${workerCount} workers on ${instanceCount} Redlock instances × ${acquisitionsPerWorker} acquisitions of one resource: no overlap, no lost update, tokens in order`, async (t) => {
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
      assert.equal(fenceOutOfOrder(verdict.holds), undefined, `fencing order; ${context}`);
    });
  }

  // At full scale (1,200 grants and 150 rival holds) the run took close to
  // the runner's 60 s on a quiet machine, once over it: its pace is the
  // machine's; what bounds it is attemptsMax, so it has a bound of its own.
  it(`votes split: ${split.workers} try-lock instances (half without fencing) and a plain SET NX rival on 3 of 5 nodes: no overlap, no lost update, tokens in order`, {
    timeout: byScale(60_000, 300_000),
  }, async (t) => {
    const seed = testSeed();
    t.diagnostic(describeSeed(seed));
    const verdict = await runSplitHarness(cluster, "mx:resource:split", seed);
    const context =
      `${describeSeed(seed)}; ${verdict.attempts} attempts, ${verdict.splitRefusals} refused on split votes, ` +
      `${verdict.rivalHolds} rival holds, ${verdict.unconfirmedReleases} releases unconfirmed`;
    t.diagnostic(context);
    assert.equal(verdict.overran, 0, `critical sections outlived their validity; ${context}`);
    assert.deepEqual(findOverlaps(verdict.holds), [], `overlapping holds; ${context}`);
    assert.equal(verdict.lostUpdates, 0, `lost updates; ${context}`);
    assert.equal(fenceOutOfOrder(verdict.holds), undefined, `fencing order; ${context}`);
    assert.equal(verdict.lostBeforeRelease, 0, `locks lost before their release; ${context}`);
    // The premise: votes did split (attempts refused though some nodes granted).
    assert.ok(verdict.splitRefusals >= split.rivalHolds / 2, `too few split votes; ${context}`);
  });

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
