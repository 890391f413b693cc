import assert from "node:assert/strict";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import {
  LocalCluster,
  type Lock,
  type Persistence,
  QuorumError,
  Redlock,
  ResourceLockedError,
} from "../../src/index.js";
import { defaults } from "../../src/limits.js";
import { acquireScript } from "../../src/lock/acquire-script.js";
import { judgeQuarantineScript } from "../../src/lock/quarantine-scripts.js";
import { startCluster, TestCluster } from "../helpers/cluster.js";
import { sleep } from "../helpers/sleep.js";
import { wrappedTransports } from "../helpers/wrapped-transport.js";

/**
 * The restart quarantine beyond a missing marker (lock/quarantine-scripts.ts,
 * certifyScript; node/node-state.ts, checkQuarantine). A node that
 * restarts from data that may be older than what it acknowledged (an RDB
 * snapshot, AOF with appendfsync everysec) kept its marker, yet may have
 * lost lock keys: it is quarantined at the first check after the restart,
 * unless it keeps every write (appendfsync always). And a client with the
 * quarantine off does not turn it off for the others.
 */

/** ioredis's reconnect backoff cap for redquorum's connections (node/ioredis-transport.ts). */
const reconnectBackoffCapMs = 1_000;
const quarantineKey = "redquorum:quarantine";
/** Longer than every test here: a quarantine of this length outlasts it. */
const maxTtlMs = 60_000;
const resource = "r";

/** The quarantine left on node `index`, in ms (PTTL: negative for none). */
const quarantineLeft = (cluster: TestCluster, index: number) =>
  cluster.client(index).pttl(quarantineKey);

/**
 * A holds `resource` on nodes 0, 1 and 2 only (3 and 4 hold a foreign
 * value meanwhile, which is then removed): a second holder needs node 2.
 */
async function holdOnFirstThree(cluster: TestCluster, redlock: Redlock): Promise<Lock> {
  for (const i of [3, 4]) await cluster.client(i).set(resource, "foreign", "PX", 60_000);
  const lock = await redlock.acquire([resource], 30_000);
  for (const i of [3, 4]) await cluster.client(i).del(resource);
  assert.equal(await cluster.client(2).get(resource), lock.value);
  return lock;
}

/**
 * B tries for `resource` until node 2 is quarantined and then once more
 * (each try must fail); the quarantine left on node 2 afterwards. Bounded
 * by the reconnect backoff: B's next round after its reconnect checks node 2.
 */
async function rivalFailsUntilQuarantined(cluster: TestCluster, rival: Redlock): Promise<number> {
  const deadline = performance.now() + 4 * reconnectBackoffCapMs + 2_000;
  let quarantined = false;
  for (;;) {
    const lock = await rival.acquire([resource], 1_000).catch(refused);
    if (lock) {
      await lock.release();
      assert.fail("B took the lock while A held it: node 2 was not quarantined");
    }
    if (quarantined) break;
    quarantined = (await quarantineLeft(cluster, 2).catch(() => -2)) > 0;
    if (!quarantined && performance.now() > deadline) {
      assert.fail("node 2 was not quarantined after its restart");
    }
    await sleep(50);
  }
  // The quarantine starts unjudged (its PTTL already above 0) and B judges
  // its length in the background: read it once judged.
  await cluster.quarantineJudged(2, 30_000, meetBy(rival));
  return quarantineLeft(cluster, 2);
}

/**
 * What a lock call refused by the quarantine, or by the holder on the
 * nodes still in service, rejects with: the resource held elsewhere
 * (ResourceLockedError), or too few nodes in service (QuorumError: a
 * quarantined node is a failed vote). Any other rejection is a failure of
 * the test, not the refusal it waits for.
 */
function isRefusal(error: unknown): boolean {
  return error instanceof ResourceLockedError || error instanceof QuorumError;
}

/** For `.catch`: a refusal (see isRefusal) gives undefined, any other error is rethrown. */
function refused(error: unknown): undefined {
  if (!isRefusal(error)) throw error;
  return undefined;
}

// Not about node timeouts: not on the 50 ms default, which a loaded machine can exceed.
const options = { maxTtlMs, fencing: false, retry: { retries: 0 }, nodeTimeoutMs: 300 } as const;

/**
 * `client` makes lock calls until one has met the loss of node `index`,
 * which restarted empty or is new (a lock script wrote its "lost:" marker
 * and started the quarantine: a first contact may go on without a slow
 * node, and a reconnect waits for its backoff); then waits for the judgement.
 */
async function meetLoss(cluster: TestCluster, client: Redlock, index: number): Promise<void> {
  const deadline = performance.now() + 4 * reconnectBackoffCapMs + 2_000;
  while ((await cluster.client(index).get("redquorum:marker")) === null) {
    assert.ok(performance.now() < deadline, `node ${index}'s loss never met`);
    await client.acquire(["elsewhere"], 1_000).then(
      (l) => l.release(),
      () => {},
    );
    await sleep(50);
  }
  await cluster.quarantineJudged(index, 30_000, meetBy(client));
}

/** A lock call of `client` that meets every node (its judgements of losses it meets follow). */
const meetBy = (client: Redlock) => () =>
  client.acquire(["elsewhere"], 1_000).then((l) => l.release());

/** Redis's default persistence: RDB save points (one that never fires on its own here), no AOF. */
const rdbSavePoints = ["--save", "3600 1"];
const rdbCluster = (nodeCount: number) =>
  startCluster({ nodeCount, persistence: "none", extraArgs: rdbSavePoints });

/** The server's run_id now. */
async function runIdOf(cluster: TestCluster, index: number): Promise<string | undefined> {
  return /run_id:(\w+)/.exec(await cluster.client(index).info("server"))?.[1];
}

/**
 * Waits (at most `boundMs`) until no node of this new cluster is in
 * quarantine; then a plain init marks nothing (every node serves from a
 * lost: marker, as after a loss of every node's memory, where fresh
 * counters would repeat tokens), and init told the nodes are new marks
 * every node: a fenced lock gets token 1.
 */
async function initMarksOnceQuarantinesEnd(
  cluster: TestCluster,
  redlock: Redlock,
  boundMs: number,
): Promise<void> {
  const deadline = performance.now() + boundMs;
  while ((await cluster.onAll((c) => c.exists(quarantineKey))).some((n) => n === 1)) {
    assert.ok(performance.now() < deadline, "quarantines never ended");
    await sleep(50);
  }
  const plain = await redlock.init();
  assert.deepEqual(
    plain.map((r) => r.action),
    cluster.urls.map(() => "none"),
    JSON.stringify(plain),
  );
  assert.match(plain[0]!.detail, /every node serves locks from a lost: marker/);
  const report = await redlock.init({ liftQuarantines: true });
  assert.deepEqual(
    report.map((r) => r.action),
    cluster.urls.map(() => "marked"),
    JSON.stringify(report),
  );
  const lock = await redlock.acquire(["r"], 200);
  assert.equal(lock.fence, 1n);
  await lock.release();
}

