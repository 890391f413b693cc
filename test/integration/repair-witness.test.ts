import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { NextId, QuorumError, Redlock } from "../../src/index.js";
import { limits } from "../../src/limits.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";
import { sleep } from "../helpers/sleep.js";

/**
 * A counter repair's witnesses (quorum/counter-repair.ts). Five nodes, two
 * with data faults (a minority): node 0 came back from an older snapshot
 * (restarted, its counter behind), node 2 lost its memory, and node 1 — the
 * only other node of the majority {0, 1, 2} that committed the highest
 * value — does not answer while the repairs run. Nodes 3 and 4 never saw
 * that value. Reading node 0 in node 1's place would repair node 2 to the
 * old value, and the next token or ID would repeat one already handed out;
 * so node 2 stays unrepaired until node 1 answers again, and then nothing
 * at or below the highest value is handed out.
 */
const highest = 11n;
const behind = 1n;
/** Nodes 0, 1 and 2 committed `highest`; 3 and 4 stayed `behind`. */
const committed = [highest, highest, highest, behind, behind];

describe("a restarted node is no repair witness while others are missing", () => {
  let cluster: TestCluster;

  before(async () => {
    cluster = await startCluster({ nodeCount: 5, persistence: "none" });
  });
  after(async () => {
    await cluster.stop();
  });

  /**
   * Calls `take` until it gives a value or `forMs` passed; each failure must
   * be a QuorumError. The values it gave, in order.
   */
  async function takeFor(forMs: number, take: () => Promise<bigint>): Promise<bigint[]> {
    const values: bigint[] = [];
    const deadline = performance.now() + forMs;
    while (performance.now() < deadline) {
      try {
        values.push(await take());
      } catch (error) {
        assert.ok(error instanceof QuorumError, String(error));
      }
      await sleep(50);
    }
    return values;
  }

  it("fencing: node 2 is not repaired from node 0 while node 1 is paused; the next token is above every earlier one", async () => {
    const resource = "witness-fence";
    const counter = `redquorum:fence:${resource}`;
    await cluster.onAll(async (client, i) => {
      await client.set(counter, String(committed[i]));
      await client.set("redquorum:fence-max", String(committed[i]));
    });
    // Node 0: back from an older snapshot, seen as restarted (fence-certify's marker).
    await cluster.client(0).set(counter, String(behind));
    await cluster.client(0).set("redquorum:fence-max", String(behind));
    await cluster.client(0).set("redquorum:marker", "restarted:1.1");
    // Node 2: lost its memory (its marker already rewritten, no quarantine left).
    await cluster.client(2).flushall();
    await cluster.client(2).set("redquorum:marker", "lost:2.2");
    cluster.cluster.pause(1);
    // The shortest repair delay allowed: its wait is not what this is about.
    const repairDelayMs = limits.nodeTimeoutMsMax + 100;
    const redlock = new Redlock(cluster.urls, {
      retry: { retries: 0 },
      nodeTimeoutMs: 50,
      repairDelayMs,
    });
    try {
      const take = async () => {
        const lock = await redlock.acquire([resource], 1_000);
        await lock.release();
        return lock.fence!;
      };
      // Long enough for the repairs of nodes 0 and 2 to run (each waits
      // repairDelayMs after the node is first met) and be retried.
      const whilePaused = await takeFor(2 * repairDelayMs + 1_000, take);
      assert.deepEqual(whilePaused, [], "no token while only nodes 3 and 4 are known witnesses");
      const floor = await cluster.client(2).get("redquorum:fence-floor");
      assert.ok(floor === null || BigInt(floor) >= highest, `node 2's floor ${floor}`);
      cluster.cluster.resume(1);
      const afterResume = await takeFor(repairDelayMs + 2_000, take);
      assert.ok(afterResume.length > 0, "tokens again once node 1 answers");
      for (const fence of afterResume)
        assert.ok(fence > highest, `token ${fence} after ${highest}`);
    } finally {
      if (cluster.cluster.nodes[1]!.state === "paused") cluster.cluster.resume(1);
      await redlock.close();
    }
  });

  it("IDs: node 2 is not repaired from node 0 (suspect) while node 1 is paused; the next ID is above every earlier one", async () => {
    const key = "witness-id";
    await cluster.onAll(async (client, i) => {
      await client.set(key, String(committed[i]));
      await client.set(`${key}:marker`, "1");
    });
    await cluster.client(0).set(key, String(behind));
    await cluster.client(0).set(`${key}:marker`, "suspect");
    await cluster.client(2).del(key, `${key}:marker`);
    cluster.cluster.pause(1);
    const repairDelayMs = limits.nodeTimeoutMsMax + 200;
    const ids = new NextId(cluster.urls, {
      key,
      repairDelayMs,
      retry: { retries: 0 },
      unsafeAllowNonDurableNodes: true,
    });
    try {
      const whilePaused = await takeFor(4 * repairDelayMs + 1_000, () => ids.next());
      assert.deepEqual(whilePaused, [], "no ID while only nodes 3 and 4 are known witnesses");
      const repaired = await cluster.client(2).get(key);
      assert.ok(repaired === null || BigInt(repaired) >= highest, `node 2's counter ${repaired}`);
      cluster.cluster.resume(1);
      const afterResume = await takeFor(repairDelayMs + 2_000, () => ids.next());
      assert.ok(afterResume.length > 0, "IDs again once node 1 answers");
      for (const id of afterResume) assert.ok(id > highest, `ID ${id} after ${highest}`);
    } finally {
      if (cluster.cluster.nodes[1]!.state === "paused") cluster.cluster.resume(1);
      await ids.close();
    }
  });
});

