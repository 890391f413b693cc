import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { Redis } from "ioredis";
import NodeRedlock from "redlock";
import { Redlock } from "../../src/index.js";
import { instanceOfWaiter } from "../../src/lock/queue-keys.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";
import { noTimers, until } from "../helpers/no-timers.js";
import { sleep } from "../helpers/sleep.js";
import { notAboutTimeouts } from "../helpers/timeouts.js";

/**
 * Callers the nodes' queue (src/lock/heir-queue.ts) used to leave out: a
 * multi-key acquire and a try-lock (`retries: 0`). While single-key
 * waiters queue for a key, every release reserves it for the queue's head,
 * so the key is always held or reserved: a caller that neither queues nor
 * may take a reserved key hardly ever gets it. Now a multi-key caller that
 * may wait queues on every key of its lock, and a try-lock takes a free
 * key however it is reserved ("barging", as node-redlock does).
 */

/**
 * Every release hands over at once (no turn kept, src/lock/turns.ts); and
 * not about node timeouts (a loaded machine can stall past the 50 ms default).
 */
const strict = { turnMs: 0, ...notAboutTimeouts };

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

  describe("beside three instances looping on K (acquire, hold 5 ms, release)", () => {
    const runMs = 7_000;
    const holdMs = 5;
    const pollMs = 20;
    const counts = {
      looped: 0,
      loopFailed: 0,
      multiWon: 0,
      multiFailed: 0,
      triedOurs: 0,
      wonOurs: 0,
      triedPlain: 0,
      wonPlain: 0,
    };
    let measured = "";

    // One run serves both tests: a multi-key caller (default retries), a
    // try-lock polling every 20 ms and a plain SET NX majority client
    // (node-redlock, no retries) polling at the same pace, all at once.
    before(async () => {
      await cluster.flushAll();
      const loopers = Array.from({ length: 3 }, () => new Redlock(cluster.urls));
      const multi = new Redlock(cluster.urls, notAboutTimeouts);
      const trier = new Redlock(cluster.urls, notAboutTimeouts);
      const clients = cluster.urls.map((url) => new Redis(url));
      const plain = new NodeRedlock(clients, { retryCount: 0 });
      const endAt = performance.now() + runMs;
      const running = () => performance.now() < endAt;
      const hold = async (lock: { release(): Promise<unknown> }) => {
        await sleep(holdMs);
        await lock.release().catch(() => {});
      };
      /** Polls `take` every `pollMs` until the run ends; counts tries and wins. */
      const poll = async (take: () => Promise<{ release(): Promise<unknown> }>) => {
        let tried = 0;
        let won = 0;
        while (running()) {
          tried++;
          const lock = await take().catch(() => undefined);
          if (lock) {
            won++;
            await hold(lock);
          }
          await sleep(pollMs);
        }
        return { tried, won };
      };
      try {
        const loops = loopers.map(async (redlock) => {
          while (running()) {
            try {
              await hold(await redlock.acquire(["K"], 10_000));
              counts.looped++;
            } catch {
              counts.loopFailed++;
            }
          }
        });
        const [multiKey, ours, theirs] = await Promise.all([
          poll(() => multi.acquire(["K", "J"], 10_000)),
          poll(() => trier.acquire(["K"], 10_000, { retry: { retries: 0 } })),
          poll(() => plain.acquire(["K"], 10_000)),
          ...loops,
        ]);
        counts.multiWon = multiKey.won;
        counts.multiFailed = multiKey.tried - multiKey.won;
        counts.triedOurs = ours.tried;
        counts.wonOurs = ours.won;
        counts.triedPlain = theirs.tried;
        counts.wonPlain = theirs.won;
      } finally {
        await Promise.all([...loopers, multi, trier].map((r) => r.close()));
        for (const client of clients) client.disconnect();
      }
      measured = JSON.stringify(counts);
      console.log(`fair share over ${runMs} ms: ${measured}`);
    });

    it("a multi-key acquire of K and J succeeds at least 9 times in 10", () => {
      assert.ok(counts.looped >= 100, `the loopers contended for K (${measured})`);
      const acquires = counts.multiWon + counts.multiFailed;
      // A failed acquire takes its 11 attempts (about 2 s): a few at most fit in the run.
      assert.ok(
        acquires >= 10 && counts.multiWon >= 0.9 * acquires,
        `the multi-key acquire succeeded ${counts.multiWon} of ${acquires} times (${measured})`,
      );
    });

    it("a try-lock wins at least half as often as a plain SET NX client polling at its pace", () => {
      assert.ok(counts.looped >= 100, `the loopers contended for K (${measured})`);
      assert.ok(
        counts.wonPlain >= 10,
        `the plain client won often enough to compare (${measured})`,
      );
      const ours = counts.wonOurs / counts.triedOurs;
      const theirs = counts.wonPlain / counts.triedPlain;
      assert.ok(
        ours >= 0.5 * theirs,
        `the try-lock won ${(100 * ours).toFixed(1)} % of its tries, the plain client ` +
          `${(100 * theirs).toFixed(1)} % (${measured})`,
      );
    });
  });

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

    it("a multi-key waiter queues on each of its keys, and a release of the one held hands it the lock", async () => {
      const holder = new Redlock(cluster.urls, strict);
      const multi = new Redlock(cluster.urls, toldOnly);
      try {
        const lock = await holder.acquire(["m"], 10_000);
        const waiting = multi.acquire(["m", "n"], 10_000, { signal: AbortSignal.timeout(20_000) });
        await until("the multi-key waiter to queue on both keys on every node", async () =>
          [...(await queued(cluster, "m")), ...(await queued(cluster, "n"))].every(
            (q) => q.length === 1,
          ),
        );
        await until("the waiter to listen on every node", async () =>
          (await cluster.heirSubscribers()).every((n) => n === 1),
        );
        const [id] = (await queued(cluster, "m"))[0]!;
        const tickets = await cluster.onAll(async (c) => [
          await c.zscore("redquorum:queue:m", id!),
          await c.zscore("redquorum:queue:n", id!),
        ]);
        for (const [m, n] of tickets) assert.equal(m, n, "one ticket on both keys' queues");
        // No fallback poll: only the notice of this release can wake it.
        await lock.release();
        const got = await waiting;
        assert.deepEqual(got.resources, ["m", "n"]);
        await until("the waiter to leave every queue", async () =>
          (await cluster.onAll((c) => c.exists("redquorum:queue:m", "redquorum:queue:n"))).every(
            (n) => n === 0,
          ),
        );
        await got.release();
      } finally {
        await Promise.all([holder.close(), multi.close()]);
      }
    });

    it("two multi-key waiters for the same keys in opposite orders get the lock in the order they queued, by notices alone", async () => {
      const holder = new Redlock(cluster.urls, strict);
      const [first, second] = [0, 1].map(() => new Redlock(cluster.urls, toldOnly));
      try {
        const lock = await holder.acquire(["p", "q"], 10_000);
        const signal = AbortSignal.timeout(20_000);
        const firstWaits = first!.acquire(["p", "q"], 10_000, { signal });
        await until("the first to queue", async () =>
          (await queued(cluster, "q")).every((q) => q.length === 1),
        );
        const secondWaits = second!.acquire(["q", "p"], 10_000, { signal });
        await until("the second to queue", async () =>
          [...(await queued(cluster, "p")), ...(await queued(cluster, "q"))].every(
            (q) => q.length === 2,
          ),
        );
        await until("both to listen on every node", async () =>
          (await cluster.heirSubscribers()).every((n) => n === 2),
        );
        // Every node orders them alike on both keys: a release reserves
        // both keys for the same waiter, never one key for each.
        const orders = [...(await queued(cluster, "p")), ...(await queued(cluster, "q"))];
        for (const order of orders) assert.deepEqual(order, orders[0]);
        await lock.release();
        const got = await firstWaits;
        assert.equal(second!.waitingCount, 1, "the second still waits");
        await got.release();
        const next = await secondWaits;
        assert.ok(next.fence! > got.fence!, "tokens rise in grant order");
        await next.release();
      } finally {
        await Promise.all([holder.close(), first!.close(), second!.close()]);
      }
    });

    it("of two multi-key waiters each reserved a key the other needs, the one behind passes its key to the one ahead: both get the lock by notices alone", async () => {
      const [first, second] = [0, 1].map(() => new Redlock(cluster.urls, toldOnly));
      try {
        await cluster.onAll((c) => c.mset("x", "by-hand", "y", "by-hand"));
        const signal = AbortSignal.timeout(10_000);
        const firstWaits = first!.acquire(["x", "y"], 10_000, { signal });
        await until("the first to queue", async () =>
          (await queued(cluster, "y")).every((q) => q.length === 1),
        );
        const secondWaits = second!.acquire(["y", "x"], 10_000, { signal });
        await until("the second to queue", async () =>
          (await queued(cluster, "y")).every((q) => q.length === 2),
        );
        await until("both to listen on every node", async () =>
          (await cluster.heirSubscribers()).every((n) => n === 2),
        );
        // As queues that disagree for a moment could leave it: x free and
        // reserved for the first, y for the second. Only the second is told,
        // and only once every node is in that state: a notice wakes it
        // within a few ms even from one node, and its round must not find
        // x and y deleted but not yet reserved on the others (it took both
        // there, held them for its TTL, and the first waited in vain). Each
        // node's state is written in one MULTI, as a release script would.
        const [a, b] = (await queued(cluster, "x"))[0]!;
        await cluster.onAll((c) =>
          c
            .multi()
            .del("x", "y")
            .set("redquorum:heir:x", a!, "PX", 60_000)
            .set("redquorum:heir-last:x", a!, "PX", 60_000)
            .set("redquorum:heir:y", b!, "PX", 60_000)
            .set("redquorum:heir-last:y", b!, "PX", 60_000)
            .exec(),
        );
        await cluster.onAll((c) => c.publish(`redquorum:heir-of:${instanceOfWaiter(b!)}`, b!));
        // Refused (x is reserved for the first, ahead of it in x's queue),
        // the second passes y on and the first is told: nothing waits for
        // a reservation to lapse.
        const got = await firstWaits.catch((error: unknown) =>
          assert.fail(`the first was not handed y: ${error}`),
        );
        assert.deepEqual(got.resources, ["x", "y"]);
        assert.equal(second!.waitingCount, 1, "the second still waits, in its place");
        await got.release();
        const next = await secondWaits.catch((error: unknown) =>
          assert.fail(`the second was not handed both keys after the first's release: ${error}`),
        );
        assert.ok(next.fence! > got.fence!, "tokens rise in grant order");
        await next.release();
      } finally {
        await Promise.all([first!.close(), second!.close()]);
      }
    });

    it("a multi-key waiter refused for a held key it is not next in line for lets the next waiter take its other key at once", async () => {
      const [holderK, holderJ] = [0, 1].map(() => new Redlock(cluster.urls, strict));
      const [multi, single, ahead] = [0, 1, 2].map(() => new Redlock(cluster.urls, toldOnly));
      try {
        const k = await holderK!.acquire(["k2"], 10_000);
        const j = await holderJ!.acquire(["j2"], 10_000);
        const signal = AbortSignal.timeout(10_000);
        // A waiter for j2 alone queues first: it is next in line for j2.
        const aheadWaits = ahead!.acquire(["j2"], 10_000, { signal });
        await until("the waiter for j2 to queue", async () =>
          (await queued(cluster, "j2")).every((q) => q.length === 1),
        );
        // Left waiting at the end, until close() ends its wait.
        void multi!.acquire(["k2", "j2"], 10_000, { signal }).catch(() => {});
        await until("the multi-key waiter to queue", async () =>
          (await queued(cluster, "k2")).every((q) => q.length === 1),
        );
        const singleWaits = single!.acquire(["k2"], 10_000, { signal });
        await until("the waiter for k2 to queue", async () =>
          (await queued(cluster, "k2")).every((q) => q.length === 2),
        );
        await until("all three to listen on every node", async () =>
          (await cluster.heirSubscribers()).every((n) => n === 3),
        );
        const multiId = (await queued(cluster, "j2"))[0]![1];
        assert.deepEqual(
          (await queued(cluster, "k2")).map((q) => q[0]),
          Array(5).fill(multiId),
          "the multi-key waiter heads k2's queue on every node",
        );
        // k2 is reserved for the multi-key waiter, which cannot take it (j2
        // is held, and goes to the other waiter first): it passes k2 on,
        // and the waiter for k2 is told.
        await k.release();
        const got = await singleWaits.catch((error: unknown) =>
          assert.fail(`the waiter for k2 was not handed it: ${error}`),
        );
        assert.equal(multi!.waitingCount, 1, "the multi-key waiter still waits");
        await Promise.all([got.release(), j.release()]);
        await (await aheadWaits).release();
      } finally {
        await Promise.all([holderK, holderJ, multi, single, ahead].map((r) => r!.close()));
      }
    });

    it("a multi-key waiter next in line for a held key has its other key kept for it meanwhile, and gets both before the waiters behind it", async () => {
      const [holderK, holderJ] = [0, 1].map(() => new Redlock(cluster.urls, strict));
      // Only notices wake them. The release of j3 comes a few ms after
      // that of k3, whose notices woke the multi-key waiter: when they were
      // taken for repeats of those, it waited for a poll (1 of 100 runs
      // under load, with no poll to end the wait).
      const [multi, single] = [0, 1].map(() => new Redlock(cluster.urls, toldOnly));
      try {
        const k = await holderK!.acquire(["k3"], 10_000);
        const j = await holderJ!.acquire(["j3"], 10_000);
        const signal = AbortSignal.timeout(10_000);
        const multiWaits = multi!.acquire(["k3", "j3"], 10_000, { signal });
        await until("the multi-key waiter to queue", async () =>
          (await queued(cluster, "j3")).every((q) => q.length === 1),
        );
        const singleWaits = single!.acquire(["k3"], 10_000, { signal });
        await until("the waiter for k3 to queue", async () =>
          (await queued(cluster, "k3")).every((q) => q.length === 2),
        );
        await until("both to listen on every node", async () =>
          (await cluster.heirSubscribers()).every((n) => n === 2),
        );
        // k3 is reserved for the multi-key waiter; refused for j3, which
        // will be reserved for it next, it keeps k3 meanwhile.
        await k.release();
        await until("the multi-key waiter to keep k3 on every node", async () =>
          (await cluster.onAll((c) => c.exists("redquorum:heir-kept:k3"))).every((n) => n === 1),
        );
        await j.release();
        const both = await multiWaits.catch((error: unknown) =>
          assert.fail(`the multi-key waiter was not handed k3 and j3: ${error}`),
        );
        assert.equal(single!.waitingCount, 1, "the waiter for k3, behind it, still waits");
        await both.release();
        const got = await singleWaits.catch((error: unknown) =>
          assert.fail(`the waiter for k3 was not handed it after the multi-key lock: ${error}`),
        );
        await got.release();
      } finally {
        await Promise.all([holderK, holderJ, multi, single].map((r) => r!.close()));
      }
    });

    it("a multi-key waiter beside a busy key keeps its retries: once it passed the busy key on, it is not told of each release of it while its other key is held, and it gets both once that one is released", async () => {
      // Y waits for [a, b] while b is held; another instance loops on a.
      // Each release of a reserved it for Y and told Y, whose round was
      // refused for b: Y's 5 retries were gone in a few hundred ms, long
      // before b was released. Now a key Y passed on is not reserved for
      // it again for a while (heir-queue.ts, passOrKeep).
      const holder = new Redlock(cluster.urls, strict);
      const looper = new Redlock(cluster.urls, strict);
      const multi = new Redlock(cluster.urls, {
        ...strict,
        retry: { retries: 5, delayMs: 1_000, jitterMs: 0 },
      });
      let looping = true;
      let loops = 0;
      const loop = (async () => {
        while (looping) {
          const lock = await looper.acquire(["a"], 5_000, {
            retry: { retries: 10_000, delayMs: 20, jitterMs: 5 },
          });
          loops++;
          await sleep(1);
          await lock.release();
        }
      })();
      try {
        const held = await holder.acquire(["b"], 10_000);
        await until("the loop on a to run", () => loops >= 5);
        const waiting = multi.acquire(["a", "b"], 5_000);
        // Y is woken for a again and again meanwhile (the loop goes on).
        const before = loops;
        await until("several releases of a while Y waits", () => loops >= before + 10);
        await held.release();
        const both = await waiting;
        assert.deepEqual(both.resources, ["a", "b"]);
        await both.release();
      } finally {
        looping = false;
        await loop.catch(() => {});
        await Promise.all([holder.close(), looper.close(), multi.close()]);
      }
    });

    it("a multi-key waiter alone in a free key's queue, refused for a held key, is not reserved that key and told again in a loop", async () => {
      // Refused for B past the time A is kept for it, the waiter passed A on
      // to the next waiter in A's queue, and, alone there, to itself: told,
      // it tried again at once, was refused again, and so on, about 700
      // rounds a second until it gave up.
      const holder = new Redlock(cluster.urls, strict);
      const trier = new Redlock(cluster.urls, { ...strict, retry: { retries: 0 } });
      const waiter = new Redlock(cluster.urls, {
        ...strict,
        retry: { retries: 10_000, delayMs: 200, jitterMs: 0 },
      });
      const node = cluster.client(0);
      const scriptCalls = async () =>
        Number(/cmdstat_evalsha:calls=(\d+)/.exec(await node.info("commandstats"))?.[1] ?? 0);
      try {
        const held = await holder.acquire(["B"], 10_000);
        const before = await scriptCalls();
        const waiting = waiter.acquire(["A", "B"], 5_000, { waitMs: 1_500 });
        await until("the waiter to queue", () => waiter.waitingCount === 1);
        // A release of A reserves it for the waiter and tells it; refused
        // for B, it has A kept for it (200 ms). A second release after that
        // makes it pass A on.
        await (await trier.acquire(["A"], 5_000)).release();
        await sleep(300);
        await (await trier.acquire(["A"], 5_000)).release();
        await assert.rejects(waiting, { code: "ERR_RESOURCE_LOCKED" });
        // Its polls (every 200 ms for 1.5 s), the releases' notices, the
        // others' few calls: a handful, not hundreds.
        const calls = (await scriptCalls()) - before;
        assert.ok(calls < 60, `${calls} script calls on one node in 1.5 s`);
        await held.release();
      } finally {
        await Promise.all([holder.close(), trier.close(), waiter.close()]);
      }
    });

    it("two multi-key waiters refused for the same held key do not pass their free key back and forth: both get their keys once it is released", async () => {
      // W1 and W2 want [a, b]; a single-key waiter is ahead of them on b,
      // which is held. a's release reserves a for W1; refused for b (not
      // next in line for it), W1 passes a to W2, W2 back to W1, and so on,
      // a round every half millisecond until both used 100 of them and
      // gave up, long before b came free.
      const holder = new Redlock(cluster.urls, strict);
      const first = new Redlock(cluster.urls, strict);
      const other = new Redlock(cluster.urls, strict);
      const [w1, w2] = [0, 1].map(() => new Redlock(cluster.urls, strict));
      const node = cluster.client(0);
      const scriptCalls = async () =>
        Number(/cmdstat_evalsha:calls=(\d+)/.exec(await node.info("commandstats"))?.[1] ?? 0);
      try {
        const heldB = await holder.acquire(["b"], 10_000);
        const firstForB = first.acquire(["b"], 5_000, { retry: { retries: 30 } });
        await until("the single-key waiter to queue on b", () => first.waitingCount === 1);
        const heldA = await other.acquire(["a"], 10_000);
        const before = await scriptCalls();
        // Retries to spare: whatever the machine's load, they wait for b.
        const patientRetry = { retry: { retries: 50, delayMs: 200, jitterMs: 100 } };
        const both = [
          w1!.acquire(["a", "b"], 5_000, patientRetry),
          w2!.acquire(["a", "b"], 5_000, patientRetry),
        ];
        await until("both to wait", () => w1!.waitingCount === 1 && w2!.waitingCount === 1);
        await heldA.release();
        await sleep(1_000);
        await heldB.release();
        await (await firstForB).release();
        // Each released once granted, in whichever order they get it.
        await Promise.all(both.map(async (granted) => (await granted).release()));
        // Their rounds, polls and notices, and the others' few calls: tens,
        // not the hundreds of a pass back and forth.
        const calls = (await scriptCalls()) - before;
        assert.ok(calls < 80, `${calls} script calls on one node`);
      } finally {
        await Promise.all([holder, first, other, w1!, w2!].map((r) => r.close()));
      }
    });

    it("a multi-key waiter that gives up leaves every key's queue on every node", async () => {
      const holder = new Redlock(cluster.urls, strict);
      const multi = new Redlock(cluster.urls, toldOnly);
      try {
        const lock = await holder.acquire(["g"], 10_000);
        const stop = new AbortController();
        const waiting = multi.acquire(["g", "h"], 10_000, { signal: stop.signal });
        await until("the waiter to queue on both keys on every node", async () =>
          [...(await queued(cluster, "g")), ...(await queued(cluster, "h"))].every(
            (q) => q.length === 1,
          ),
        );
        stop.abort();
        await assert.rejects(waiting);
        // Left before acquire() rejected.
        const left = await cluster.onAll((c) =>
          c.exists("redquorum:queue:g", "redquorum:queue:h", "redquorum:heir:h"),
        );
        assert.deepEqual(left, [0, 0, 0, 0, 0], "no queue or reservation left");
        await lock.release();
      } finally {
        await Promise.all([holder.close(), multi.close()]);
      }
    });
  });
});
