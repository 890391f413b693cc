import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { Redis } from "ioredis";
import { createClient } from "redis";
import NodeRedlock from "redlock";
import { type Lock, Redlock, ResourceLockedError } from "../../src/index.js";
import { instanceOfWaiter } from "../../src/lock/queue-keys.js";
import { leaveQueueScript, releaseScript } from "../../src/lock/release-script.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";
import { noTimers, until } from "../helpers/no-timers.js";
import { sleep } from "../helpers/sleep.js";
import { TcpProxy } from "../helpers/tcp-proxy.js";
import { notAboutTimeouts } from "../helpers/timeouts.js";

/**
 * The nodes' wait queue (src/lock/heir-queue.ts): waiters of independent
 * instances (as separate processes would be) register on the nodes, a
 * release reserves the key for the head of the queue and tells that one
 * waiter, and nobody else is woken.
 */
/**
 * Every release hands over at once (no turn kept, src/lock/turns.ts): these
 * tests check the queue itself. And not node timeouts: a loaded machine's
 * stall past the 50 ms default failed a holder's acquire on every node.
 */
const strict = { turnMs: 0, ...notAboutTimeouts };
const patient = notAboutTimeouts;
/**
 * A waiter no fallback poll ever wakes (its clock's timers never fire):
 * only a notice or a handoff does. Its polls would renew its place in
 * the nodes' queues, so its retry delay sets how long that place lasts
 * unrenewed (4 polls: 20 s here). With the default (1.2 s), a setup slower
 * than that on a loaded machine let the first waiter's place lapse, and the
 * next one was handed the lock first.
 */
const toldOnly = {
  ...strict,
  clock: noTimers,
  retry: { retries: 10, delayMs: 5_000, jitterMs: 0 },
};