/**
 * The other side of the rule: a restarted node's value counts when every
 * other node answered, so a cluster whose every node restarted at once
 * (each one suspect until repaired) repairs itself once all are back.
 * appendfsync always: nothing was lost, so every token after is above the
 * ones before.
 */
describe("a cluster whose every node restarted at once repairs its counters once all are back", () => {
  let cluster: TestCluster;

  before(async () => {
    cluster = await startCluster({ nodeCount: 3, persistence: "aof-always" });
  });
  after(async () => {
    await cluster.stop();
  });

  it("fencing: every node restarted, tokens go on above every earlier one", async () => {
    const resource = "whole-restart";
    const repairDelayMs = limits.nodeTimeoutMsMax + 100;
    // Not about node timeouts: not on the 50 ms default, which a loaded machine missed.
    const redlock = new Redlock(cluster.urls, {
      retry: { retries: 0 },
      nodeTimeoutMs: 500,
      repairDelayMs,
    });
    try {
      let highest = 0n;
      for (let i = 0; i < 5; i++) {
        const lock = await redlock.acquire([resource], 1_000);
        await lock.release();
        highest = lock.fence!;
      }
      for (let i = 0; i < 3; i++) await cluster.cluster.kill(i);
      for (let i = 0; i < 3; i++) await cluster.cluster.restart(i);
      // Each node restarted: out of fencing until repaired (repairDelayMs
      // after it is met), then raised from the other two, both suspect too.
      const deadline = performance.now() + 3 * repairDelayMs + 5_000;
      let after: bigint | undefined;
      while (after === undefined) {
        try {
          const lock = await redlock.acquire([resource], 1_000);
          await lock.release();
          after = lock.fence!;
        } catch (error) {
          assert.ok(error instanceof QuorumError, String(error));
          assert.ok(performance.now() < deadline, `no token after the restart: ${error}`);
          await sleep(50);
        }
      }
      assert.ok(after > highest, `token ${after} after ${highest}`);
      for (let i = 0; i < 3; i++) {
        assert.match(String(await cluster.client(i).get("redquorum:marker")), /^restarted:/);
      }
    } finally {
      await redlock.close();
    }
  });
});
