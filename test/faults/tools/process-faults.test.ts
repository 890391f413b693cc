import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { LocalCluster } from "../../../src/index.js";
import { sleep } from "../../helpers/sleep.js";
import { FaultLog } from "./fault-log.js";
import { type AofSample, AofSampler, noAofRewriteArgs, sampleAof } from "./power-loss.js";
import { killProcess, NodeFaults, pauseProcessFor } from "./process-faults.js";

/** Bytes in every incr AOF file of a sample. */
const aofBytes = (sample: AofSample) => [...sample.incrBytes.values()].reduce((a, b) => a + b, 0);

describe("process faults", () => {
  let cluster: LocalCluster;
  let faults: NodeFaults;
  let client: Redis;

  before(async () => {
    cluster = await LocalCluster.start({
      nodeCount: 1,
      persistence: "aof-everysec",
      extraArgs: [...noAofRewriteArgs],
    });
    faults = new NodeFaults(cluster, { log: new FaultLog() });
    // Bounded, not timed: the node restarts under it, and it reconnects.
    client = new Redis(cluster.urls[0]!, {
      commandTimeout: 10_000,
      maxRetriesPerRequest: 50,
      retryStrategy: () => 20,
    });
    client.on("error", () => {});
  });
  after(async () => {
    client.disconnect();
    await cluster.stop();
  });

  /** Until the node's AOF holds more than `sample` did (bounded: Redis writes it within 2 s). */
  async function waitForAofGrowth(sample: AofSample): Promise<void> {
    const deadline = performance.now() + 5_000;
    while (aofBytes(sampleAof(cluster, 0)) <= aofBytes(sample)) {
      assert.ok(performance.now() < deadline, "the acknowledged write never reached the AOF file");
      await sleep(5);
    }
  }

  it("kill -9 alone loses no acknowledged write that reached the AOF file, even with everysec (the page cache survives)", async () => {
    const sample = sampleAof(cluster, 0);
    await client.set("before-kill", "1");
    // With everysec, Redis may acknowledge a write before it reaches the
    // file while the previous second's fsync is still running (a loaded
    // machine): once written, kill -9 keeps it; what fsync adds is only
    // against power loss (the test below).
    await waitForAofGrowth(sample);
    await faults.kill(0);
    await faults.restart(0);
    assert.equal(await client.get("before-kill"), "1");
  });

  it("power loss: a write acknowledged after the sample is gone, one before it stays", async () => {
    await client.set("before-sample", "1");
    const sample = sampleAof(cluster, 0);
    await client.set("after-sample", "2");
    // With everysec, Redis may acknowledge a write before it reaches the
    // file while the previous second's fsync is still running (a loaded
    // machine): wait until it is in the file, where kill -9 alone keeps it.
    await waitForAofGrowth(sample);
    const { cutBytes } = await faults.powerLoss(0, sample);
    assert.ok(cutBytes > 0, "the post-sample write was cut from the AOF");
    assert.equal(await client.get("before-sample"), "1");
    assert.equal(await client.get("after-sample"), null);
    assert.deepEqual(
      faults.log.events.filter((e) => e.fault === "power-loss").map((e) => e.phase),
      ["start", "end"],
    );
  });

  it("AofSampler: a power loss cuts back to the AOF as it was a given time ago", async () => {
    const sampler = new AofSampler(cluster, 0, { everyMs: 20 });
    try {
      await client.set("old", "1");
      await sleep(300);
      const writtenAtMs = performance.now();
      await client.set("recent", "1");
      const sample = sampler.before(performance.now() - writtenAtMs + 100);
      assert.ok(sample, "a sample from before the recent write");
      await waitForAofGrowth(sample);
      await faults.powerLoss(0, sample);
      assert.equal(await client.get("old"), "1");
      assert.equal(await client.get("recent"), null);
      assert.equal(sampler.before(60_000), undefined);
    } finally {
      sampler.stop();
    }
  });

  it("a cut inside a command loads too (aof-load-truncated): the torn write is dropped", async () => {
    await client.set("whole", "1");
    const sample = sampleAof(cluster, 0);
    await client.set("torn", "x".repeat(100));
    await waitForAofGrowth(sample);
    await faults.kill(0);
    const [file, bytes] = [...sample.incrBytes][0]!;
    // A sample 30 bytes into the torn SET.
    const torn = { ...sample, incrBytes: new Map([[file, bytes + 30]]) };
    await faults.powerLoss(0, torn);
    assert.equal(await client.get("whole"), "1");
    assert.equal(await client.get("torn"), null);
  });

  it("refuses to cut after an AOF rewrite, saying why", async () => {
    const sample = sampleAof(cluster, 0);
    await client.bgrewriteaof();
    for (let i = 0; i < 200; i++) {
      const info = await client.info("persistence");
      if (/aof_rewrite_in_progress:0/.test(info) && /aof_rewrite_scheduled:0/.test(info)) break;
      await sleep(10);
    }
    await assert.rejects(faults.powerLoss(0, sample), /rewritten since the sample/);
    await faults.restart(0);
  });

  it("pauseFor: the node does not answer while paused, then does", async () => {
    const probe = new Redis(cluster.urls[0]!, { commandTimeout: 200, maxRetriesPerRequest: 0 });
    probe.on("error", () => {});
    try {
      await probe.ping();
      const paused = faults.pauseFor(0, 600);
      await assert.rejects(probe.ping(), /timed out/);
      await paused;
      assert.equal(await client.ping(), "PONG");
    } finally {
      probe.disconnect();
    }
  });

  it("restart with no persistence comes back empty and stays so", async () => {
    await client.set("k", "1");
    await faults.restart(0, { persistence: "none" });
    assert.equal(await client.get("k"), null);
    await faults.restart(0, { persistence: "aof-everysec" });
  });

  it("a client process paused for a while makes no progress, then does; kill ends it", async () => {
    const child = spawn(
      process.execPath,
      ["-e", "setInterval(() => process.stdout.write('.'), 10)"],
      { stdio: ["ignore", "pipe", "ignore"] },
    );
    let ticks = 0;
    child.stdout.on("data", (chunk: Buffer) => {
      ticks += chunk.length;
    });
    while (ticks < 3) await sleep(10);
    const log = new FaultLog();
    const pausing = pauseProcessFor(child, 300, { name: "lock-1", log });
    // Let output already on its way drain, then count what comes during the pause.
    await sleep(50);
    const during = ticks;
    await sleep(200);
    assert.equal(ticks, during, "no output while stopped");
    await pausing;
    const resumed = ticks;
    while (ticks === resumed) await sleep(10);
    await killProcess(child, { name: "lock-1", log });
    assert.equal(child.signalCode, "SIGKILL");
    assert.deepEqual(
      log.events.map((e) => [e.fault, e.phase, e.target]),
      [
        ["pause", "start", "client lock-1"],
        ["pause", "end", "client lock-1"],
        ["kill", "start", "client lock-1"],
      ],
    );
  });
});