describe("waiters of different instances take turns through the nodes' queue", () => {
  let cluster: TestCluster;

  before(async () => {
    cluster = await startCluster({ nodeCount: 5 });
  });
  after(() => cluster.stop());
  beforeEach(() => cluster.flushAll());

  /** A subscriber on node 0 to instance "inst"'s heir channel, and the notices it heard. */
  async function listenAsInst() {
    const listener = new Redis(cluster.urls[0]!);
    const heard: string[] = [];
    listener.on("message", (_channel: string, message: string) => heard.push(message));
    await listener.subscribe("redquorum:heir-of:inst");
    return { listener, heard };
  }

  it("each release wakes only the next waiter, in the order they queued, with one round each", async () => {
    const count = 6;
    const holder = new Redlock(cluster.urls, strict);
    // No fallback poll ever fires: a waiter can only get the lock by being named heir.
    const waiters = Array.from({ length: count }, () => new Redlock(cluster.urls, toldOnly));
    try {
      let lock: Lock = await holder.acquire(["q"], 10_000);
      const waiting: Array<Promise<Lock>> = [];
      for (const [i, waiter] of waiters.entries()) {
        waiting.push(waiter.acquire(["q"], 10_000, { signal: AbortSignal.timeout(20_000) }));
        await until(`waiter ${i} to queue`, () => waiter.waitingCount === 1);
      }
      await until("every waiter to listen on every node", async () =>
        (await cluster.heirSubscribers()).every((n) => n === count),
      );
      for (let i = 0; i < count; i++) {
        const before = await cluster.evalshaCalls();
        await lock.release();
        const next = await Promise.race(waiting.map((p, at) => p.then((got) => ({ got, at }))));
        assert.equal(next.at, i, `waiter ${next.at} went before waiter ${i}, which queued first`);
        waiting[i] = new Promise(() => {}); // taken
        // The nodes not needed for the majority answer a moment later.
        await until(
          `release ${i}: every node to answer`,
          async () => (await cluster.evalshaCalls()) - before >= 10,
        );
        await sleep(5); // another call, if any, would come at once
        assert.equal(
          (await cluster.evalshaCalls()) - before,
          10,
          "one release and one acquire call per node: nobody else tried, and the heir's " +
            "fencing token needed no round of its own (its refusal told it the counter)",
        );
        for (const [j, waiter] of waiters.entries()) {
          assert.equal(waiter.waitingCount, j > i ? 1 : 0, `waiter ${j} after release ${i}`);
        }
        assert.ok(next.got.fence! > lock.fence!, "tokens rise from holder to heir");
        lock = next.got;
      }
      await lock.release();
    } finally {
      await Promise.all([holder.close(), ...waiters.map((w) => w.close())]);
    }
  });

  it("a key reserved for a waiter is refused to other redquorum callers that wait, not to node-redlock, and lapses", async () => {
    // The reservation a release makes, made by hand so the test does not race its lapse.
    await cluster.onAll((c) => c.set("redquorum:heir:r", "someone:1", "PX", 60_000));
    // Callers that may wait (a try-lock takes a free key however it is
    // reserved: fair-share.test.ts), and give up after a second refusal.
    const redlock = new Redlock(cluster.urls, {
      ...patient,
      retry: { retries: 1, delayMs: 1, jitterMs: 0 },
    });
    const clients = cluster.urls.map((url) => new Redis(url));
    const theirs = new NodeRedlock(clients, { retryCount: 0 });
    try {
      await assert.rejects(redlock.acquire(["r"], 5_000), ResourceLockedError);
      const foreign = await theirs.acquire(["r"], 5_000);
      await foreign.release();
      // A reservation that lapses leaves an ordinary free key.
      await cluster.onAll((c) => c.pexpire("redquorum:heir:r", 1));
      await until("the reservation to lapse", async () =>
        (await cluster.onAll((c) => c.exists("redquorum:heir:r"))).every((n) => n === 0),
      );
      const ours = await redlock.acquire(["r"], 5_000);
      await ours.release();
    } finally {
      await redlock.close();
      for (const client of clients) client.disconnect();
    }
  });

  it("an heir that died does not keep the lock: its reservation lapses and another caller gets it", async () => {
    const holder = new Redlock(cluster.urls, strict);
    const doomed = new Redlock(cluster.urls, { ...strict, clock: noTimers });
    const other = new Redlock(cluster.urls, {
      ...patient,
      retry: { retries: 100, delayMs: 20, jitterMs: 5 },
    });
    try {
      const lock = await holder.acquire(["d"], 10_000);
      const waiting = doomed.acquire(["d"], 10_000);
      await until("the doomed waiter to queue", () => doomed.waitingCount === 1);
      // close() ends the wait without leaving the queue, as a crash would.
      await doomed.close();
      await assert.rejects(waiting);
      await lock.release();
      const heirs = await cluster.onAll((c) => c.get("redquorum:heir:d"));
      const reserved = heirs.filter((heir) => heir !== null).length;
      // Reserved for the dead waiter (unless this process stalled past the reservation).
      assert.ok(reserved === 0 || reserved === 5, `reserved on ${reserved} nodes`);
      const got = await other.acquire(["d"], 10_000);
      await got.release();
    } finally {
      await Promise.all([holder.close(), doomed.close(), other.close()]);
    }
  });

  it("a registration that never takes its reservation gets one turn, then the next waiter is heir", async () => {
    const holder = new Redlock(cluster.urls, { ...strict, retry: { retries: 0 } });
    const waiter = new Redlock(cluster.urls, toldOnly);
    try {
      let lock = await holder.acquire(["s"], 10_000);
      const waiting = waiter.acquire(["s"], 10_000, { signal: AbortSignal.timeout(20_000) });
      await until("the waiter to queue", () => waiter.waitingCount === 1);
      await until("the waiter to listen on every node", async () =>
        (await cluster.heirSubscribers()).every((n) => n === 1),
      );
      // A registration ahead of it whose owner is gone (crashed, or granted
      // by other nodes before it left this queue), far from expiring.
      await cluster.onAll(async (c) => {
        await c.zadd("redquorum:queue:s", 0, "ghost:1");
        await c.zadd("redquorum:queue-expiry:s", 9e15, "ghost:1");
      });
      await lock.release(); // reserved for the ghost, which never comes
      assert.deepEqual(await cluster.onAll((c) => c.get("redquorum:heir:s")), [
        ...Array(5).fill("ghost:1"),
      ]);
      await until("the ghost's reservation to lapse", async () =>
        (await cluster.onAll((c) => c.exists("redquorum:heir:s"))).every((n) => n === 0),
      );
      assert.equal(waiter.waitingCount, 1, "the waiter was not woken for the ghost's turn");
      lock = await holder.acquire(["s"], 10_000); // the lapsed key is free to anyone
      await lock.release(); // the ghost had its turn: the waiter is heir now
      const got = await waiting;
      await got.release();
      const ghosts = await cluster.onAll((c) => c.zscore("redquorum:queue:s", "ghost:1"));
      assert.deepEqual(ghosts, [null, null, null, null, null], "the ghost left every queue");
    } finally {
      await Promise.all([holder.close(), waiter.close()]);
    }
  });

  it("an heir whose round found the key taken keeps its turn: the next release reserves it again and tells it", async () => {
    // Under load an heir's round can come after its reservation lapsed and
    // another caller took the key. It tried, so it is alive and waiting:
    // dropped as one that never came, it heard of no later release and
    // waited for its own poll (a minute here; with no timers, for ever).
    const holder = new Redlock(cluster.urls, { ...strict, retry: { retries: 0 } });
    const waiter = new Redlock(cluster.urls, toldOnly);
    try {
      const lock = await holder.acquire(["late"], 10_000);
      const waiting = waiter.acquire(["late"], 10_000, { signal: AbortSignal.timeout(20_000) });
      await until("the waiter to queue", () => waiter.waitingCount === 1);
      await until("the waiter to listen on every node", async () =>
        (await cluster.heirSubscribers()).every((n) => n === 1),
      );
      const [id] = (await cluster.onAll((c) => c.zrange("redquorum:queue:late", 0, 0)))[0]!;
      // Its earlier reservation (as a release made it), and its notice; the
      // key was taken before its round came (the holder holds it again).
      const before = await cluster.evalshaCalls();
      await cluster.onAll(async (c) => {
        await c.set("redquorum:heir-last:late", id!, "PX", 60_000);
        await c.publish(`redquorum:heir-of:${instanceOfWaiter(id!)}`, id!);
      });
      await until(
        "the heir's round to be refused on every node",
        async () => (await cluster.evalshaCalls()) - before >= 5,
      );
      assert.equal(waiter.waitingCount, 1, "refused, it still waits");
      await lock.release();
      const got = await waiting.catch((error: unknown) =>
        assert.fail(`the heir was not told of the next release: ${error}`),
      );
      await got.release();
    } finally {
      await Promise.all([holder.close(), waiter.close()]);
    }
  });

  it("24 callers of one instance all get the lock in turn without a fallback poll", async () => {
    // No fallback poll fires: each caller must be handed the lock or woken
    // by a release of its own instance, whether or not the nodes queue it.
    const redlock = new Redlock(cluster.urls, { ...notAboutTimeouts, clock: noTimers });
    try {
      const first = await redlock.acquire(["y"], 10_000);
      const callers = 24;
      const done = Array.from({ length: callers }, async () => {
        const lock = await redlock.acquire(["y"], 10_000, { signal: AbortSignal.timeout(10_000) });
        await lock.release();
      });
      await until("every caller to wait", () => redlock.waitingCount === callers);
      await first.release();
      await Promise.all(done);
    } finally {
      await redlock.close();
    }
  });

  it("a waiter that gives up leaves every node's queue", async () => {
    const holder = new Redlock(cluster.urls, strict);
    const waiter = new Redlock(cluster.urls, { ...strict, clock: noTimers });
    try {
      const lock = await holder.acquire(["g"], 10_000);
      const stop = new AbortController();
      const waiting = waiter.acquire(["g"], 10_000, { signal: stop.signal });
      await until("the waiter to queue", () => waiter.waitingCount === 1);
      const queued = await cluster.onAll((c) => c.zcard("redquorum:queue:g"));
      assert.deepEqual(queued, [1, 1, 1, 1, 1], "registered on every node");
      stop.abort();
      await assert.rejects(waiting);
      await until("the registrations to go", async () =>
        (await cluster.onAll((c) => c.exists("redquorum:queue:g"))).every((n) => n === 0),
      );
      await lock.release();
    } finally {
      await Promise.all([holder.close(), waiter.close()]);
    }
  });

  it("a waiter whose instance closes leaves every node's queue before close() resolves", async () => {
    const holder = new Redlock(cluster.urls, strict);
    const waiter = new Redlock(cluster.urls, { ...strict, clock: noTimers });
    try {
      const lock = await holder.acquire(["c"], 10_000);
      const waiting = waiter.acquire(["c"], 10_000);
      await until("the waiter to queue", () => waiter.waitingCount === 1);
      assert.deepEqual(await cluster.onAll((c) => c.zcard("redquorum:queue:c")), [1, 1, 1, 1, 1]);
      await waiter.close();
      await assert.rejects(waiting, { code: "ERR_CLOSED" });
      // Left queued, it would be the heir of the next release: the key
      // reserved for a caller that is gone, the next waiter kept out until
      // the reservation lapses.
      assert.deepEqual(await cluster.onAll((c) => c.zcard("redquorum:queue:c")), [0, 0, 0, 0, 0]);
      await lock.release();
    } finally {
      await Promise.all([holder.close(), waiter.close()]);
    }
  });

  it("waiters far back in the queue renew their registrations before they lapse", async () => {
    // A first registration lasts 4 × 500 ms; a waiter with 5 ahead would
    // next poll after 6 × 500 ms. It must poll before its registration
    // lapses, or it drops out of the queue while it sleeps.
    const holder = new Redlock(cluster.urls, strict);
    const lock = await holder.acquire(["w"], 10_000);
    const count = 6;
    const waiters = Array.from(
      { length: count },
      () =>
        new Redlock(cluster.urls, {
          ...patient,
          retry: { retries: 10_000, delayMs: 500, jitterMs: 0 },
        }),
    );
    const stop = new AbortController();
    const waiting = waiters.map((waiter) =>
      waiter.acquire(["w"], 10_000, { signal: stop.signal }).catch((error: unknown) => error),
    );
    try {
      await until("every waiter to queue on every node", async () =>
        (await cluster.onAll((c) => c.zcard("redquorum:queue:w"))).every((n) => n === count),
      );
      const queuedAt = performance.now();
      // Past the first registrations' life (2 s), short of the last poll (3 s).
      await sleep(2_600);
      // Lapsed registrations are only removed when a release looks: count
      // the ones whose expiry (node time, ms) is still ahead.
      const live = await cluster.onAll(async (c) => {
        const [seconds, micros] = await c.time();
        const nowMs = Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000);
        return c.zcount("redquorum:queue-expiry:w", `(${nowMs}`, "+inf");
      });
      assert.ok(performance.now() - queuedAt < 4_000, "this process stalled: nothing to conclude");
      assert.deepEqual(
        live,
        Array(5).fill(count),
        "every waiter's registration is alive on every node",
      );
    } finally {
      stop.abort();
      await Promise.all(waiting);
      await lock.release();
      await Promise.all([holder.close(), ...waiters.map((w) => w.close())]);
    }
  });

  it("a waiter granted on its first attempt leaves the queues of the nodes that refused it", async () => {
    // Two nodes hold the key for someone else (a foreign lock left on a
    // minority): the first attempt is granted by the other three and queued
    // by these two. Left there, the registration would be those nodes' heir
    // for a release nobody waits for, and their vote would go to it.
    const foreign = [cluster.client(0), cluster.client(1)];
    await Promise.all(foreign.map((c) => c.set("f", "foreign", "PX", 60_000)));
    const zadds = () =>
      Promise.all(
        foreign.map(async (c) => {
          const stats = await c.info("commandstats");
          return Number(/cmdstat_zadd:calls=(\d+)/.exec(stats)?.[1] ?? 0);
        }),
      );
    // Registrations then last 20 s: only a leave can empty the queues in `until`'s 5 s.
    const redlock = new Redlock(cluster.urls, {
      ...patient,
      retry: { retries: 3, delayMs: 5_000, jitterMs: 0 },
    });
    try {
      const before = await zadds();
      const lock = await redlock.acquire(["f"], 10_000);
      const after = await zadds();
      assert.ok(
        after.every((n, i) => n > before[i]!),
        "the refusing nodes queued the waiter (else this test shows nothing)",
      );
      await until("the refusing nodes' queues to be left", async () =>
        (await cluster.onAll((c) => c.zcard("redquorum:queue:f"))).every((n) => n === 0),
      );
      await lock.release();
    } finally {
      await redlock.close();
    }
  });

  it("a release's notice names the heir and the resource's fencing counter (at least the floor), or no counter where it has none", async () => {
    // The release script alone on one node, a queue of one waiter: the
    // heir's next proposal starts above the counter the notice carries.
    const node = cluster.client(0);
    const { listener, heard } = await listenAsInst();
    try {
      const cases = [
        { counter: "41", floor: "45", notice: "inst:1 45" },
        { counter: "47", floor: "45", notice: "inst:1 47" },
        { counter: "47", floor: undefined, notice: "inst:1 47" },
        { counter: undefined, floor: "45", notice: "inst:1" },
      ];
      for (const [i, { counter, floor, notice }] of cases.entries()) {
        await cluster.flushAll();
        await node.set("n", "v", "PX", 10_000);
        await node.zadd("redquorum:queue:n", 1, "inst:1");
        await node.zadd("redquorum:queue-expiry:n", Date.now() + 60_000, "inst:1");
        if (counter) await node.set("redquorum:fence:n", counter);
        if (floor) await node.set("redquorum:fence-floor", floor);
        const reply = await node.eval(releaseScript.source, 1, "n", "v", "1000", "1", "");
        assert.deepEqual(reply, [1, "inst:1"], `case ${i}: deleted, reserved for inst:1`);
        await until(`notice ${i}`, () => heard.length > i);
        assert.equal(heard[i], notice, `case ${i}: ${JSON.stringify({ counter, floor })}`);
      }
    } finally {
      listener.disconnect();
    }
  });
  for (const via of ["its own connections", "the caller's node-redis clients"]) {
    it(`a waiter whose pub/sub connections dropped while it was named heir tries once they are back, not at its next poll (${via})`, async () => {
      // The waiter reaches every node through a proxy: its connections are
      // dropped and held (open, nothing forwarded) while the lock is
      // released, so the release's notices reach nobody. It has no poll.
      const proxies = await Promise.all(
        cluster.urls.map((url) => TcpProxy.start(Number(new URL(url).port))),
      );
      const clients =
        via === "its own connections"
          ? []
          : proxies.map((proxy) =>
              createClient({ url: proxy.url, socket: { reconnectStrategy: () => 20 } }),
            );
      // The caller's clients see the drop too: a client without an error
      // listener would throw it.
      for (const client of clients) client.on("error", () => {});
      await Promise.all(clients.map((client) => client.connect()));
      const holder = new Redlock(cluster.urls, strict);
      const waiter = new Redlock(
        clients.length > 0 ? clients : proxies.map((proxy) => proxy.url),
        toldOnly,
      );
      try {
        const lock = await holder.acquire(["w"], 10_000);
        const waiting = waiter.acquire(["w"], 10_000, { signal: AbortSignal.timeout(10_000) });
        await until("the waiter to queue on every node", async () =>
          (await cluster.onAll((c) => c.zcard("redquorum:queue:w"))).every((n) => n === 1),
        );
        await until("the waiter to listen on every node", async () =>
          (await cluster.heirSubscribers()).every((n) => n === 1),
        );
        // Parked (its try once it heard its channel is over): only a wake
        // ends its wait.
        await until("the waiter to wait in its queue", async () => waiter.waitingCount === 1);
        for (const proxy of proxies) {
          proxy.hold = true;
          proxy.drop();
        }
        await until("its subscriptions to be gone on every node", async () =>
          (await cluster.heirSubscribers()).every((n) => n === 0),
        );
        await lock.release();
        // The release resolves once a majority answered; the others' calls
        // land just after (on a loaded machine, after the first check).
        const reserved = cluster.urls.map(() => false);
        await until("the release to reserve w for the waiter on every node", async () => {
          const found = await cluster.onAll((c) => c.exists("redquorum:heir:w"));
          found.forEach((n, i) => {
            if (n === 1) reserved[i] = true;
          });
          return reserved.every(Boolean);
        });
        for (const proxy of proxies) proxy.forwardHeld();
        const got = await waiting.catch((error: unknown) =>
          assert.fail(`the waiter did not try once its connections were back: ${error}`),
        );
        await got.release();
      } finally {
        await Promise.all([holder.close(), waiter.close()]);
        await Promise.all(clients.map((client) => client.quit()));
        await Promise.all(proxies.map((proxy) => proxy.close()));
      }
    });
  }

  it("a release that reserves several keys for one waiter tells it once: each notice from a node is one release", async () => {
    // The instance takes a node's second notice for a waiter as a later
    // release (heir-watch.ts); one notice per key would wake it twice.
    const node = cluster.client(0);
    const { listener, heard } = await listenAsInst();
    try {
      for (const key of ["m", "n"]) {
        await node.set(key, "v", "PX", 10_000);
        await node.zadd(`redquorum:queue:${key}`, 1, "inst:1");
        await node.zadd(`redquorum:queue-expiry:${key}`, Date.now() + 60_000, "inst:1");
      }
      const reply = await node.eval(releaseScript.source, 2, "m", "n", "v", "1000", "1", "");
      assert.deepEqual(reply, [2, "inst:1"], "both deleted, the first reserved for inst:1");
      assert.deepEqual(
        await node.mget("redquorum:heir:m", "redquorum:heir:n"),
        ["inst:1", "inst:1"],
        "both keys reserved for it",
      );
      // A node's messages reach a subscriber in order: all the release's
      // notices came before this one.
      await node.publish("redquorum:heir-of:inst", "end");
      await until("the end marker", () => heard.includes("end"));
      assert.deepEqual(heard, ["inst:1", "end"]);
    } finally {
      listener.disconnect();
    }
  });

  it("a waiter that leaves where the key is free and reserved for no one reserves it for the next waiter and tells it; a held key stays unreserved", async () => {
    // "gone:1" was the heir: its attempt took the reservation up, then was
    // undone (aborted, or granted by too few nodes), which frees the key
    // without a reservation. Before, its leaving told no one, and the next
    // waiter waited for its poll.
    const node = cluster.client(0);
    const { listener, heard } = await listenAsInst();
    try {
      await node.set("h", "v", "PX", 10_000);
      for (const key of ["l", "h"]) {
        for (const [score, id] of [
          [1, "gone:1"],
          [2, "inst:1"],
        ] as const) {
          await node.zadd(`redquorum:queue:${key}`, score, id);
          await node.zadd(`redquorum:queue-expiry:${key}`, Date.now() + 60_000, id);
        }
      }
      for (const key of ["l", "h"]) {
        assert.equal(await node.eval(leaveQueueScript.source, 1, key, "gone:1", "1000", "1"), 0);
      }
      assert.deepEqual(await node.mget("redquorum:heir:l", "redquorum:heir:h"), ["inst:1", null]);
      await node.publish("redquorum:heir-of:inst", "end");
      await until("the end marker", () => heard.includes("end"));
      assert.deepEqual(heard, ["inst:1", "end"]);
    } finally {
      listener.disconnect();
    }
  });

  it("a waiter's registration gives its key's queue and the queue's expiries the same life", async () => {
    // Both sorted sets hold the same waiters and lapse together when no one
    // renews them: an expiry set left without a TTL would outlive its queue.
    const holder = new Redlock(cluster.urls, strict);
    const waiter = new Redlock(cluster.urls, {
      ...strict,
      clock: noTimers,
      retry: { retries: 1_000, delayMs: 1_000, jitterMs: 0 },
    });
    const controller = new AbortController();
    try {
      const lock = await holder.acquire(["life"], 10_000);
      const waiting = waiter.acquire(["life"], 10_000, { signal: controller.signal });
      await until("the waiter to queue", () => waiter.waitingCount === 1);
      // Registered for 4 polls of 1 s (acquire.ts, queueArgs).
      for (const [i] of cluster.urls.entries()) {
        const client = cluster.client(i);
        const queue = await client.pttl("redquorum:queue:life");
        const expiry = await client.pttl("redquorum:queue-expiry:life");
        assert.ok(queue > 0 && queue <= 4_000, `node ${i}: queue PTTL ${queue}`);
        assert.ok(expiry > 0 && expiry <= 4_000, `node ${i}: expiries PTTL ${expiry}`);
        assert.ok(Math.abs(queue - expiry) < 1_000, `node ${i}: ${queue} against ${expiry} ms`);
      }
      controller.abort();
      await assert.rejects(waiting);
      await lock.release();
    } finally {
      await Promise.all([holder.close(), waiter.close()]);
    }
  });
});