/**
 * Transports to `urls` on which no acquire (a vote) reaches node `index`
 * while `dropping()` says so: its checks and reads still do.
 */
function votesNeverReach(urls: readonly string[], index: number, dropping = () => true) {
  return wrappedTransports(urls, (real, i) => ({
    send(args, timeoutMs) {
      if (dropping() && i === index && args[0] === "EVALSHA" && args[1] === acquireScript.sha1) {
        return Promise.reject(new Error("connection reset (the test's)"));
      }
      return real.send(args, timeoutMs);
    },
  }));
}

/** Connects `clients` and has each check every node (the run_ids are certified). */
async function warm(...clients: Redlock[]): Promise<void> {
  for (const client of clients) await (await client.acquire(["warm"], 1_000)).release();
}

describe("the restart quarantine covers restarts from data that may be older", () => {
  /** Node 2's snapshot, taken while A and B know the cluster, and what the restart from it shows. */
  const snapshots: Array<{
    title: string;
    snapshot: (cluster: TestCluster) => Promise<void>;
    restarted: (cluster: TestCluster) => Promise<void>;
  }> = [
    {
      title:
        "RDB snapshot: node 2 comes back from a snapshot without A's key; B cannot take A's lock",
      snapshot: async (cluster) => {
        await cluster.client(2).save(); // the snapshot a save point would take
      },
      restarted: async (cluster) => {
        assert.equal(await cluster.client(2).get("redquorum:marker"), "1", "marker kept");
      },
    },
    {
      title:
        "a node marked without a recorded run_id (an older version's mark) is quarantined at its restart",
      // The snapshot holds node 2's marker but no run_id (as if taken before
      // any check recorded one); the running server keeps its own.
      snapshot: async (cluster) => {
        const run = await cluster.client(2).get("redquorum:run");
        await cluster.client(2).del("redquorum:run");
        await cluster.client(2).save();
        await cluster.client(2).set("redquorum:run", run!);
      },
      restarted: async (cluster) => {
        assert.equal(await cluster.client(2).get("redquorum:run"), null);
      },
    },
  ];
  for (const { title, snapshot, restarted } of snapshots) {
    it(title, async () => {
      const cluster = await rdbCluster(5);
      const a = new Redlock(cluster.urls, options);
      const b = new Redlock(cluster.urls, options);
      const off = new Redlock(cluster.urls, { ...options, quarantine: false });
      try {
        await warm(a, b, off);
        await snapshot(cluster);
        const lock = await holdOnFirstThree(cluster, a);
        await cluster.cluster.kill(2);
        await cluster.cluster.restart(2);
        await restarted(cluster);
        assert.equal(await cluster.client(2).get(resource), null, "A's key lost");
        // The first client to check node 2 again has the quarantine off: it
        // does not wait it out, but starts it for the others.
        const deadline = performance.now() + 4 * reconnectBackoffCapMs + 2_000;
        while ((await quarantineLeft(cluster, 2).catch(() => -2)) <= 0) {
          await (await off.acquire(["elsewhere"], 1_000)).release();
          assert.ok(
            performance.now() < deadline,
            "the client with the quarantine off started none",
          );
          await sleep(50);
        }
        const left = await rivalFailsUntilQuarantined(cluster, b);
        assert.ok(left > maxTtlMs - 5_000 && left <= maxTtlMs, `quarantine left ${left} ms`);
        assert.ok(lock.remainingMs() > 0, "A still held the lock throughout");
      } finally {
        await a.close();
        await b.close();
        await off.close();
        await cluster.stop();
      }
    });
  }

  it("a restarted node first checked after maxTtlMs of uptime needs no quarantine", async () => {
    const shortTtlMs = 2_000;
    const cluster = await startCluster({ nodeCount: 3, persistence: "aof-everysec" });
    const client = new Redlock(cluster.urls, { ...options, maxTtlMs: shortTtlMs });
    try {
      await warm(client);
      await cluster.cluster.kill(0);
      await cluster.cluster.restart(0);
      // Every lock node 0 granted before its restart has expired by now.
      await sleep(shortTtlMs + 500);
      const deadline = performance.now() + 4 * reconnectBackoffCapMs + 2_000;
      for (;;) {
        const lock = await client.acquire([resource], 1_000);
        await sleep(20); // node 0's answer may land after the majority's
        const held = (await cluster.client(0).get(resource)) === lock.value;
        await lock.release();
        if (held) break;
        assert.ok(performance.now() < deadline, "node 0 not met again after its restart");
      }
      assert.ok((await quarantineLeft(cluster, 0)) < 0, "quarantined after maxTtlMs of uptime");
      assert.equal(
        (await cluster.client(0).get("redquorum:run"))?.split("/")[0],
        await runIdOf(cluster, 0),
      );
    } finally {
      await client.close();
      await cluster.stop();
    }
  });

  it("after a whole cluster restarted from snapshots, init() leaves the quarantine in place", async () => {
    const cluster = await rdbCluster(3);
    const a = new Redlock(cluster.urls, options);
    // A service booting after the restart (it connects on first use): it
    // calls init(), as the quarantine error suggests on new nodes.
    const booting = new Redlock(cluster.urls, options);
    try {
      await warm(a);
      for (let i = 0; i < 3; i++) await cluster.client(i).save();
      const lock = await a.acquire([resource], 30_000);
      for (let i = 0; i < 3; i++) await cluster.cluster.kill(i);
      for (let i = 0; i < 3; i++) await cluster.cluster.restart(i);
      await assert.rejects(booting.acquire([resource], 1_000), isRefusal);
      const report = await booting.init();
      for (const node of report) assert.equal(node.action, "none", JSON.stringify(report));
      // Restarted ("restarted:" markers): their counters are unknown until repaired.
      const quarantined = report.filter((n) => n.found === "in quarantine");
      assert.ok(quarantined.length > 0, JSON.stringify(report));
      for (const node of quarantined) {
        assert.match(
          node.detail,
          /"restarted:[^"]*": it served before; its fencing counters are repaired/,
        );
      }
      await assert.rejects(booting.acquire([resource], 1_000), isRefusal, "took the lock A holds");
      for (let i = 0; i < 3; i++) assert.ok((await quarantineLeft(cluster, i)) > 0);
      assert.ok(lock.remainingMs() > 0, "A still held the lock throughout");
    } finally {
      await a.close();
      await booting.close();
      await cluster.stop();
    }
  });

  it("init() leaves a restart's quarantine on a cluster used without init() (lost: markers)", async () => {
    const shortTtlMs = 4_000;
    // Not startCluster: it marks every node.
    const cluster = new TestCluster(
      await LocalCluster.start({
        nodeCount: 3,
        persistence: "none",
        extraArgs: rdbSavePoints,
        init: false,
      }),
    );
    const used = { ...options, maxTtlMs: shortTtlMs };
    const a = new Redlock(cluster.urls, used);
    const booting = new Redlock(cluster.urls, used); // first used after the restart
    try {
      // Up for maxTtlMs: a node without a marker needs no quarantine, so
      // the cluster serves without init() (its markers become "lost:"), once
      // the first call's quarantines are judged from the other nodes.
      await sleep(shortTtlMs + 1_000);
      await a.acquire(["warm"], 1_000).then(
        (l) => l.release(),
        () => {},
      );
      for (let i = 0; i < 3; i++) await cluster.quarantineJudged(i, 30_000, meetBy(a));
      await warm(a);
      assert.match(String(await cluster.client(0).get("redquorum:marker")), /^lost:/);
      await cluster.client(0).save();
      const lock = await a.acquire([resource], shortTtlMs);
      await cluster.cluster.kill(0);
      await cluster.cluster.restart(0);
      await booting.acquire(["elsewhere"], 1_000).then((l) => l.release()); // checks node 0
      // The client that met the restart judges its length right after (asynchronously).
      await cluster.quarantineJudged(0, 30_000, meetBy(booting));
      assert.equal(await cluster.client(0).get(quarantineKey), "restart");
      const report = await booting.init();
      for (const node of report) assert.notEqual(node.action, "marked", JSON.stringify(report));
      assert.ok((await quarantineLeft(cluster, 0)) > 0, "init() lifted the quarantine");
      const rival = await booting.acquire([resource], 1_000).catch(refused);
      assert.ok(rival === undefined || lock.remainingMs() <= 0, "took the lock A holds");
    } finally {
      await a.close();
      await booting.close();
      await cluster.stop();
    }
  });

  it("init() lifts no quarantine on a cluster whose every node lost its memory once (fencing off: lost: markers serve locks)", async () => {
    const shortTtlMs = 1_000;
    // Not startCluster: it marks every node.
    const cluster = new TestCluster(
      await LocalCluster.start({ nodeCount: 3, persistence: "none", init: false }),
    );
    const first = new Redlock(cluster.urls, { ...options, maxTtlMs: shortTtlMs });
    const a = new Redlock(cluster.urls, options);
    const booting = new Redlock(cluster.urls, options); // a service starting later
    try {
      // Every node serves locks with a "lost:" marker, as after a rolling
      // restart without persistence: up longer than the first client's
      // maxTtlMs, its first call's quarantines are judged to end at once.
      await sleep(shortTtlMs + 1_100); // uptime counts whole seconds
      for (let i = 0; i < 3; i++) await meetLoss(cluster, first, i);
      await warm(a);
      for (let i = 0; i < 3; i++) {
        assert.match(String(await cluster.client(i).get("redquorum:marker")), /^lost:/);
        assert.equal(await cluster.client(i).get(quarantineKey), null);
      }
      // A holds the resource on nodes 1 and 2 only; then node 2 restarts
      // empty and a client meets the loss (its other two nodes grant).
      await cluster.client(0).set(resource, "foreign", "PX", 60_000);
      const lock = await a.acquire([resource], 30_000);
      await cluster.client(0).del(resource);
      await cluster.cluster.restart(2, { keepData: false });
      await meetLoss(cluster, booting, 2);
      assert.ok((await quarantineLeft(cluster, 2)) > maxTtlMs / 2, "judged from A's record");
      // Nothing marked while a quarantine runs: marking nodes 0 and 1 alone
      // would leave node 2 too few known others for a fencing repair.
      const report = await booting.init();
      assert.deepEqual(
        report.map((r) => r.action),
        ["none", "none", "left to recover"],
        JSON.stringify(report),
      );
      assert.ok((await quarantineLeft(cluster, 2)) > 0, "init() lifted the quarantine");
      const rival = await booting.acquire([resource], 1_000).catch(refused);
      assert.ok(rival === undefined, "took the lock A holds");
      assert.ok(lock.remainingMs() > 0, "A still held the lock throughout");
      for (let i = 0; i < 2; i++) {
        assert.match(String(await cluster.client(i).get("redquorum:marker")), /^lost:/);
      }
    } finally {
      await first.close();
      await a.close();
      await booting.close();
      await cluster.stop();
    }
  });

  it("init() lifts no quarantine after a rolling restart faster than maxTtlMs (every node in quarantine)", async () => {
    const cluster = await startCluster({ nodeCount: 3, persistence: "none" });
    const a = new Redlock(cluster.urls, options);
    const booting = new Redlock(cluster.urls, options); // a service starting after the restarts
    try {
      const lock = await a.acquire([resource], 30_000);
      for (let i = 0; i < 3; i++) {
        await cluster.cluster.restart(i, { keepData: false });
        await meetLoss(cluster, booting, i);
        assert.ok((await quarantineLeft(cluster, i)) > 0, `node ${i} in quarantine`);
      }
      // To the nodes this is a new cluster after its first call.
      const report = await booting.init();
      for (const node of report)
        assert.equal(node.action, "left to recover", JSON.stringify(report));
      for (let i = 0; i < 3; i++) assert.ok((await quarantineLeft(cluster, i)) > 0, "lifted");
      const rival = await booting.acquire([resource], 1_000).catch(refused);
      assert.ok(rival === undefined, "took the lock A holds");
      assert.ok(lock.remainingMs() > 0, "A still held the lock throughout");
    } finally {
      await a.close();
      await booting.close();
      await cluster.stop();
    }
  });

  it("init() on a new cluster first called while some nodes were just started waits out their quarantines, then marks every node when told they are new (fencing works)", async () => {
    const shortTtlMs = 1_000;
    const cluster = new TestCluster(
      await LocalCluster.start({ nodeCount: 3, persistence: "none", init: false }),
    );
    // Not about node timeouts: the judgement's reads, made once when a call
    // meets the loss, missed the 50 ms default on a loaded machine and the
    // quarantine stayed unjudged.
    const redlock = new Redlock(cluster.urls, {
      maxTtlMs: shortTtlMs,
      retry: { retries: 0 },
      nodeTimeoutMs: 300,
    });
    try {
      // Node 0 up for longer than any lock; nodes 1 and 2 just started.
      await sleep(shortTtlMs + 1_100); // uptime counts whole seconds
      for (const i of [1, 2]) await cluster.cluster.restart(i, { keepData: false });
      await assert.rejects(redlock.acquire(["r"], 200), isRefusal);
      for (let i = 0; i < 3; i++) await meetLoss(cluster, redlock, i);
      assert.equal(await quarantineLeft(cluster, 0), -2, "node 0 judged out of quarantine");
      const first = await redlock.init();
      assert.deepEqual(
        first.map((r) => r.action),
        ["none", "left to recover", "left to recover"],
        JSON.stringify(first),
      );
      // Bounded by the quarantines judged from a 1 s maxTtlMs.
      await initMarksOnceQuarantinesEnd(cluster, redlock, shortTtlMs + 3_000);
    } finally {
      await redlock.close();
      await cluster.stop();
    }
  });

  it("init() judges the quarantines only a quarantine-off client met (no one else would), then waits them out", async () => {
    const shortTtlMs = 1_000;
    const cluster = new TestCluster(
      await LocalCluster.start({ nodeCount: 3, persistence: "none", init: false }),
    );
    // Not about node timeouts (see the test above).
    const base = { maxTtlMs: shortTtlMs, retry: { retries: 0 }, nodeTimeoutMs: 300 } as const;
    const off = new Redlock(cluster.urls, { ...base, quarantine: false });
    const redlock = new Redlock(cluster.urls, base);
    try {
      // Fencing on: the new nodes' counters are unknown, so the call fails;
      // it starts each node's quarantine and, never refused, judges none.
      const deadline = performance.now() + 4 * reconnectBackoffCapMs + 2_000;
      while ((await cluster.onAll((c) => c.get("redquorum:marker"))).includes(null)) {
        assert.ok(performance.now() < deadline, "the first call never met every node");
        await assert.rejects(off.acquire(["r"], 200), isRefusal);
      }
      for (let i = 0; i < 3; i++) {
        assert.match(String(await cluster.client(i).get(quarantineKey)), /^unjudged:/);
      }
      const first = await redlock.init();
      assert.deepEqual(
        first.map((r) => r.action),
        ["left to recover", "left to recover", "left to recover"],
        JSON.stringify(first),
      );
      for (let i = 0; i < 3; i++) {
        assert.ok((await quarantineLeft(cluster, i)) <= shortTtlMs + 1_000, "judged by init");
      }
      // Bounded by the quarantines judged from a 1 s maxTtlMs.
      await initMarksOnceQuarantinesEnd(cluster, redlock, shortTtlMs + 3_000);
    } finally {
      await off.close();
      await redlock.close();
      await cluster.stop();
    }
  });

  it("a fencing repair that reaches a node restored from an older copy before its check does not hide the restore", async () => {
    const cluster = await startCluster({ nodeCount: 3, persistence: "aof-everysec" });
    const copies = mkdtempSync(join(tmpdir(), "redquorum-copy-"));
    // Not about node timeouts: the 50 ms default failed a grant here with the machine loaded.
    const short = { maxTtlMs: 3_000, retry: { retries: 0 }, nodeTimeoutMs: 300 } as const;
    const unfenced = new Redlock(cluster.urls, { ...short, fencing: false });
    const fenced = new Redlock(cluster.urls, short);
    const rival = new Redlock(cluster.urls, { ...short, fencing: false });
    const node0Grants = async () => {
      const lock = await unfenced.acquire(["probe"], 1_000);
      const held = (await cluster.client(0).get("probe")) === lock.value;
      await lock.release();
      if (!held) throw new Error("node 0 does not grant yet");
    };
    // Bounded by a quarantine judged from a 3 s maxTtlMs and a reconnect.
    const grantsAgain = async (what: string) => {
      const deadline = performance.now() + short.maxTtlMs + 4 * reconnectBackoffCapMs + 3_000;
      for (;;) {
        try {
          return await node0Grants();
        } catch (error) {
          if (performance.now() > deadline) throw new Error(`${what}: ${error}`);
          await sleep(100);
        }
      }
    };
    try {
      await warm(unfenced);
      // Node 0 lost its memory; only a fencing-off client met it, so
      // nothing repaired its counters: it serves locks from "lost:".
      await cluster.client(0).flushall();
      await grantsAgain("node 0 after the flush");
      const copy = join(copies, "node0");
      await cluster.cluster.kill(0);
      cpSync(cluster.cluster.node(0).dataDir, copy, { recursive: true });
      await cluster.cluster.restart(0);
      await grantsAgain("node 0 after the copy");
      // The holder has the resource on nodes 0 and 1 only.
      await cluster.client(2).set(resource, "foreign", "PX", 60_000);
      const lock = await unfenced.acquire([resource], 3_000);
      await cluster.client(2).del(resource);
      // A fenced client meets node 0's unknown counters: a repair is due
      // after repairDelayMs, sent without a check of the node first.
      await (await fenced.acquire(["other"], 1_000)).release();
      // Node 0 comes back from the older copy (without the lock) before it runs.
      await cluster.cluster.kill(0);
      rmSync(cluster.cluster.node(0).dataDir, { recursive: true, force: true });
      cpSync(copy, cluster.cluster.node(0).dataDir, { recursive: true });
      await cluster.cluster.restart(0);
      await sleep(defaults.repairDelayMs + 500);
      const second = await rival.acquire([resource], 1_000).catch(refused);
      assert.ok(
        second === undefined || lock.remainingMs() <= 0,
        "a second client took the lock: the restore was not quarantined",
      );
    } finally {
      await unfenced.close();
      await fenced.close();
      await rival.close();
      await cluster.stop();
      rmSync(copies, { recursive: true, force: true });
    }
  });

  it("a client with the quarantine off uses a quarantined node at once (its documented risk)", async () => {
    const cluster = await startCluster({ nodeCount: 3, persistence: "none" });
    const on = new Redlock(cluster.urls, options);
    const off = new Redlock(cluster.urls, { ...options, quarantine: false });
    try {
      await warm(on, off);
      await cluster.client(2).flushall();
      await (await on.acquire(["elsewhere"], 1_000)).release(); // starts the quarantine
      assert.ok((await quarantineLeft(cluster, 2)) > 0, "node 2 not quarantined");
      const lock = await off.acquire([resource], 5_000);
      await sleep(20); // node 2's answer may land after the majority's
      assert.equal(await cluster.client(2).get(resource), lock.value, "node 2 did not vote");
      await lock.release();
    } finally {
      await on.close();
      await off.close();
      await cluster.stop();
    }
  });

  it("a judgement that finds a newer loss on its node judges that one: a client that closes right after two restarts leaves the node judged", async () => {
    const cluster = await startCluster({ nodeCount: 3, persistence: "none" });
    // A's first judgement of node 2 waits, before its write, until node 2
    // has restarted once more and lost its memory again.
    let heldJudgement = () => {};
    const judging = new Promise<void>((resolve) => {
      heldJudgement = resolve;
    });
    let letGo = () => {};
    const gate = new Promise<void>((resolve) => {
      letGo = resolve;
    });
    let holding = true;
    const transports = wrappedTransports(cluster.urls, (real, i) => ({
      async send(args, timeoutMs) {
        const judge =
          args[1] === judgeQuarantineScript.sha1 || args[1] === judgeQuarantineScript.source;
        if (i === 2 && holding && judge) {
          holding = false;
          heldJudgement();
          await gate;
        }
        return real.send(args, timeoutMs);
      },
    }));
    const a = new Redlock(transports, options);
    // Judges nothing: it only starts the quarantine of the loss it meets.
    const off = new Redlock(cluster.urls, { ...options, quarantine: false });
    try {
      await warm(a, off);
      await cluster.cluster.kill(2);
      await cluster.cluster.restart(2);
      const deadline = performance.now() + 4 * reconnectBackoffCapMs + 2_000;
      let held = false;
      void judging.then(() => {
        held = true;
      });
      while (!held) {
        assert.ok(performance.now() < deadline, "A never judged node 2's loss");
        await a.acquire(["elsewhere"], 1_000).then(
          (l) => l.release(),
          () => {},
        );
        await sleep(50);
      }
      const firstLoss = await cluster.client(2).get("redquorum:marker");
      await cluster.cluster.kill(2);
      await cluster.cluster.restart(2);
      while ((await cluster.client(2).get("redquorum:marker")) === null) {
        assert.ok(performance.now() < deadline + 10_000, "node 2's second loss never met");
        await off.acquire(["elsewhere"], 1_000).then(
          (l) => l.release(),
          () => {},
        );
        await sleep(50);
      }
      assert.notEqual(await cluster.client(2).get("redquorum:marker"), firstLoss);
      assert.match(String(await cluster.client(2).get(quarantineKey)), /^unjudged:/);
      letGo();
      // close() waits for the judgements A scheduled. Before, the held one
      // found its loss not current and ended, and the newer loss stayed
      // unjudged (a quarantine of 2^31 - 1 ms) until another client voted.
      await a.close();
      const value = await cluster.client(2).get(quarantineKey);
      assert.ok(!value?.startsWith("unjudged:"), `node 2 left unjudged after A closed: ${value}`);
      const left = await quarantineLeft(cluster, 2);
      assert.ok(left > 0 && left <= maxTtlMs, `quarantine left ${left} ms`);
    } finally {
      letGo();
      await a.close();
      await off.close();
      await cluster.stop();
    }
  });

  it("a node without a marker is no trusted witness of a judgement: two nodes restarted empty and one paused leave the quarantine unjudged, the held lock safe", async () => {
    // Beyond N - Q faults (two memories lost, a third node paused, and the
    // holder's maxTtlMs recorded only on its majority): the judgement must
    // wait rather than trust a node that lost its records unseen.
    const cluster = await startCluster({ nodeCount: 5, persistence: "none" });
    let dropVotesOn4 = false;
    // No vote of R meets node 4 (reads do): only a read finds its loss.
    const transports = votesNeverReach(cluster.urls, 4, () => dropVotesOn4);
    const rival = new Redlock(transports, { ...options, maxTtlMs: 1_000 });
    const holder = new Redlock(cluster.urls, options);
    try {
      await warm(rival, holder);
      for (const i of [0, 1]) await cluster.client(i).set(resource, "foreign", "PX", 60_000);
      const lock = await holder.acquire([resource], 30_000);
      for (const i of [0, 1]) await cluster.client(i).del(resource, "redquorum:horizon");
      for (const i of [3, 4]) {
        await cluster.cluster.kill(i);
        await cluster.cluster.restart(i);
      }
      cluster.cluster.pause(2);
      dropVotesOn4 = true;
      // Before, node 4's read counted as a trusted witness with no record:
      // node 3's quarantine was judged from the rival's 1 s, and the rival
      // took the lock on nodes 0, 1 and 3 while the holder still held it.
      await neverTakes(rival, 4 * reconnectBackoffCapMs + 3_000);
      assert.ok(lock.remainingMs() > 0, "the holder still holds the lock");
      assert.match(String(await cluster.client(3).get(quarantineKey)), /^unjudged:/);
    } finally {
      cluster.cluster.resume(2);
      await rival.close();
      await holder.close();
      await cluster.stop();
    }
  });

  it("a check that finds a loss waiting for its judgement has it judged, though no vote of the client reaches the node", async () => {
    const cluster = await startCluster({ nodeCount: 3, persistence: "none" });
    // Judges nothing: it only starts the quarantine of the loss it meets.
    const off = new Redlock(cluster.urls, { ...options, quarantine: false });
    // A new client whose votes never reach node 2 (its checks do).
    const transports = votesNeverReach(cluster.urls, 2);
    const a = new Redlock(transports, options);
    try {
      await warm(off);
      await cluster.client(2).flushall();
      await (await off.acquire(["elsewhere"], 1_000)).release();
      assert.match(String(await cluster.client(2).get(quarantineKey)), /^unjudged:/);
      // A's first contact checks node 2; its lock is granted by 0 and 1.
      await (await a.acquire(["elsewhere"], 1_000)).release();
      await a.close();
      // Before, only a vote reported the loss: node 2 stayed unjudged (a
      // quarantine of 2^31 - 1 ms) until a client voted there.
      const value = await cluster.client(2).get(quarantineKey);
      assert.ok(!value?.startsWith("unjudged:"), `node 2 left unjudged: ${value}`);
      assert.ok((await quarantineLeft(cluster, 2)) <= maxTtlMs);
    } finally {
      await a.close();
      await off.close();
      await cluster.stop();
    }
  });

  it("a node checked before it was ever marked, restarted from data that may be older, is quarantined under a marker, so its quarantine is judged and ends", async () => {
    const cluster = new TestCluster(
      await LocalCluster.start({ nodeCount: 3, persistence: "aof-always", init: false }),
    );
    const short = { ...options, maxTtlMs: 1_000 };
    // A's votes never reach node 2: only its check does (which records the
    // node's memory there, as a failed first init's would).
    const transports = votesNeverReach(cluster.urls, 2);
    const a = new Redlock(transports, short);
    const b = new Redlock(cluster.urls, short);
    try {
      await a.acquire(["x"], 500).then(
        (lock) => lock.release(),
        () => {},
      );
      await a.close();
      assert.equal(await cluster.client(2).get("redquorum:marker"), null);
      assert.notEqual(await cluster.client(2).get("redquorum:run"), null);
      // Back from data that may be older (appendfsync everysec now): the
      // check puts it in the restart quarantine. Before, with no marker,
      // no judgement could name the loss: the quarantine lasted 2^31 - 1 ms
      // and init({ liftQuarantines: true }) left it, taking it for in use.
      await cluster.cluster.restart(2, { persistence: "aof-everysec" });
      const deadline = performance.now() + 4 * reconnectBackoffCapMs + 2_000;
      while ((await cluster.client(2).get(quarantineKey)) === null) {
        assert.ok(performance.now() < deadline, "node 2's restart never met");
        await meetBy(b)().catch(() => {});
        await sleep(50);
      }
      await cluster.quarantineJudged(2, 4 * reconnectBackoffCapMs + 5_000, meetBy(b));
      assert.match(String(await cluster.client(2).get("redquorum:marker")), /^lost:/);
      assert.ok((await quarantineLeft(cluster, 2)) <= short.maxTtlMs);
    } finally {
      await a.close();
      await b.close();
      await cluster.stop();
    }
  });

  it("a fencing repair whose read of another node is the first call to meet its memory replaced in place has that loss judged", async () => {
    const cluster = await startCluster({ nodeCount: 3, persistence: "none" });
    const short = { ...options, maxTtlMs: 1_000 };
    // Serves node 0 again after its flush (its counters stay unknown).
    const unfenced = new Redlock(cluster.urls, short);
    // F's votes never reach node 2 (its checks and repair reads do).
    const f = new Redlock(votesNeverReach(cluster.urls, 2), { ...short, fencing: true });
    try {
      await warm(unfenced);
      await cluster.client(0).flushall();
      const deadline = performance.now() + 4 * reconnectBackoffCapMs + short.maxTtlMs + 3_000;
      for (;;) {
        const lock = await unfenced.acquire(["probe"], 1_000).catch(() => undefined);
        const held = lock !== undefined && (await cluster.client(0).get("probe")) === lock.value;
        await lock?.release();
        if (held) break;
        assert.ok(performance.now() < deadline, "node 0 never served again after its flush");
        await sleep(50);
      }
      await unfenced.close();
      // F's first contact checks every node; node 0's unknown counters
      // schedule their repair (its acquire fails: node 2 never votes).
      await f.acquire(["other"], 1_000).then(
        (lock) => lock.release(),
        () => {},
      );
      // Node 2's memory replaced in place by an older copy of itself: the
      // same server, its run key from before a FLUSHALL.
      const node2 = cluster.client(2);
      const keys = (await node2.keys("*")).filter((key) => key !== "redquorum:alive");
      const copies = await Promise.all(
        keys.map(async (key) => [key, await node2.dumpBuffer(key), await node2.pttl(key)] as const),
      );
      await node2.flushall();
      for (const [key, dump, ttl] of copies) await node2.restore(key, Math.max(ttl, 0), dump!);
      assert.equal(await node2.exists(quarantineKey), 0);
      // close() runs the repair of node 0, whose read of node 2 meets the
      // replacement and starts its quarantine. Before, the read reported
      // nothing: node 2 stayed unjudged (2^31 - 1 ms) until a client voted there.
      await f.close();
      const value = await node2.get(quarantineKey);
      assert.ok(value !== null, "nothing met node 2's replaced memory");
      assert.ok(!value.startsWith("unjudged:"), `node 2 left unjudged: ${value}`);
      assert.ok((await quarantineLeft(cluster, 2)) <= short.maxTtlMs);
    } finally {
      await unfenced.close();
      await f.close();
      await cluster.stop();
    }
  });

  it("a client with the quarantine off still starts it for the others (FLUSHALL on node 2)", async () => {
    const cluster = await startCluster({ nodeCount: 5, persistence: "none" });
    const a = new Redlock(cluster.urls, options);
    const b = new Redlock(cluster.urls, options);
    const off = new Redlock(cluster.urls, { ...options, quarantine: false });
    try {
      await warm(a, b, off);
      const lock = await holdOnFirstThree(cluster, a);
      await cluster.client(2).flushall();
      // The client with the quarantine off meets node 2 first.
      await (await off.acquire(["elsewhere"], 1_000)).release();
      assert.match(String(await cluster.client(2).get("redquorum:marker")), /^lost:/);
      const left = await rivalFailsUntilQuarantined(cluster, b);
      assert.ok(left > maxTtlMs - 5_000 && left <= maxTtlMs, `quarantine left ${left} ms`);
      assert.ok(lock.remainingMs() > 0, "A still held the lock throughout");
    } finally {
      await a.close();
      await b.close();
      await off.close();
      await cluster.stop();
    }
  });

  for (const [persistence, quarantined] of [
    ["aof-everysec", true],
    ["aof-always", false],
  ] as Array<[Persistence, boolean]>) {
    it(`AOF ${persistence.slice(4)}: a restart ${quarantined ? "puts the node in" : "keeps the node out of"} the quarantine`, async () => {
      const cluster = await startCluster({ nodeCount: 3, persistence });
      const client = new Redlock(cluster.urls, options);
      try {
        await warm(client);
        await cluster.cluster.kill(0);
        await cluster.cluster.restart(0);
        // Until the client has checked node 0 on a new connection (its
        // first round there after the reconnect), and once more after.
        const deadline = performance.now() + 4 * reconnectBackoffCapMs + 2_000;
        let onNode0 = 0;
        while (onNode0 < 2) {
          // Long enough for the reads below on a loaded machine (1 s ran
          // out before the release there).
          const lock = await client.acquire([`after-${onNode0}`], 10_000);
          await sleep(20); // node 0's answer may land after the majority's
          if ((await cluster.client(0).get(lock.keys[0]!)) === lock.value) {
            onNode0++;
          } else if ((await quarantineLeft(cluster, 0).catch(() => -2)) > 0) {
            onNode0++;
          }
          await lock.release();
          assert.ok(performance.now() < deadline, "node 0 not met again after its restart");
        }
        const left = await quarantineLeft(cluster, 0);
        if (quarantined) assert.ok(left > 0, `no quarantine after the restart (${left})`);
        else assert.ok(left < 0, `quarantined (${left} ms left) though it keeps every write`);
      } finally {
        await client.close();
        await cluster.stop();
      }
    });
  }
});

