import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { Redis } from "ioredis";
import { createClient } from "redis";
import NodeRedlock from "redlock";
import { maxId } from "../../src/decimal.js";
import { fenceKeyOf } from "../../src/fencing/scripts.js";
import {
  FenceOverflowError,
  type Lock,
  LockExpiredError,
  limits,
  QuorumError,
  Redlock,
  ResourceLockedError,
  systemClock,
} from "../../src/index.js";
import { releaseScript } from "../../src/lock/release-script.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";
import { sleep } from "../helpers/sleep.js";
import { notAboutTimeouts } from "../helpers/timeouts.js";
import { wrappedTransports } from "../helpers/wrapped-transport.js";

const fast = { retry: { retries: 2, delayMs: 10, jitterMs: 5 }, ...notAboutTimeouts };

describe("Redlock on 5 real redis-server nodes", () => {
  let cluster: TestCluster;
  let redlock: Redlock;
  let other: Redlock;

  before(async () => {
    cluster = await startCluster({ nodeCount: 5 });
    redlock = new Redlock(cluster.urls, fast);
    other = new Redlock(cluster.urls, fast);
  });
  after(async () => {
    await redlock.close();
    await other.close();
    await cluster.stop();
  });
  beforeEach(() => cluster.flushAll());

  it("acquires on every node with the resource name as key and a 20-byte random value", async () => {
    const lock = await redlock.acquire(["orders:42"], 5_000);
    assert.match(lock.value, /^[0-9a-f]{40}$/);
    const values = await cluster.onAll((c) => c.get("orders:42"));
    // The round ends at a majority; the other SETs were sent and land shortly after.
    await waitFor(async () =>
      (await cluster.onAll((c) => c.get("orders:42"))).every((v) => v === lock.value),
    );
    assert.ok(values.filter((v) => v === lock.value).length >= 3);
    const ttls = await cluster.onAll((c) => c.pttl("orders:42"));
    for (const ttl of ttls) assert.ok(ttl > 4_000 && ttl <= 5_000, `pttl ${ttl}`);
    await lock.release();
    await cluster.waitForNoKeys();
  });

  it("an instance's first call with waitMs 0 is one attempt, after reaching the nodes: a free resource is granted", async () => {
    // waitMs bounded first contact too: such a call failed with "reached 0
    // of 5 nodes" on a healthy cluster, before any attempt.
    const fresh = new Redlock(cluster.urls, notAboutTimeouts);
    try {
      const lock = await fresh.acquire(["first-wait-0"], 5_000, { waitMs: 0 });
      await lock.release();
    } finally {
      await fresh.close();
    }
  });

  it("a waiter parks until one round before waitMs ends: a release before then reaches it", async () => {
    // A poll delay (2 s) as long as waitMs: the waiter used to keep a whole
    // delay back for its last round, so it gave up at its first refusal,
    // before the release 300 ms later. One round (nodeTimeoutMs, 1 s) leaves
    // it 700 ms of margin after that release.
    const waiting = new Redlock(cluster.urls, {
      ...notAboutTimeouts,
      retry: { retries: 5, delayMs: 2_000, jitterMs: 0 },
    });
    try {
      const held = await redlock.acquire(["waiter-deadline"], 10_000);
      const startMs = performance.now();
      const waiter = waiting.acquire(["waiter-deadline"], 5_000, { waitMs: 2_000 });
      await sleep(300);
      await held.release();
      const lock = await waiter;
      assert.ok(performance.now() - startMs < 2_000, "granted within waitMs");
      await lock.release();
    } finally {
      await waiting.close();
    }
  });

  it("fencing tokens stop at 2^63 - 1: the grant after the last token fails at once with FenceOverflowError, not after the retry budget", async () => {
    // Tokens fit a signed 64-bit integer (a store's BIGINT column): the
    // next proposal after the last one was 2^63, granted, and the counters
    // then refused every grant for being out of range. Past the last token
    // no retry can help: the grant used to spend its whole retry budget
    // (a QuorumError some seconds later).
    await cluster.onAll((client) => client.set(fenceKeyOf("last-token"), String(maxId - 1n)));
    const lock = await redlock.acquire(["last-token"], 5_000);
    assert.equal(lock.fence, maxId);
    await lock.release();
    const patient = new Redlock(cluster.urls, {
      retry: { retries: 5, delayMs: 200, jitterMs: 0 },
      ...notAboutTimeouts,
    });
    try {
      // Its first contact with the nodes (their checks) before counting.
      await (await patient.acquire(["warm-up"], 5_000)).release();
      const before = await cluster.evalshaCallsByNode();
      await assert.rejects(patient.acquire(["last-token"], 5_000), (error: unknown) => {
        assert.ok(error instanceof FenceOverflowError, String(error));
        assert.equal(error.code, "ERR_FENCE_OVERFLOW");
        assert.equal(error.resource, "last-token");
        assert.match(error.message, /no fencing token is left for "last-token"/);
        return true;
      });
      // One attempt: on each node its acquire call, the undo of what it
      // set, and leaving the wait queue; six attempts would be 12 more.
      const calls = await cluster.evalshaCallsByNode();
      calls.forEach((after, i) => {
        assert.ok(after - before[i]! <= 3, `node ${i}: ${after - before[i]!} script calls`);
      });
      // Nothing of the refused grant is left behind.
      assert.deepEqual(await cluster.onAll((c) => c.exists("last-token")), [0, 0, 0, 0, 0]);
    } finally {
      await patient.close();
    }
  });

  it("remainingMs is ttl minus elapsed minus drift, counting down", async () => {
    const before = performance.now();
    const lock = await redlock.acquire(["r"], 10_000);
    const remaining = lock.remainingMs();
    const drift = 10_000 * 0.01 + 2;
    assert.ok(remaining <= 10_000 - drift, `remaining ${remaining}`);
    assert.ok(
      remaining > 10_000 - drift - (performance.now() - before) - 1,
      `remaining ${remaining}`,
    );
    await new Promise((r) => setTimeout(r, 30));
    assert.ok(lock.remainingMs() <= remaining - 29);
    await lock.release();
  });

  it("excludes a second holder until release", async () => {
    const lock = await redlock.acquire(["r"], 5_000);
    await assert.rejects(other.acquire(["r"], 5_000), ResourceLockedError);
    await lock.release();
    const second = await other.acquire(["r"], 5_000);
    await second.release();
  });

  it("takes all resources of a multi-resource lock or none", async () => {
    await cluster.onAll((c) => c.set("b", "someone-else", "PX", 5_000));
    await assert.rejects(redlock.acquire(["a", "b", "c"], 5_000), ResourceLockedError);
    const keys = await cluster.keysByNode();
    assert.deepEqual(keys, [["b"], ["b"], ["b"], ["b"], ["b"]]);
    await cluster.onAll((c) => c.del("b"));
    const lock = await redlock.acquire(["a", "b", "c"], 5_000);
    await waitFor(async () => (await cluster.keysByNode()).every((k) => k.length === 3));
    await lock.release();
    await cluster.waitForNoKeys();
  });

  it("a key set by hand with SET NX PX on a majority blocks acquire", async () => {
    for (const i of [0, 2, 4]) await cluster.client(i).set("r", "manual", "PX", 5_000, "NX");
    await assert.rejects(redlock.acquire(["r"], 5_000), (error: unknown) => {
      assert.ok(error instanceof ResourceLockedError);
      assert.equal(error.heldNodeCount >= 3, true);
      assert.equal(error.attempts, 3);
      return true;
    });
    // and leaves none of our keys behind: only the three manual ones.
    const values = await cluster.onAll((c) => c.get("r"));
    assert.deepEqual(values, ["manual", null, "manual", null, "manual"]);
  });

  it("after a failed attempt no key of ours is left on any node", async () => {
    // Held elsewhere on 2 nodes: each attempt wins 3 but... make it lose: held on 3.
    for (const i of [1, 3]) await cluster.client(i).set("r", "elsewhere", "PX", 5_000);
    for (const i of [0]) await cluster.client(i).set("r", "elsewhere-too", "PX", 5_000);
    await assert.rejects(redlock.acquire(["r"], 5_000), ResourceLockedError);
    const values = await cluster.onAll((c) => c.get("r"));
    assert.deepEqual(values, ["elsewhere-too", "elsewhere", null, "elsewhere", null]);
  });

  it("release never deletes another holder's key", async () => {
    const lock = await redlock.acquire(["r"], 200);
    await new Promise((r) => setTimeout(r, 250));
    const next = await other.acquire(["r"], 5_000);
    await assert.rejects(lock.release(), LockExpiredError);
    const values = await cluster.onAll((c) => c.get("r"));
    assert.ok(values.filter((v) => v === next.value).length >= 3);
    assert.ok(!values.includes(lock.value));
    await next.release();
  });

  it("extend prolongs our keys, and never another holder's", async () => {
    const lock = await redlock.acquire(["r"], 1_000);
    await lock.extend(8_000);
    assert.ok(lock.remainingMs() > 7_000);
    const ttls = await cluster.onAll((c) => c.pttl("r"));
    assert.ok(ttls.filter((t) => t > 7_000).length >= 3, `ttls ${ttls}`);
    // Another holder's key: our extend must fail and leave its TTL alone.
    await cluster.onAll((c) => c.set("r", "thief", "PX", 3_000));
    await assert.rejects(lock.extend(8_000), LockExpiredError);
    const after = await cluster.onAll((c) => c.pttl("r"));
    for (const ttl of after) assert.ok(ttl <= 3_000, `pttl ${ttl}`);
  });

  it("extend after expiry fails and leaves no key", async () => {
    const lock = await redlock.acquire(["r"], 100);
    await new Promise((r) => setTimeout(r, 150));
    assert.equal(lock.remainingMs(), 0);
    await assert.rejects(lock.extend(5_000), LockExpiredError);
    assert.deepEqual(await cluster.keysByNode(), [[], [], [], [], []]);
  });

  it("extend fails and never re-creates keys that expired on the nodes while validity remains locally", async () => {
    const lock = await redlock.acquire(["r"], 5_000);
    await cluster.onAll((c) => c.del("r"));
    await assert.rejects(lock.extend(5_000), LockExpiredError);
    assert.deepEqual(await cluster.keysByNode(), [[], [], [], [], []]);
  });

  it("never returns a lock whose validity ran out during the round, and leaves no key", async () => {
    // A clock that jumps 60 ms at every reading, as if the event loop had
    // stalled during the round (FAULTS.md L16): a 50 ms lock is never valid.
    let nowMs = 0;
    const stalling = new Redlock(cluster.urls, {
      ...fast,
      clock: { now: () => (nowMs += 60), sleep: (ms, signal) => systemClock.sleep(ms, signal) },
    });
    await assert.rejects(stalling.acquire(["short"], 50), (error: unknown) => {
      assert.ok(error instanceof LockExpiredError, String(error));
      assert.match(error.message, /validity ran out during the round/);
      return true;
    });
    await stalling.close();
    assert.deepEqual(await cluster.keysByNode(), [[], [], [], [], []]);
  });

  it("excludes node-redlock's locks on the same nodes, and they exclude ours", async () => {
    const clients = cluster.urls.map((url) => new Redis(url));
    const theirs = new NodeRedlock(clients, { retryCount: 0 });
    try {
      const foreign = await theirs.acquire(["shared"], 5_000);
      await assert.rejects(redlock.acquire(["shared"], 5_000), ResourceLockedError);
      await foreign.release();
      const ours = await redlock.acquire(["shared"], 5_000);
      await assert.rejects(theirs.acquire(["shared"], 5_000));
      await ours.release();
    } finally {
      for (const client of clients) client.disconnect();
    }
  });

  it("release is idempotent", async () => {
    const lock = await redlock.acquire(["r"], 5_000);
    const first = lock.release();
    assert.equal(lock.release(), first);
    await first;
    assert.equal(lock.released, true);
  });

  it("a failed release names the nodes that no longer held the lock's value, beside those that failed", async () => {
    const lock = await redlock.acquire(["gone-here"], 10_000);
    await waitFor(async () =>
      (await cluster.onAll((c) => c.get("gone-here"))).every((v) => v === lock.value),
    );
    // Nodes 0 and 1 lost the key (as if it expired there); node 2 fails the
    // release (the key is of another type there now).
    for (const index of [0, 1, 2]) await cluster.client(index).del("gone-here");
    await cluster.client(2).hset("gone-here", "f", "v");
    const endpoint = (index: number) => cluster.urls[index]!.replace("redis://", "");
    await assert.rejects(lock.release(), (error: unknown) => {
      assert.ok(error instanceof QuorumError, String(error));
      // Fewer than a majority deleted: the release judged every answer.
      assert.equal(error.successCount, 2, error.message);
      const named = error.nodeErrors.map((e) => e.endpoint).sort();
      assert.deepEqual(named, [0, 1, 2].map(endpoint).sort(), error.message);
      const gone = error.nodeErrors
        .filter((e) => /no longer held this lock's value/.test(e.message))
        .map((e) => e.endpoint)
        .sort();
      assert.deepEqual(gone, [0, 1].map(endpoint).sort(), error.message);
      assert.match(error.message, /WRONGTYPE/);
      return true;
    });
  });

  it("a node that refused the lock and has none of its keys counts as released: a lock whose granting node went down is still released", async () => {
    // Nodes 3 and 4 refuse (the key is held there by someone else): the
    // lock is granted by nodes 0-2.
    for (const index of [3, 4]) {
      await cluster.client(index).set("granted-by-three", "someone-else", "PX", 10_000);
    }
    const lock = await redlock.acquire(["granted-by-three"], 10_000);
    // The lock knows which nodes refused it once they answered.
    await waitFor(async () => lock.neverHeldBy(3) && lock.neverHeldBy(4));
    assert.ok(![0, 1, 2].some((index) => lock.neverHeldBy(index)));
    // Node 2, a granting node, fails the release (its key is of another
    // type now, as if it were down); the refusing nodes delete nothing.
    await cluster.client(2).del("granted-by-three");
    await cluster.client(2).hset("granted-by-three", "f", "v");
    // Nodes 0 and 1 deleted our keys, nodes 3 and 4 never had them: a
    // majority has none of our keys. Counting the refusing nodes' "not our
    // value" against it, the release failed with QuorumError.
    await lock.release();
    assert.deepEqual(
      await cluster.onAll((c) => c.get("granted-by-three").catch(() => "WRONGTYPE")),
      [null, null, "WRONGTYPE", "someone-else", "someone-else"],
    );
  });

  it("a lock that lost its keys on granting nodes until fewer than a majority held it: release rejects with LockExpiredError, nodes that refused it counted as not holding it", async () => {
    for (const index of [3, 4]) {
      await cluster.client(index).set("lost-on-two", "someone-else", "PX", 10_000);
    }
    const lock = await redlock.acquire(["lost-on-two"], 10_000);
    await waitFor(async () => lock.neverHeldBy(3) && lock.neverHeldBy(4));
    // Nodes 0 and 1 lose the key (evicted, say): only node 2 holds it.
    for (const index of [0, 1]) await cluster.client(index).del("lost-on-two");
    await assert.rejects(lock.release(), (error: unknown) => {
      assert.ok(error instanceof LockExpiredError, String(error));
      assert.match(error.message, /4 of 5 nodes did not have our value/);
      return true;
    });
    // Still deleted where it was ours.
    assert.equal(await cluster.client(2).exists("lost-on-two"), 0);
  });

  it("a granting node that lost our key while the lock was valid, its answer read after the validity: release still rejects with LockExpiredError", async () => {
    // Node 2's answers to the release reach the client late (a slow return
    // path, a stalled client): only at `lateUntil`.
    let lateUntil = 0;
    const transports = wrappedTransports(cluster.urls, (real, i) => ({
      async send(args, timeoutMs) {
        const reply = await real.send(args, timeoutMs);
        const release = args.includes(releaseScript.sha1) || args.includes(releaseScript.source);
        if (i === 2 && release && performance.now() < lateUntil) {
          await sleep(lateUntil - performance.now());
        }
        return reply;
      },
    }));
    const late = new Redlock(transports, { nodeTimeoutMs: 1_000, retry: { retries: 0 } });
    try {
      for (const index of [3, 4]) {
        await cluster.client(index).set("lost-read-late", "someone-else", "PX", 10_000);
      }
      const lock = await late.acquire(["lost-read-late"], 500);
      await waitFor(async () => lock.neverHeldBy(3) && lock.neverHeldBy(4));
      // Lost while valid: node 2 drops our key (evicted, say); only nodes 0
      // and 1 hold it. Its "not our value" comes 50 ms after the validity:
      // a loss, or a key that expired there after it? Taken for a loss.
      await cluster.client(2).del("lost-read-late");
      lateUntil = performance.now() + lock.remainingMs() + 50;
      await assert.rejects(lock.release(), LockExpiredError);
    } finally {
      await late.close();
    }
  });

  it("a release waits for answers slower than nodeTimeoutMs (a busy machine), where an acquire gives up", async () => {
    // Every node answers 150 ms late once `slow` is set: three times the
    // 50 ms default bound on a node's answer.
    let slow = false;
    const transports = wrappedTransports(cluster.urls, (real) => ({
      send: async (args, timeoutMs) => {
        if (slow) await sleep(150);
        return real.send(args, timeoutMs);
      },
      subscribe: null,
    }));
    const late = new Redlock(transports, { retry: { retries: 0 } });
    try {
      // Taken before the nodes slow down, tried again while a loaded
      // machine misses the 50 ms bound (this instance makes one attempt).
      let lock: Lock | undefined;
      for (let attempt = 0; !lock; attempt++) {
        lock = await late.acquire(["slow-release"], 10_000).catch((error: unknown) => {
          if (!(error instanceof QuorumError) || attempt >= 50) throw error;
          return undefined;
        });
      }
      slow = true;
      await assert.rejects(late.acquire(["other"], 10_000), QuorumError, "an acquire is bounded");
      // Resolved, not rejected: the majority's late answers were counted.
      await lock.release();
      // The release resolves once a majority deleted; the others' answers
      // come after it (its calls run on, up to releaseWaitMs), and on a
      // loaded machine the last node's delete ran a moment after the check.
      let left = await cluster.onAll((c) => c.exists("slow-release"));
      for (let i = 0; i < 100 && left.some((n) => n !== 0); i++) {
        await sleep(20);
        left = await cluster.onAll((c) => c.exists("slow-release"));
      }
      assert.deepEqual(left, [0, 0, 0, 0, 0], "released on every node");
    } finally {
      slow = false;
      await late.close();
    }
  });

  it("await using releases on scope exit", async () => {
    {
      await using lock = await redlock.acquire(["scoped"], 5_000);
      assert.ok(lock.remainingMs() > 0);
      assert.ok((await cluster.onAll((c) => c.exists("scoped"))).some((n) => n === 1));
    }
    await cluster.waitForNoKeys();
  });

  it("keyPrefix is prepended to the key", async () => {
    const prefixed = new Redlock(cluster.urls, { ...fast, keyPrefix: "locks:" });
    const lock = await prefixed.acquire(["r"], 5_000);
    assert.deepEqual(lock.keys, ["locks:r"]);
    assert.ok((await cluster.onAll((c) => c.get("locks:r"))).includes(lock.value));
    await lock.release();
    await prefixed.close();
  });

  it("recovers from SCRIPT FLUSH on every node between two acquisitions", async () => {
    const first = await redlock.acquire(["r"], 5_000);
    await first.release();
    await cluster.onAll((c) => c.script("FLUSH"));
    const second = await redlock.acquire(["r"], 5_000);
    await cluster.onAll((c) => c.script("FLUSH"));
    await second.extend(5_000);
    await cluster.onAll((c) => c.script("FLUSH"));
    await second.release();
    await cluster.waitForNoKeys();
  });

  it("aborting with a signal rejects with the signal's reason and leaves no key", async () => {
    for (const i of [0, 1, 2]) await cluster.client(i).set("r", "held", "PX", 5_000);
    const controller = new AbortController();
    const reason = new Error("caller gave up");
    const pending = redlock.acquire(["r"], 5_000, {
      signal: controller.signal,
      retry: { retries: 1_000, delayMs: 20, jitterMs: 0 },
    });
    setTimeout(() => controller.abort(reason), 100);
    await assert.rejects(pending, (error) => error === reason);
    const values = await cluster.onAll((c) => c.get("r"));
    assert.deepEqual(values, ["held", "held", "held", null, null]);
  });

  it("waitMs bounds the whole acquire", async () => {
    for (const i of [0, 1, 2]) await cluster.client(i).set("r", "held", "PX", 5_000);
    const start = performance.now();
    await assert.rejects(
      redlock.acquire(["r"], 5_000, {
        waitMs: 150,
        retry: { retries: 1_000, delayMs: 20, jitterMs: 0 },
      }),
      ResourceLockedError,
    );
    // Bounded: it gave up after ~150 ms instead of running 1000 retries (20 s).
    assert.ok(performance.now() - start < 2_000);
  });

  it("works with the caller's own node-redis clients, NOSCRIPT included", async () => {
    const clients = cluster.urls.map((url) => createClient({ url }));
    await Promise.all(clients.map((c) => c.connect()));
    try {
      const viaNodeRedis = new Redlock(clients, fast);
      const lock = await viaNodeRedis.acquire(["nr"], 5_000);
      await assert.rejects(redlock.acquire(["nr"], 5_000), ResourceLockedError);
      await cluster.onAll((c) => c.script("FLUSH"));
      await lock.extend(5_000);
      await lock.release();
      await viaNodeRedis.close();
      // Closing the Redlock leaves the caller's clients open.
      assert.equal(
        clients.every((c) => c.isOpen),
        true,
      );
    } finally {
      await Promise.all(clients.map((c) => c.quit()));
    }
  });

  it("QuorumError names the failing nodes when a majority refuses with errors", async () => {
    // The fencing counter of "r" is a list on nodes 0, 2 and 4: reading it
    // fails the acquire script there with WRONGTYPE, a real node error (as
    // a list under the lock key itself does, below). Nodes 1 and 3
    // grant: 2 of 5, no quorum. With the longest node timeout no answer is
    // cut short by a slow machine: the only node errors are the script's.
    const failing = [0, 2, 4];
    for (const i of failing) await cluster.client(i).rpush("redquorum:fence:r", "x");
    const patient = new Redlock(cluster.urls, {
      retry: { retries: 0 },
      nodeTimeoutMs: limits.nodeTimeoutMsMax,
    });
    try {
      await assert.rejects(patient.acquire(["r"], 5_000), (error: unknown) => {
        assert.ok(error instanceof QuorumError, String(error));
        // The round ends once lost: the granting nodes may not have answered yet.
        assert.ok(error.successCount <= 2, error.message);
        const named = error.nodeErrors.map((e) => e.endpoint).sort();
        const expected = failing.map((i) => cluster.urls[i]!.replace("redis://", "")).sort();
        assert.deepEqual(named, expected, error.message);
        for (const nodeError of error.nodeErrors) assert.match(nodeError.message, /WRONGTYPE/);
        for (const endpoint of expected) assert.ok(error.message.includes(endpoint), error.message);
        return true;
      });
    } finally {
      await patient.close();
    }
    // The failed attempt left no lock key: not on the granting nodes, and
    // not on the failing ones (their script set the key before it failed).
    assert.deepEqual(await cluster.onAll((c) => c.get("r")), [null, null, null, null, null]);
  });

  it("a resource whose key is of another type fails those nodes with WRONGTYPE, not ResourceLockedError", async () => {
    // A list where the lock key would be: no holder will ever release it.
    const failing = [0, 2, 4];
    for (const i of failing) await cluster.client(i).rpush("listed", "x");
    const patient = new Redlock(cluster.urls, {
      retry: { retries: 0 },
      nodeTimeoutMs: limits.nodeTimeoutMsMax,
    });
    try {
      for (const resources of [["listed"], ["listed", "other"]]) {
        await assert.rejects(patient.acquire(resources, 5_000), (error: unknown) => {
          assert.ok(error instanceof QuorumError, String(error));
          const named = error.nodeErrors.map((e) => e.endpoint).sort();
          const expected = failing.map((i) => cluster.urls[i]!.replace("redis://", "")).sort();
          assert.deepEqual(named, expected, error.message);
          for (const nodeError of error.nodeErrors) {
            assert.match(nodeError.message, /WRONGTYPE the key listed holds a list, not a lock/);
          }
          return true;
        });
      }
      // The lists are untouched, and no lock key was left elsewhere.
      for (const i of failing)
        assert.deepEqual(await cluster.client(i).lrange("listed", 0, -1), ["x"]);
      assert.deepEqual(await cluster.onAll((c) => c.get("other")), [null, null, null, null, null]);
      // On a minority it is that node's error only: the majority grants.
      await cluster.client(0).del("listed");
      await cluster.client(2).del("listed");
      const lock = await patient.acquire(["listed"], 5_000);
      await lock.release();
    } finally {
      await patient.close();
      for (const i of failing) await cluster.client(i).del("listed");
    }
  });
});

async function waitFor(check: () => Promise<boolean>, timeoutMs = 2_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error("condition not reached in time");
    await new Promise((r) => setTimeout(r, 5));
  }
}
