import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { after, before, describe, it } from "node:test";
import { fencedSet, Redlock } from "../../src/index.js";
import { findOverlaps, type Hold } from "../helpers/checkers.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";
import { describeSeed, prng, testSeed } from "../helpers/seed.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Grant extends Hold {
  readonly fence: bigint;
}

/** Tokens must strictly increase in hold order (holds never overlap). */
function fenceOrderViolations(grants: readonly Grant[]): string[] {
  const sorted = [...grants].sort((a, b) => a.startMs - b.startMs);
  const violations: string[] = [];
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i]!.fence <= sorted[i - 1]!.fence) {
      violations.push(
        `${sorted[i - 1]!.client} had ${sorted[i - 1]!.fence}, then ${sorted[i]!.client} got ${sorted[i]!.fence}`,
      );
    }
  }
  return violations;
}

/** `clients` Redlocks contend for one resource until `stop()`; every grant is recorded. */
function contend(urls: string[], clients: number, options: object) {
  const grants: Grant[] = [];
  let running = true;
  const redlocks = Array.from({ length: clients }, () => new Redlock(urls, options));
  const done = Promise.all(
    redlocks.map(async (redlock, c) => {
      while (running) {
        try {
          const lock = await redlock.acquire(["fenced"], 2_000);
          const startMs = performance.now();
          await sleep(1);
          grants.push({ client: `c${c}`, startMs, endMs: performance.now(), fence: lock.fence! });
          await lock.release().catch(() => {});
        } catch {
          await sleep(5);
        }
      }
    }),
  );
  return {
    grants,
    async stop() {
      running = false;
      await done;
      await Promise.all(redlocks.map((r) => r.close()));
    },
  };
}

describe("fencing tokens: strictly increasing in grant order", () => {
  it("16 clients, thousands of grants, minority nodes kill -9'd and restarted (AOF always)", async () => {
    const cluster = await startCluster({ nodeCount: 5, persistence: "aof-always" });
    const seed = testSeed();
    const random = prng(seed);
    const run = contend(cluster.urls, 16, { retry: { retries: 10_000, delayMs: 3, jitterMs: 3 } });
    try {
      for (let step = 0; step < 8; step++) {
        const victim = Math.floor(random() * 5);
        await cluster.cluster.kill(victim);
        await sleep(300);
        await cluster.cluster.restart(victim);
        await sleep(300);
      }
      while (run.grants.length < 2_000) await sleep(50);
    } finally {
      await run.stop();
      await cluster.stop();
    }
    const context = describeSeed(seed);
    assert.ok(run.grants.length >= 2_000, context);
    assert.deepEqual(findOverlaps(run.grants), [], context);
    assert.deepEqual(fenceOrderViolations(run.grants), [], context);
  });

  it("nodes restarting empty one at a time (quarantine on): still strictly increasing", async () => {
    const cluster = await startCluster({ nodeCount: 5, persistence: "none" });
    const run = contend(cluster.urls, 16, {
      maxTtlMs: 2_000,
      retry: { retries: 10_000, delayMs: 3, jitterMs: 3 },
    });
    try {
      for (const victim of [0, 3]) {
        await sleep(300);
        await cluster.cluster.restart(victim, { keepData: false });
        // Quarantine (maxTtlMs) plus the counter repair, then the next one.
        const deadline = performance.now() + 10_000;
        while (performance.now() < deadline) {
          await sleep(250);
          const fence = await cluster
            .client(victim)
            .get("redquorum:fence:fenced")
            .catch(() => null);
          if (fence !== null) break;
        }
        assert.notEqual(
          await cluster.client(victim).get("redquorum:fence:fenced"),
          null,
          "counter repaired",
        );
      }
      await sleep(300);
    } finally {
      await run.stop();
      await cluster.stop();
    }
    assert.ok(run.grants.length > 50, `only ${run.grants.length} grants`);
    assert.deepEqual(findOverlaps(run.grants), []);
    assert.deepEqual(fenceOrderViolations(run.grants), []);
  });
});