/**
 * The quarantine lasts the cluster's longest maxTtlMs, not the client's
 * that met the loss (lock/horizon.ts): a lock the node forgot may have
 * been granted with the longer TTL. Clients record their maxTtlMs on the
 * nodes they check; a lost node's quarantine is judged from N - Q + 1
 * other nodes' records, read after the loss (lock/quarantine-judge.ts).
 */

/**
 * Node `index`'s quarantine, once judged, lasts about `ms` from the loss:
 * more than `ms` less the time the test has taken since (`slackMs`).
 */
async function assertJudgedFor(cluster: TestCluster, index: number, ms: number, slackMs = 10_000) {
  await cluster.quarantineJudged(index);
  const left = await quarantineLeft(cluster, index);
  assert.ok(left > ms - slackMs && left <= ms, `quarantine left ${left} ms`);
}

/** `client` tries `resource` every 100 ms for `forMs`; fails the test if it ever gets it. */
async function neverTakes(client: Redlock, forMs: number): Promise<void> {
  const deadline = performance.now() + forMs;
  while (performance.now() < deadline) {
    const lock = await client.acquire([resource], 1_000).catch(refused);
    if (lock) {
      await lock.release();
      assert.fail("took the lock A holds: the quarantine ended early");
    }
    await sleep(100);
  }
}

