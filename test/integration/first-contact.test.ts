import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { NextId, Redlock } from "../../src/index.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";
import { notAboutTimeouts } from "../helpers/timeouts.js";

/** Far longer than any round: if first contact waited for the stalled node's check, it would show. */
const checkTimeoutMs = 60_000;

/** Resolves to "stuck" after `ms` (the timer is cleared either way). */
function orStuck<T>(promise: Promise<T>, ms: number): Promise<T | "stuck"> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    promise,
    new Promise<"stuck">((resolve) => {
      timer = setTimeout(() => resolve("stuck"), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * Issue 10, item 3: a stalled node costs one node timeout, first contact
 * included; the first call does not wait out the stalled node's check.
 */
describe("first contact with a stalled node", () => {
  let cluster: TestCluster;

  before(async () => {
    cluster = await startCluster({ nodeCount: 5 });
  });
  after(async () => {
    if (cluster.cluster.node(4).state === "paused") cluster.cluster.resume(4);
    await cluster.stop();
  });

  it("the first acquire and the first ID return once a majority answered", async () => {
    cluster.cluster.pause(4);
    const redlock = new Redlock(cluster.urls, {
      ...notAboutTimeouts,
      checkTimeoutMs,
      retry: { retries: 0 },
    });
    const ids = new NextId(cluster.urls, {
      key: "first-contact",
      checkTimeoutMs,
      unsafeAllowNonDurableNodes: true,
    });
    try {
      const lock = await orStuck(redlock.acquire(["first"], 5_000), checkTimeoutMs / 2);
      assert.notEqual(lock, "stuck", "the first acquire waited for the stalled node's check");
      if (lock !== "stuck") {
        assert.ok(lock.grantedNodeCount >= redlock.quorum);
        await lock.release();
      }
      // NextId: the counter needs init on every node, so write it directly on
      // the four that answer (what init did before node 4 stalled).
      for (const i of [0, 1, 2, 3]) {
        await cluster.client(i).set("first-contact", "0");
        await cluster.client(i).set("first-contact:marker", "1");
      }
      const id = await orStuck(ids.next(), checkTimeoutMs / 2);
      assert.notEqual(id, "stuck", "the first ID waited for the stalled node's check");
    } finally {
      cluster.cluster.resume(4);
      await Promise.all([redlock.close(), ids.close()]);
    }
  });
});