describe("the GC pause (FAULTS.md L15 / I12): a paused client is fenced off", () => {
  let cluster: TestCluster;

  before(async () => {
    cluster = await startCluster({ nodeCount: 5, persistence: "none" });
  });
  after(() => cluster.stop());

  /**
   * Client A in a child process acquires with a 300 ms TTL and is SIGSTOPped
   * past it; B acquires and writes; A is resumed and writes with its old
   * token. Returns the stored value afterwards.
   */
  async function pausedWriter(fenced: boolean): Promise<{ value: string | null; aResult: string }> {
    const store = cluster.client(0);
    await store.del("balance", "balance:fence");
    const script = `
      import { Redis } from "ioredis";
      import { Redlock, fencedSet } from "./src/index.ts";
      const urls = ${JSON.stringify(cluster.urls)};
      const redlock = new Redlock(urls, { retry: { retries: 0 } });
      const store = new Redis(urls[0]);
      const lock = await redlock.acquire(["account"], 300);
      console.log("acquired " + lock.fence);
      process.stdin.once("data", async () => {
        const result = ${fenced}
          ? (await fencedSet(store, "balance", "written by A", lock.fence)).written ? "written" : "rejected"
          : (await store.set("balance", "written by A"), "written");
        console.log("A " + result + " remaining=" + lock.remainingMs());
        store.disconnect();
        await redlock.close();
        process.stdin.destroy();
      });
    `;
    const child = spawn(
      process.execPath,
      ["--import", "tsx", "--input-type=module", "-e", script],
      {
        stdio: ["pipe", "pipe", "inherit"],
      },
    );
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
    });
    while (!out.includes("acquired")) await sleep(10);
    child.kill("SIGSTOP");
    await sleep(500); // past A's 300 ms TTL
    const b = new Redlock(cluster.urls, { retry: { retries: 20, delayMs: 50, jitterMs: 10 } });
    try {
      const lock = await b.acquire(["account"], 5_000);
      assert.ok(lock.fence! > BigInt(/acquired (\d+)/.exec(out)![1]!), "B's token is higher");
      if (fenced)
        assert.equal(
          (await fencedSet(store, "balance", "written by B", lock.fence!)).written,
          true,
        );
      else await store.set("balance", "written by B");
      child.kill("SIGCONT");
      child.stdin.write("go\n");
      await once(child, "exit");
      await lock.release();
    } finally {
      await b.close();
    }
    return { value: await store.get("balance"), aResult: out };
  }

  it("with the fenced write helper, A's late write is rejected and B's value stays", async () => {
    const { value, aResult } = await pausedWriter(true);
    assert.match(aResult, /A rejected remaining=0/);
    assert.equal(value, "written by B");
  });

  it("fencedSet accepts an equal token, refuses a lower one, and refuses bad input", async () => {
    const store = cluster.client(1);
    await store.del("k", "k:fence");
    assert.deepEqual(await fencedSet(store, "k", "a", 5n), { written: true });
    assert.deepEqual(await fencedSet(store, "k", "b", 5n), { written: true });
    assert.deepEqual(await fencedSet(store, "k", "c", 4n), { written: false, seenToken: 5n });
    assert.equal(await store.get("k"), "b");
    await assert.rejects(fencedSet(cluster.urls[1]!, "k", "d", 6n), {
      code: "ERR_INVALID_ARGUMENT",
    });
    await assert.rejects(fencedSet(store, "k", "d", 6 as never), { code: "ERR_INVALID_ARGUMENT" });
  });

  it("negative control: without the helper, A's late write overwrites B's (the lost update)", async () => {
    const { value, aResult } = await pausedWriter(false);
    assert.match(aResult, /A written remaining=0/);
    assert.equal(value, "written by A");
  });
});

describe("a node whose fencing counter is unknown", () => {
  let cluster: TestCluster;

  before(async () => {
    cluster = await startCluster({ nodeCount: 5, persistence: "none" });
  });
  after(() => cluster.stop());

  it("does not vote and keeps no lock key; the others grant with a token", async () => {
    // Node 0 lost its memory earlier and sat out its quarantine: its marker
    // names the loss, and its counter for "u" is gone (unknown, not 0).
    await cluster.client(0).set("redquorum:marker", "lost:1.0");
    const redlock = new Redlock(cluster.urls);
    try {
      const lock = await redlock.acquire(["u"], 10_000);
      assert.equal(lock.grantedNodeCount >= 3, true);
      assert.ok(lock.fence! > 0n);
      // The round ended at a majority; the fourth grant lands just after.
      let values = await cluster.onAll((c) => c.get("u"));
      for (let i = 0; i < 100 && values.filter((v) => v === lock.value).length < 4; i++) {
        await new Promise((r) => setTimeout(r, 10));
        values = await cluster.onAll((c) => c.get("u"));
      }
      assert.equal(values[0], null, "the refusing node holds no key of the lock");
      assert.equal(values.filter((v) => v === lock.value).length, 4);
      assert.equal(await cluster.client(0).get("redquorum:fence:u"), null);
      await lock.release();
    } finally {
      await redlock.close();
    }
  });
});