describe("the quarantine lasts the cluster's longest maxTtlMs", () => {
  const shortTtlMs = 1_000;
  const short = { ...options, maxTtlMs: shortTtlMs };

  it("a client with a shorter maxTtlMs starts the longer quarantine, and warns; a third cannot take the held lock", async () => {
    const cluster = await startCluster({ nodeCount: 5, persistence: "none" });
    const a = new Redlock(cluster.urls, options);
    const warnings: Array<{ code: string; message: string }> = [];
    const b = new Redlock(cluster.urls, { ...short, onWarning: (w) => warnings.push(w) });
    const c = new Redlock(cluster.urls, short);
    try {
      await warm(a);
      const lock = await holdOnFirstThree(cluster, a);
      await cluster.cluster.restart(2, { keepData: false });
      // B meets node 2 first: its first contact checked every node.
      await (await b.acquire(["elsewhere"], 1_000)).release();
      // Past B's own maxTtlMs: C, with the same, still finds node 2 out.
      await sleep(shortTtlMs + 200);
      const rival = await c.acquire([resource], 1_000).catch(refused);
      await rival?.release();
      assert.equal(rival, undefined, "C took the lock A holds");
      const left = await quarantineLeft(cluster, 2);
      assert.ok(left > maxTtlMs - 5_000 && left <= maxTtlMs, `quarantine left ${left} ms`);
      assert.ok(
        warnings.some(
          (w) => w.code === "REDQUORUM_MAX_TTL" && w.message.includes(`${maxTtlMs} ms`),
        ),
        JSON.stringify(warnings),
      );
      for (const i of [0, 1, 3, 4]) {
        const records = await cluster.client(i).zrange("redquorum:horizon", 0, -1);
        assert.deepEqual(records.sort(), [String(shortTtlMs), String(maxTtlMs)].sort());
      }
      assert.ok(lock.remainingMs() > 0, "A still held the lock throughout");
    } finally {
      await a.close();
      await b.close();
      await c.close();
      await cluster.stop();
    }
  });

  it("a client that checked every node before the longer client started judges the loss from the nodes, not from what it knew", async () => {
    const cluster = await startCluster({ nodeCount: 5, persistence: "none" });
    const c = new Redlock(cluster.urls, short);
    const a = new Redlock(cluster.urls, options);
    try {
      await warm(c); // C knows of 1 s only, until its next recheck of each node
      const lock = await holdOnFirstThree(cluster, a);
      await cluster.cluster.restart(2, { keepData: false });
      await neverTakes(c, shortTtlMs + 2_000);
      await assertJudgedFor(cluster, 2, maxTtlMs);
      assert.ok(lock.remainingMs() > 0, "A still held the lock throughout");
    } finally {
      await a.close();
      await c.close();
      await cluster.stop();
    }
  });

  it("a new client whose first contact goes on without the slow nodes that carry the longer record waits for them to judge the loss", async () => {
    const cluster = await startCluster({ nodeCount: 5, persistence: "none" });
    const a = new Redlock(cluster.urls, options);
    const c = new Redlock(cluster.urls, { ...short, onWarning: () => {} });
    try {
      // A's first contact never reaches 3 and 4 (paused past checkTimeoutMs):
      // its record and its lock are on nodes 0, 1 and 2 only.
      for (const i of [3, 4]) await cluster.client(i).call("CLIENT", "PAUSE", "3000");
      const lock = await a.acquire([resource], 30_000);
      await sleep(3_200);
      for (const i of [3, 4]) {
        assert.deepEqual(await cluster.client(i).zrange("redquorum:horizon", 0, -1), []);
      }
      await cluster.cluster.restart(2, { keepData: false });
      // Nodes 0 and 1 answer C's first checks late: C goes on with 2, 3, 4.
      for (const i of [0, 1]) await cluster.client(i).call("CLIENT", "PAUSE", "1500");
      await neverTakes(c, shortTtlMs + 2_500);
      await assertJudgedFor(cluster, 2, maxTtlMs);
      assert.ok(lock.remainingMs() > 0, "A still held the lock throughout");
    } finally {
      await a.close();
      await c.close();
      await cluster.stop();
    }
  });

  it("a flushed node's judged quarantine outlasts a new client's check, which takes its lost run_id for a restart", async () => {
    const cluster = await startCluster({ nodeCount: 5, persistence: "none" });
    const longMs = 3_000;
    const a = new Redlock(cluster.urls, { ...options, maxTtlMs: longMs });
    const b = new Redlock(cluster.urls, short); // first used after the flush
    try {
      // Up longer than A's maxTtlMs: a restart found now would need no quarantine.
      await sleep(longMs + 1_500);
      for (const i of [3, 4]) await cluster.client(i).set(resource, "foreign", "PX", 60_000);
      const lock = await a.acquire([resource], longMs);
      for (const i of [3, 4]) await cluster.client(i).del(resource);
      await cluster.client(2).flushall();
      await a.acquire(["elsewhere"], 1_000).then(
        (l) => l.release(),
        () => {},
      ); // A meets the loss
      await cluster.quarantineJudged(2, 30_000, meetBy(a));
      // B's first check finds node 2 marked ("lost:") without a run_id (the
      // flush took it): a restart, as far as the check can tell.
      await b
        .acquire([resource], 1_000)
        .then((l) => assert.fail(`B took the lock A holds (${l.value})`), refused);
      await cluster.quarantineJudged(2, 30_000, meetBy(b));
      await neverTakes(b, 300); // and once that check's quarantine is judged
      assert.ok(lock.remainingMs() > 0, "A still held the lock when B tried");
      const left = await quarantineLeft(cluster, 2);
      assert.ok(left > 0 && left <= longMs, `quarantine left ${left} ms`);
    } finally {
      await a.close();
      await b.close();
      await cluster.stop();
    }
  });

  it("a one-node cluster judges with the longest maxTtlMs its client heard of, also after the node lost its records", async () => {
    const cluster = await startCluster({ nodeCount: 1, persistence: "none" });
    const warned: string[] = [];
    const c = new Redlock(cluster.urls, {
      ...short,
      recheckIntervalMs: 200,
      onWarning: (w) => warned.push(w.code),
    });
    const a = new Redlock(cluster.urls, options);
    try {
      await warm(c);
      const lock = await a.acquire([resource], 30_000);
      // C's next recheck (run beside its calls) hears of A's maxTtlMs.
      const deadline = performance.now() + 5_000;
      while (!warned.includes("REDQUORUM_MAX_TTL")) {
        await sleep(250);
        await warm(c);
        assert.ok(performance.now() < deadline, "C never heard of A's maxTtlMs");
      }
      await cluster.cluster.restart(0, { keepData: false });
      await neverTakes(c, shortTtlMs + 1_500);
      assert.ok(lock.remainingMs() > 0, "A still held the lock throughout");
      await assertJudgedFor(cluster, 0, maxTtlMs);
    } finally {
      await a.close();
      await c.close();
      await cluster.stop();
    }
  });

  it("a node whose rechecks keep failing stops voting one recheck interval and check timeout after its last passed check", async () => {
    // What a check writes lapses (the maxTtlMs record): a client whose
    // checks fail must not go on holding locks on the votes alone.
    const cluster = await startCluster({ nodeCount: 3, persistence: "none" });
    await cluster.onAll((c) => c.call("ACL", "SETUSER", "app", "on", ">pw", "~*", "&*", "+@all"));
    const urls = cluster.urls.map((url) => url.replace("redis://", "redis://app:pw@"));
    const checks = { recheckIntervalMs: 300, checkTimeoutMs: 200 };
    const a = new Redlock(urls, { ...options, ...checks });
    try {
      const lock = await a.acquire([resource], 30_000);
      // INFO refused from now on: every recheck fails, the scripts still run.
      await cluster.onAll((c) => c.call("ACL", "SETUSER", "app", "-info"));
      const revokedAt = performance.now();
      const boundMs = checks.recheckIntervalMs + checks.checkTimeoutMs;
      let error: unknown;
      while (!error) {
        await lock.extend(30_000).catch((e: unknown) => {
          error = e;
        });
        assert.ok(performance.now() - revokedAt < boundMs + 3_000, "still voting");
        await sleep(50);
      }
      // Refused INFO, by the recheck (NOPERM), or by the vote script's own
      // memory check when its cached identity is over 100 ms old (a loaded
      // machine), which reads INFO too.
      assert.match(String(error), /NOPERM|can't run this command/);
      assert.ok(performance.now() - revokedAt >= checks.recheckIntervalMs - 50);
    } finally {
      await a.close();
      await cluster.onAll((c) => c.call("ACL", "DELUSER", "app")).catch(() => {});
      await cluster.stop();
    }
  });

  it("a restart found by the certify script is quarantined for the longest maxTtlMs recorded on that node", async () => {
    const cluster = await rdbCluster(3);
    const a = new Redlock(cluster.urls, options);
    const c = new Redlock(cluster.urls, short);
    try {
      await warm(a);
      await cluster.client(2).save(); // the snapshot holds A's record
      await a.close();
      // Only node 2 carries A's record now: C hears of it nowhere else.
      for (const i of [0, 1]) await cluster.client(i).del("redquorum:horizon");
      await cluster.cluster.kill(2);
      await cluster.cluster.restart(2);
      await (await c.acquire(["elsewhere"], 1_000)).release();
      await cluster.quarantineJudged(2, 30_000, meetBy(c));
      const left = await quarantineLeft(cluster, 2);
      assert.ok(left > maxTtlMs - 5_000 && left <= maxTtlMs, `quarantine left ${left} ms`);
    } finally {
      await a.close();
      await c.close();
      await cluster.stop();
    }
  });

  it("a client's record lapses after its maxTtlMs and two recheck intervals and check timeouts: a stopped client lengthens no later quarantine", async () => {
    const cluster = await startCluster({ nodeCount: 3, persistence: "none" });
    const checks = { recheckIntervalMs: 300, checkTimeoutMs: 500 };
    const longTtlMs = 2_000;
    const lifetimeMs = longTtlMs + 2 * (checks.recheckIntervalMs + checks.checkTimeoutMs);
    const a = new Redlock(cluster.urls, { ...options, ...checks, maxTtlMs: longTtlMs });
    const warnings: string[] = [];
    const b = new Redlock(cluster.urls, { ...short, onWarning: (w) => warnings.push(w.code) });
    try {
      await warm(a);
      const [score] = await cluster.client(2).zmscore("redquorum:horizon", String(longTtlMs));
      const [nowS, nowUs] = await cluster.client(2).time();
      const leftMs = Number(score) - (Number(nowS) * 1_000 + Math.floor(Number(nowUs) / 1_000));
      assert.ok(leftMs > lifetimeMs - 1_000 && leftMs <= lifetimeMs, `record lives ${leftMs} ms`);
      await a.close();
      await sleep(lifetimeMs + 200);
      await cluster.cluster.restart(2, { keepData: false });
      const deadline = performance.now() + 4 * reconnectBackoffCapMs + 2_000;
      while ((await quarantineLeft(cluster, 2).catch(() => -2)) <= 0) {
        await (await b.acquire(["elsewhere"], 1_000)).release();
        assert.ok(performance.now() < deadline, "B did not meet node 2's loss");
        await sleep(50);
      }
      // The quarantine starts unjudged (its PTTL already above 0) and B
      // judges its length in the background: read it once judged.
      await cluster.quarantineJudged(2, 30_000, meetBy(b));
      const left = await quarantineLeft(cluster, 2);
      assert.ok(left <= shortTtlMs, `quarantine left ${left} ms: A's lapsed record still counted`);
      assert.deepEqual(warnings, []);
    } finally {
      await a.close();
      await b.close();
      await cluster.stop();
    }
  });
});
