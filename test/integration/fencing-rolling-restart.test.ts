import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type Lock, Redlock } from "../../src/index.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";
import { describeSeed, testSeed } from "../helpers/seed.js";
import { sleep } from "../helpers/sleep.js";

// The restart quarantine lasts maxTtlMs; the fence repair waits
// repairDelayMs after it first meets the lost node, then takes one round.
const maxTtlMs = 1_000;
/** Not about node timeouts: not the 50 ms default, which a loaded machine can exceed. */
const nodeTimeoutMs = 200;
/** The shortest allowed: the repair's wait is not what this is about. */
const repairDelayMs = 1_100;
/** How long one node's quarantine and repair may take, with room for reconnecting. */
const recoveryMs = maxTtlMs + repairDelayMs + 5_000;

/**
 * FAULTS.md L25: a rolling restart without persistence, each quarantine
 * waited out and repaired, then a lock on a resource never locked before,
 * with fencing on. Live after each quarantine and repair; tokens never go
 * back.
 */
describe("fencing through a rolling restart without persistence (FAULTS.md L25)", () => {
  let cluster: TestCluster;
  let redlock: Redlock;

  before(async () => {
    cluster = await startCluster({ nodeCount: 5, persistence: "none" });
    redlock = new Redlock(cluster.urls, {
      maxTtlMs,
      nodeTimeoutMs,
      repairDelayMs,
      retry: { retries: 0 },
    });
  });
  after(async () => {
    await redlock.close();
    await cluster.stop();
  });

  /** Tries to lock `resource` until it works or `forMs` passes; the last error if it never does. */
  async function lockWithin(resource: string, forMs: number): Promise<Lock> {
    const deadline = performance.now() + forMs;
    let last: unknown;
    while (performance.now() < deadline) {
      try {
        return await redlock.acquire([resource], maxTtlMs);
      } catch (error) {
        last = error;
        await sleep(20);
      }
    }
    throw new Error(`no lock on ${resource} within ${forMs} ms: ${String(last)}`);
  }

  /**
   * Waits until node `index` votes again in fenced acquires: it holds the
   * lock key of a grant (a node whose counters are unknown refuses, or
   * undoes its SET NX). Returns its fence floor.
   */
  async function repaired(index: number, forMs: number): Promise<bigint> {
    const deadline = performance.now() + forMs;
    while (performance.now() < deadline) {
      const lock = await lockWithin("existing", forMs);
      await sleep(100); // the node's write may land after the round ended
      const held = (await cluster.client(index).get("existing")) === lock.value;
      await lock.release();
      if (held) return BigInt((await cluster.client(index).get("redquorum:fence-floor")) ?? -1);
    }
    throw new Error(`node ${index} did not vote again within ${forMs} ms`);
  }

  it("every node restarted empty in turn: existing tokens keep rising, new resources can be locked", async () => {
    const seed = testSeed();
    const context = describeSeed(seed);
    const tokens: bigint[] = [];
    const take = async (resource: string) => {
      const lock = await lockWithin(resource, recoveryMs);
      if (resource === "existing") tokens.push(lock.fence!);
      await lock.release();
      return lock.fence!;
    };
    for (let i = 0; i < 3; i++) await take("existing");
    const floors: Array<[bigint, bigint]> = [];
    for (let index = 0; index < cluster.cluster.nodes.length; index++) {
      const before = tokens.at(-1)!;
      await cluster.cluster.restart(index, { keepData: false });
      await take("existing");
      const floor = await repaired(index, recoveryMs);
      // A resource never locked before, after this node's loss and repair.
      const fresh = await take(`new:${seed}:${index}`);
      assert.ok(fresh > 0n);
      floors.push([floor, before]);
    }
    // Each repaired floor covers every token committed before the loss.
    for (const [index, [floor, before]] of floors.entries()) {
      assert.ok(
        floor >= before,
        `node ${index}'s floor ${floor} is below token ${before}; ${context}`,
      );
    }
    for (let i = 1; i < tokens.length; i++) {
      assert.ok(tokens[i]! > tokens[i - 1]!, `tokens went back: ${tokens.join(", ")}; ${context}`);
    }
    // Every node lost its memory once: all of them must count as healthy.
    const markers = await cluster.onAll((client) => client.get("redquorum:marker"));
    assert.ok(
      markers.every((m) => m?.startsWith("lost:")),
      JSON.stringify(markers),
    );
    const lock = await redlock.acquire([`never-locked:${seed}`], 1_000);
    assert.ok(lock.fence !== undefined && lock.fence > 0n);
    await lock.release();
  });

  it("a repaired node in a majority with nodes that never saw the resource: the token stays above its last one", async () => {
    await cluster.flushAll();
    // History: "x" committed token 100 on nodes 0-2; nodes 3 and 4 never
    // saw it (they were down). Written directly, as the scripts keep it.
    for (const i of [0, 1, 2]) {
      await cluster.client(i).set("redquorum:fence:x", "100");
      await cluster.client(i).set("redquorum:fence-max", "100");
    }
    // Node 0 forgets it, serves its quarantine and is repaired from others.
    await cluster.cluster.restart(0, { keepData: false });
    const deadline = performance.now() + recoveryMs;
    while ((await cluster.client(0).get("redquorum:fence-floor")) === null) {
      assert.ok(performance.now() < deadline, "node 0 was not repaired");
      await redlock
        .acquire(["y"], 500)
        .then((lock) => lock.release())
        .catch(() => {});
      await sleep(50);
    }
    // Now only nodes 0, 3, 4 are up: node 0 forgot "x", 3 and 4 never had it.
    await cluster.cluster.kill(1);
    await cluster.cluster.kill(2);
    try {
      const fresh = new Redlock(cluster.urls, {
        maxTtlMs,
        nodeTimeoutMs,
        repairDelayMs,
        retry: { retries: 0 },
      });
      try {
        const lock = await fresh.acquire(["x"], 500);
        assert.ok(lock.fence! > 100n, `token ${lock.fence} is not above the committed 100`);
        await lock.release();
      } finally {
        await fresh.close();
      }
    } finally {
      await cluster.cluster.restart(1, { keepData: false });
      await cluster.cluster.restart(2, { keepData: false });
    }
  });
});
