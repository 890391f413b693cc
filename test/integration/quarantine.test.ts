import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { Redis } from "ioredis";
import {
  InvalidArgumentError,
  LocalCluster,
  type Lock,
  NextId,
  QuorumError,
  Redlock,
  RedquorumError,
  ResourceLockedError,
} from "../../src/index.js";
import { initNodeScript } from "../../src/node/node-state.js";
import { verdictOf } from "../../src/node/verdict.js";
import { findOverlaps, type Hold } from "../helpers/checkers.js";
import { inspectionTimeoutMs, startCluster, TestCluster } from "../helpers/cluster.js";
import { sleep } from "../helpers/sleep.js";
import { notAboutTimeouts } from "../helpers/timeouts.js";
import { wrappedTransports } from "../helpers/wrapped-transport.js";

describe("restart quarantine (FAULTS.md L4/L5)", () => {
  let cluster: TestCluster;

  before(async () => {
    cluster = await startCluster({ nodeCount: 5, persistence: "none" });
  });
  after(() => cluster.stop());
  beforeEach(async () => {
    await cluster.restoreAll({ keepData: false });
    await cluster.flushAll();
  });

  /** A acquires "r" so that its key is on nodes 0, 1, 2 only. */
  async function holdOnFirstThree(a: Redlock, ttlMs: number): Promise<{ lock: Lock; hold: Hold }> {
    // First contact while every node answers: A's acquire then goes out to
    // all five at once, and waits in the paused nodes' sockets (a node
    // still being checked would get it only after its check, or never).
    await (await a.acquire(["warm"], ttlMs)).release();
    cluster.cluster.pause(3);
    cluster.cluster.pause(4);
    const lock = await a.acquire(["r"], ttlMs);
    const hold = { client: "A", startMs: performance.now(), endMs: lock.validUntilMs };
    cluster.cluster.resume(3);
    cluster.cluster.resume(4);
    // The paused nodes run the queued acquire once resumed; undo it there.
    // It was in their sockets before they stopped, so it runs as soon as
    // they do: bounded by the inspection client's reconnect and timeout.
    for (const i of [3, 4]) {
      const deadline = performance.now() + inspectionTimeoutMs;
      for (;;) {
        const value = await cluster.client(i).get("r");
        if (value === lock.value) break;
        if (performance.now() > deadline) {
          assert.fail(`node ${i} did not run A's queued acquire once resumed (r = ${value})`);
        }
        await sleep(2);
      }
      await cluster.client(i).del("r");
    }
    const values = await cluster.onAll((c) => c.get("r"));
    assert.deepEqual(
      values.map((v) => v === lock.value),
      [true, true, true, false, false],
    );
    return { lock, hold };
  }

  /** B tries every 50 ms for up to `forMs`; returns its hold, if it got the lock. */
  async function rivalTries(
    b: Redlock,
    forMs: number,
  ): Promise<{ hold?: Hold; errors: unknown[] }> {
    const errors: unknown[] = [];
    const end = performance.now() + forMs;
    while (performance.now() < end) {
      try {
        const lock = await b.acquire(["r"], 1_000);
        const startMs = performance.now();
        await lock.release();
        return { hold: { client: "B", startMs, endMs: performance.now() }, errors };
      } catch (error) {
        errors.push(error);
        await sleep(50);
      }
    }
    return { errors };
  }

  for (const loss of ["restart without persistence", "FLUSHALL"] as const) {
    it(`quarantine on, ${loss} of a node A holds: B cannot get the lock until A's TTL has passed`, async () => {
      // Fencing off here: it isolates the quarantine (a lost fencing counter
      // also keeps a node out, until repaired; the fencing tests cover that).
      const options = {
        ...notAboutTimeouts,
        maxTtlMs: 2_000,
        retry: { retries: 0 },
        fencing: false,
      };
      const a = new Redlock(cluster.urls, options);
      const b = new Redlock(cluster.urls, options);
      try {
        const { hold } = await holdOnFirstThree(a, 1_500);
        if (loss === "FLUSHALL") await cluster.client(2).flushall();
        else await cluster.cluster.restart(2, { keepData: false });
        const rival = await rivalTries(b, 3_000);
        assert.ok(rival.errors.length > 0);
        assert.ok(
          rival.errors.some((e) => e instanceof RedquorumError && /quarantined/.test(e.message)),
          `node 2 must answer quarantined: ${String(rival.errors[0])}`,
        );
        assert.ok(rival.hold, "B gets the lock once A's TTL has passed");
        assert.deepEqual(findOverlaps([hold, rival.hold]), []);
        assert.ok(rival.hold.startMs >= hold.endMs);
      } finally {
        await a.close();
        await b.close();
      }
    });
  }

  it("init() on a cluster in use leaves a node that restarted empty alone: unmarked, out of service, reported", async () => {
    const options = {
      ...notAboutTimeouts,
      maxTtlMs: 5_000,
      retry: { retries: 0 },
      fencing: false,
    };
    const a = new Redlock(cluster.urls, options);
    const b = new Redlock(cluster.urls, options);
    try {
      await holdOnFirstThree(a, 4_000);
      await cluster.cluster.restart(2, { keepData: false });
      const reports = await b.init();
      const endpoint = `127.0.0.1:${cluster.cluster.node(2).port}`;
      const report = reports.find((r) => r.endpoint === endpoint);
      assert.equal(report?.found, "not marked", JSON.stringify(reports));
      assert.equal(report?.action, "left to recover");
      assert.equal(report?.serves, "none yet");
      assert.match(report!.detail, /quarantine/);
      assert.ok(reports.filter((r) => r.found === "in service").length >= 3);
      for (const r of reports) if (r.found === "in service") assert.equal(r.serves, "locks");
      assert.equal(await cluster.client(2).get("redquorum:marker"), null);
      await assert.rejects(b.acquire(["r"], 1_000), RedquorumError);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("negative control: quarantine off, B takes the lock while A still holds it, and the checker flags it", async () => {
    const options = {
      ...notAboutTimeouts,
      quarantine: false,
      retry: { retries: 0 },
      fencing: false,
    };
    const a = new Redlock(cluster.urls, options);
    const b = new Redlock(cluster.urls, options);
    try {
      const { hold } = await holdOnFirstThree(a, 5_000);
      await cluster.cluster.restart(2, { keepData: false });
      const rival = await rivalTries(b, 2_000);
      assert.ok(rival.hold, "without the quarantine B gets {2, 3, 4}");
      assert.equal(findOverlaps([hold, rival.hold]).length, 1);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("status() reports each node's marker and quarantine", async () => {
    const redlock = new Redlock(cluster.urls, {
      ...notAboutTimeouts,
      maxTtlMs: 5_000,
      retry: { retries: 0 },
    });
    try {
      await cluster.client(1).del("redquorum:marker");
      await redlock.acquire(["s"], 1_000).then(
        (l) => l.release(),
        () => {},
      );
      await cluster.quarantineJudged(1);
      const status = await redlock.status();
      assert.equal(status.length, 5);
      for (const node of status) {
        assert.equal(node.reachable, true);
        assert.equal(node.role, "master");
        assert.ok((node.latencyMs ?? -1) >= 0);
        assert.equal(node.appendonly, "no");
      }
      // Node 1's marker was rewritten as "lost:…": not in service until its
      // fencing repair; the others are marked "1".
      assert.equal(status[1]!.marker, false);
      assert.match(status[1]!.markerValue ?? "", /^lost:/);
      for (const i of [0, 2, 3, 4]) {
        assert.equal(status[i]!.marker, true);
        assert.equal(status[i]!.markerValue, "1");
      }
      assert.match(verdictOf(status).locks.reasons.join("\n"), /quarantined for \d+ s more/);
      // Once its quarantine is over, the verdict names the loss.
      const afterQuarantine = status.map((n) => ({ ...n, quarantineRemainingMs: 0 }));
      assert.match(
        verdictOf(afterQuarantine).locks.reasons.join("\n"),
        /marker "lost:[^"]*": it lost or may have lost data/,
      );
      assert.ok(
        status[1]!.quarantineRemainingMs! > 0 && status[1]!.quarantineRemainingMs! <= 5_000,
      );
      assert.equal(status[0]!.quarantineRemainingMs, 0);
      assert.equal(status[1]!.quarantineJudged, true);
      await cluster.cluster.kill(4);
      const afterKill = await redlock.status();
      assert.equal(afterKill[4]!.reachable, false);
      assert.ok(afterKill[4]!.error);
    } finally {
      await redlock.close();
    }
  });
});

describe("Redlock.init()", () => {
  it("on a fresh cluster the first acquire succeeds at once; without it the nodes are quarantined until init({ liftQuarantines })", async () => {
    const cluster = await LocalCluster.start({ nodeCount: 3, persistence: "none", init: false });
    const redlock = new Redlock(cluster.urls, { ...notAboutTimeouts, retry: { retries: 0 } });
    try {
      await assert.rejects(redlock.acquire(["r"], 1_000), (error: unknown) => {
        assert.ok(error instanceof QuorumError, String(error));
        assert.match(error.message, /quarantined/);
        assert.match(error.message, /liftQuarantines: true/);
        return true;
      });
      // Nodes in quarantine may have forgotten a lock still held, as far as
      // init can tell: it lifts nothing unless told they are new.
      const kept = await redlock.init();
      assert.deepEqual(
        kept.map((r) => r.action),
        ["left to recover", "left to recover", "left to recover"],
      );
      for (const report of kept) assert.match(report.detail, /in quarantine.*liftQuarantines/);
      await assert.rejects(redlock.acquire(["r"], 1_000), /quarantined/);
      await assert.rejects(
        redlock.init({ liftQuarantines: 1 as unknown as boolean }),
        (error: unknown) => error instanceof InvalidArgumentError,
      );
      const lifted = await redlock.init({ liftQuarantines: true });
      assert.deepEqual(
        lifted.map((r) => [r.action, r.serves]),
        Array(3).fill(["marked", "locks"]),
      );
      const lock = await redlock.acquire(["r"], 1_000);
      await lock.release();
    } finally {
      await redlock.close();
      await cluster.stop();
    }
  });

  it("nodes up longer than maxTtlMs without a marker need no quarantine; with fencing they ask for init({ liftQuarantines }), which makes them work", async () => {
    const nodes = new TestCluster(
      await LocalCluster.start({ nodeCount: 3, persistence: "none", init: false }),
    );
    const maxTtlMs = 1_000;
    const redlock = new Redlock(nodes.urls, {
      ...notAboutTimeouts,
      maxTtlMs,
      retry: { retries: 0 },
    });
    try {
      // Up longer than any lock could last, never flushed: nothing to forget.
      await new Promise((r) => setTimeout(r, maxTtlMs + 1_100)); // uptime counts whole seconds
      // The first call meets the missing markers: each node is out until its
      // quarantine is judged from the others' records, which ends it.
      await redlock.acquire(["r"], 200).catch(() => {});
      for (let i = 0; i < 3; i++) await nodes.quarantineJudged(i);
      for (let i = 0; i < 3; i++) {
        assert.equal(await nodes.client(i).get("redquorum:quarantine"), null);
      }
      await assert.rejects(redlock.acquire(["r"], 200), (error: unknown) => {
        assert.ok(error instanceof QuorumError, String(error));
        assert.doesNotMatch(error.message, /quarantined/);
        assert.match(error.message, /call redlock\.init\(\{ liftQuarantines: true \}\) once/);
        return true;
      });
      const without = new Redlock(nodes.urls, { ...notAboutTimeouts, maxTtlMs, fencing: false });
      try {
        await (await without.acquire(["r"], 200)).release();
      } finally {
        await without.close();
      }
      // A plain init cannot tell these nodes from nodes that all lost
      // their memory (where fresh counters would repeat tokens): it marks
      // nothing. Told they are new, it marks them.
      const plain = await redlock.init();
      assert.deepEqual(
        plain.map((r) => r.action),
        ["none", "none", "none"],
        JSON.stringify(plain),
      );
      await redlock.init({ liftQuarantines: true });
      const lock = await redlock.acquire(["r"], 200);
      assert.equal(lock.fence, 1n);
      await lock.release();
    } finally {
      await redlock.close();
      await nodes.stop();
    }
  });

  it("an init that checks while another init's marks are on some nodes only waits for them: it reports every node in service, none lost", async () => {
    const cluster = await LocalCluster.start({ nodeCount: 5, persistence: "none", init: false });
    const options = { ...notAboutTimeouts, retry: { retries: 0 } };
    // A's marks reach nodes 2, 3 and 4 150 ms late (a fleet of services
    // each calling init() as it starts, or the drop-in's first call).
    const a = new Redlock(
      wrappedTransports(cluster.urls, (real, i) => ({
        async send(args, timeoutMs) {
          const script = args[1] === initNodeScript.sha1 || args[1] === initNodeScript.source;
          if (i >= 2 && script && args.includes("write")) await sleep(150);
          return real.send(args, timeoutMs);
        },
      })),
      options,
    );
    const b = new Redlock(cluster.urls, options);
    const first = new Redis(cluster.urls[0]!);
    try {
      const marking = a.init();
      while ((await first.get("redquorum:marker")) !== "1") await sleep(5);
      // Before, B found nodes 0 and 1 in service and 2 to 4 unmarked, and
      // reported those as lost ("left to recover"): a majority not in
      // service, which the drop-in reports as a failed init.
      const reports = await b.init();
      assert.deepEqual(
        reports.map((report) => [report.found, report.action]),
        cluster.urls.map(() => ["in service", "none"]),
      );
      await marking;
      const lock = await b.acquire(["after-inits"], 1_000);
      assert.equal(lock.fence, 1n);
      await lock.release();
    } finally {
      first.disconnect();
      await a.close();
      await b.close();
      await cluster.stop();
    }
  });

  it("marks nodes that hold application keys, node-redlock locks and NextId's keys; on a cluster in use it changes nothing", async () => {
    const cluster = await LocalCluster.start({ nodeCount: 3, persistence: "none", init: false });
    const redlock = new Redlock(cluster.urls, { ...notAboutTimeouts, retry: { retries: 0 } });
    const clients = cluster.urls.map((url) => new Redis(url));
    try {
      // Servers already in use by others: an application key, a lock of
      // another Redlock client (plain SET NX PX), NextId's counter.
      for (const client of clients) {
        await client.set("app:user:1", "alice");
        await client.set("other-lock", "their-value", "PX", 60_000);
      }
      const ids = new NextId(cluster.urls, {
        ...notAboutTimeouts,
        key: "orders:id",
        unsafeAllowNonDurableNodes: true,
      });
      await ids.init();
      await ids.next();
      await ids.close();
      const first = await redlock.init();
      assert.deepEqual(
        first.map((r) => [r.found, r.action]),
        cluster.urls.map(() => ["not marked", "marked"]),
      );
      const lock = await redlock.acquire(["orders"], 5_000);
      assert.equal(lock.fence, 1n);
      // Their lock still excludes ours.
      await assert.rejects(redlock.acquire(["other-lock"], 1_000), ResourceLockedError);
      // Again, with our lock held: everything is in service, nothing changes.
      const again = await redlock.init();
      assert.deepEqual(
        again.map((r) => [r.found, r.action]),
        cluster.urls.map(() => ["in service", "none"]),
      );
      await lock.release();
      assert.equal(await clients[0]!.get("app:user:1"), "alice");
    } finally {
      for (const client of clients) client.disconnect();
      await redlock.close();
      await cluster.stop();
    }
  });
});
