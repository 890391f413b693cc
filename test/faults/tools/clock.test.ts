import assert from "node:assert/strict";
import { after, afterEach, before, describe, it } from "node:test";
import { Redlock } from "../../../src/index.js";
import { startCluster, type TestCluster } from "../../helpers/cluster.js";
import { sleep } from "../../helpers/sleep.js";
import { NodeClock } from "./clock.js";
import { FaultLog } from "./fault-log.js";

describe("node clock faults (TTL shift)", () => {
  let cluster: TestCluster;
  let clock: NodeClock;
  let log: FaultLog;

  before(async () => {
    cluster = await startCluster({ nodeCount: 3 });
  });
  after(() => cluster.stop());
  afterEach(async () => {
    await clock?.close();
    await cluster.flushAll();
  });

  function clockOf(index: number): NodeClock {
    log = new FaultLog();
    clock = NodeClock.of(cluster.cluster, index, { log });
    return clock;
  }

  it("a forward jump shortens every TTL, expiring those shorter than the jump; keys without TTL stay", async () => {
    const node = cluster.client(0);
    await node.set("long", "1", "PX", 60_000);
    await node.set("short", "1", "PX", 5_000);
    await node.set("forever", "1");
    const result = await clockOf(0).jump(10_000);
    assert.deepEqual(result, { shifted: 1, expired: 1 });
    assert.equal(await node.get("short"), null);
    const left = await node.pttl("long");
    assert.ok(left > 45_000 && left <= 50_000, `60 s − 10 s jump left ${left} ms`);
    assert.equal(await node.pttl("forever"), -1);
    // The marker (no TTL) survives: the node is not taken for one that lost its memory.
    assert.equal(await node.get("redquorum:marker"), "1");
    assert.match(log.events[0]!.detail!, /^\+10000 ms \(1 TTLs shifted, 1 keys expired\)$/);
  });

  it("a backward jump lengthens TTLs", async () => {
    const node = cluster.client(1);
    await node.set("k", "1", "PX", 1_000);
    await clockOf(1).jump(-5_000);
    const left = await node.pttl("k");
    assert.ok(left > 5_000 && left <= 6_000, `1 s + 5 s jump left ${left} ms`);
  });

  it("a jump past the lock's TTL on one node drops the lock there only (FAULTS.md L17)", async () => {
    const redlock = new Redlock(cluster.urls, { retry: { retries: 0 }, nodeTimeoutMs: 1_000 });
    try {
      const lock = await redlock.acquire(["r"], 30_000);
      await clockOf(2).jump(31_000);
      const held = await Promise.all([0, 1, 2].map((i) => cluster.client(i).exists("r")));
      assert.deepEqual(held, [1, 1, 0]);
      await lock.release();
    } finally {
      await redlock.close();
    }
  });

  it("a clock at ×1.5 runs TTLs down half again as fast; setRate(1) stops it", async () => {
    const node = cluster.client(0);
    await node.set("k", "1", "PX", 60_000);
    const startMs = performance.now();
    clockOf(0).setRate(1.5);
    await sleep(300);
    const elapsedMs = performance.now() - startMs;
    const left = await node.pttl("k");
    // Real time alone takes elapsedMs; the fast clock at least half its extra 0.5 × elapsedMs more.
    assert.ok(
      left < 60_000 - elapsedMs * 1.25,
      `after ${elapsedMs.toFixed(0)} ms at ×1.5, ${left} ms left`,
    );
    clock.setRate(1);
    assert.equal(clock.rate, 1);
    assert.deepEqual(
      log.events.map((e) => [e.fault, e.phase, e.detail]),
      [
        ["clock-rate", "start", "×1.5"],
        ["clock-rate", "end", "×1.5"],
      ],
    );
    // No more steps: only real time passes now.
    const fromMs = performance.now();
    const before = await node.pttl("k");
    await sleep(100);
    const later = await node.pttl("k");
    const realMs = performance.now() - fromMs;
    assert.ok(before - later <= realMs + 2, `${before} → ${later} in ${realMs.toFixed(0)} ms`);
  });

  it("rejects bad input, naming it", async () => {
    const c = clockOf(0);
    await assert.rejects(c.jump(1.5), /deltaMs must be a whole number/);
    assert.throws(() => c.setRate(0), /rate must be > 0/);
    assert.throws(() => NodeClock.of(cluster.cluster, 7), /no node 7/);
  });
});
