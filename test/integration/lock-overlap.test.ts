import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { LockExpiredError, Redlock } from "../../src/index.js";
import { useFreshCluster } from "../helpers/cluster.js";
import { sleep } from "../helpers/sleep.js";
import { notAboutTimeouts } from "../helpers/timeouts.js";

/**
 * FAULTS.md L24: overlapping operations on one lock. The validity a Lock
 * reports must never exceed what a majority of nodes holds, whatever order
 * the rounds settle in; a released or handed-off Lock reports 0.
 */
describe("overlapping operations on one lock (FAULTS.md L24)", () => {
  const cluster = useFreshCluster({ nodeCount: 5 });

  /** PTTL of `key` on every node, in node order (-2: no key). */
  const pttls = (key: string) => cluster().onAll((client) => client.pttl(key));

  it("two overlapping extends (longer, then shorter) never report more than the keys hold", async () => {
    // A generous node timeout: the nodes paused below must still count when
    // they answer, so that the longer extension settles last.
    const redlock = new Redlock(cluster().urls, notAboutTimeouts);
    try {
      const lock = await redlock.acquire(["overlap"], 10_000);
      // Node 2 lost its script cache: the first extend's EVALSHA fails there
      // and is not resent (the second was sent after it); the second is.
      await cluster().client(2).script("FLUSH");
      cluster().cluster.pause(3);
      cluster().cluster.pause(4);
      const long = lock.extend(30_000);
      const short = lock.extend(1_000);
      const settled: string[] = [];
      long.then(
        () => settled.push("long"),
        () => settled.push("long failed"),
      );
      short.then(
        () => settled.push("short"),
        () => settled.push("short failed"),
      );
      // Before the fix the short extension won on nodes 0-2 here, long
      // before nodes 3 and 4 answered the long one.
      await Promise.race([short.catch(() => {}), sleep(300)]);
      cluster().cluster.resume(3);
      cluster().cluster.resume(4);
      await Promise.allSettled([long, short]);
      await sleep(20); // the last node's answer lands
      const held = (await pttls("overlap")).filter((ttl) => ttl > 0).sort((a, b) => b - a);
      // What a majority holds: the third-longest TTL among the nodes.
      const majorityHolds = held[redlock.quorum - 1] ?? 0;
      assert.ok(
        lock.remainingMs() <= majorityHolds,
        `the lock reports ${Math.round(lock.remainingMs())} ms but a majority of keys expire within ` +
          `${majorityHolds} ms (PTTLs ${JSON.stringify(held)}; settled: ${settled.join(", ")})`,
      );
      assert.ok(lock.remainingMs() <= 1_000, "the extension sent last decides the validity");
      await lock.release();
    } finally {
      await redlock.close();
    }
  });

  it("extensions of one lock run one after another, in the order called", async () => {
    // About order, not node timeouts: the 50 ms default failed an extend on
    // every node while the test process stalled beside other test files.
    const redlock = new Redlock(cluster().urls, notAboutTimeouts);
    try {
      const lock = await redlock.acquire(["serial"], 10_000);
      const order: number[] = [];
      await Promise.all(
        [20_000, 5_000, 15_000, 2_000].map((ttl, i) => lock.extend(ttl).then(() => order.push(i))),
      );
      assert.deepEqual(order, [0, 1, 2, 3]);
      assert.ok(lock.remainingMs() <= 2_000);
      for (const ttl of await pttls("serial")) assert.ok(ttl > 0 && ttl <= 2_000, `PTTL ${ttl}`);
      await lock.release();
    } finally {
      await redlock.close();
    }
  });

  it("a release while an extension is in flight: 0 validity, the extension rejects, no key left", async () => {
    const redlock = new Redlock(cluster().urls, notAboutTimeouts);
    try {
      const lock = await redlock.acquire(["racing"], 10_000);
      const extending = lock.extend(30_000);
      const releasing = lock.release();
      assert.equal(lock.remainingMs(), 0);
      await assert.rejects(extending, LockExpiredError);
      await releasing;
      assert.equal(lock.remainingMs(), 0);
      assert.equal(lock.validUntilMs, Number.NEGATIVE_INFINITY);
      await cluster().waitForNoKeys();
      await assert.rejects(lock.extend(1_000), LockExpiredError);
    } finally {
      await redlock.close();
    }
  });

  it("after release() and after a handoff, the old Lock reports no validity", async () => {
    const redlock = new Redlock(cluster().urls, { retry: { retries: 100, delayMs: 20 } });
    try {
      const first = await redlock.acquire(["handoff"], 10_000);
      // A waiter of the same instance: the release hands the lock to it.
      const waiting = redlock.acquire(["handoff"], 10_000);
      while (redlock.waitingCount === 0) await sleep(1);
      await first.release();
      const second = await waiting;
      assert.equal(first.remainingMs(), 0, "the handed-off lock reports no validity");
      assert.ok(second.remainingMs() > 0);
      const values = await cluster().onAll((client) => client.get("handoff"));
      assert.ok(values.filter((v) => v === second.value).length >= redlock.quorum);
      await second.release();
      assert.equal(second.remainingMs(), 0);
    } finally {
      await redlock.close();
    }
  });
});
