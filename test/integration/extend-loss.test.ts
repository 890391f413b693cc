import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { LockExpiredError, Redlock } from "../../src/index.js";
import { useFreshCluster } from "../helpers/cluster.js";
import { sleep } from "../helpers/sleep.js";

/**
 * A failed extension that shows our keys gone from too many of the nodes
 * that held them (lock/lock.ts, loseIfNotHeld): the lock keeps no
 * validity, also when the answers that show it come after the round was
 * decided.
 */
describe("an extension that finds the lock gone from a majority", () => {
  const cluster = useFreshCluster({ nodeCount: 5 });

  it("leaves it no validity when the answers showing it come after the round was decided", async () => {
    /** How long nodes 1 and 2 are kept busy, so that they answer after the others. */
    const busyMs = 200;
    // The node timeout leaves the busy nodes time to answer.
    const holder = new Redlock(cluster().urls, {
      nodeTimeoutMs: busyMs * 4,
      retry: { retries: 0 },
    });
    // Its one attempt must not fail on a slow answer (the 50 ms default) on
    // a loaded machine: it shows the lock free.
    const rival = new Redlock(cluster().urls, { retry: { retries: 0 }, nodeTimeoutMs: 500 });
    try {
      const lock = await holder.acquire(["r"], 10_000);
      await sleep(50); // every node's grant is heard, not only the majority's
      // Nodes 3 and 4 lose their memory (they answer at once, refusing:
      // quarantined), and our keys vanish from 0, 1 and 2 (expired early,
      // deleted). Nodes 1 and 2 are busy: the extension is decided by node
      // 0's answer and the two refusals, before 1 and 2 say the keys are
      // gone there too.
      for (const i of [3, 4]) await cluster().client(i).flushall();
      for (const i of [0, 1, 2]) await cluster().client(i).del("r");
      const busy = [1, 2].map((i) =>
        cluster()
          .client(i)
          .call("DEBUG", "SLEEP", String(busyMs / 1_000))
          .catch(() => {}),
      );
      await sleep(busyMs / 4); // the sleeps have begun
      await assert.rejects(lock.extend(10_000), LockExpiredError);
      assert.equal(lock.remainingMs(), 0, "a lock no majority holds reports validity");
      await Promise.all(busy);
      // It was so: another client takes the lock.
      const taken = await rival.acquire(["r"], 5_000);
      await taken.release();
    } finally {
      await holder.close();
      await rival.close();
    }
  });

  it("fails at once when the answers so far show the lock gone, not once the slowest node answered", async () => {
    const nodeTimeoutMs = 1_000;
    const holder = new Redlock(cluster().urls, { nodeTimeoutMs, retry: { retries: 0 } });
    try {
      const lock = await holder.acquire(["s"], 30_000);
      await sleep(50); // every node's grant is heard
      for (const i of [0, 1, 2]) await cluster().client(i).del("s");
      cluster().cluster.pause(3); // would answer only after its timeout
      // Three of five say "no": the lock is known lost then. Waiting for
      // node 3 would leave it reporting validity while a rival holds it.
      const startedAt = performance.now();
      await assert.rejects(lock.extend(30_000), LockExpiredError);
      const elapsedMs = performance.now() - startedAt;
      assert.equal(lock.remainingMs(), 0);
      assert.ok(
        elapsedMs < nodeTimeoutMs,
        `failed after ${elapsedMs.toFixed(0)} ms: it waited for node 3`,
      );
    } finally {
      if (cluster().cluster.node(3).state === "paused") cluster().cluster.resume(3);
      await holder.close();
    }
  });

  it("keeps the validity while nodes still to answer may hold the keys (a grant that timed out and landed)", async () => {
    const nodeTimeoutMs = 300;
    const holder = new Redlock(cluster().urls, { nodeTimeoutMs, retry: { retries: 0 } });
    const rival = new Redlock(cluster().urls, { retry: { retries: 0 } });
    try {
      await (await holder.acquire(["warm-up"], 1_000)).release();
      // Node 3's grant times out, then lands: it holds our keys, though
      // the lock does not know it.
      cluster().cluster.pause(3);
      const lock = await holder.acquire(["t"], 30_000);
      await sleep(nodeTimeoutMs * 1.5);
      cluster().cluster.resume(3);
      const deadline = performance.now() + 10_000;
      while ((await cluster().client(3).get("t")) !== lock.value) {
        assert.ok(performance.now() < deadline, "node 3's grant never landed");
        await sleep(10);
      }
      // Gone from 0 and 1, node 2 down (it held them), 3 and 4 busy: they
      // answer after the round is decided, and both still hold the keys.
      for (const i of [0, 1]) await cluster().client(i).del("t");
      await cluster().cluster.kill(2);
      const busy = [3, 4].map((i) =>
        cluster()
          .client(i)
          .call("DEBUG", "SLEEP", String(nodeTimeoutMs / 2 / 1_000))
          .catch(() => {}),
      );
      await sleep(nodeTimeoutMs / 8);
      const failure = await lock.extend(30_000).then(
        () => undefined,
        (error: unknown) => error,
      );
      await Promise.all(busy);
      // 2 (down, a holder), 3 and 4 hold them: a majority, so the lock
      // stands, and no rival can take it.
      assert.ok(!(failure instanceof LockExpiredError), `declared lost: ${String(failure)}`);
      assert.ok(lock.remainingMs() > 0, "a lock a majority holds lost its validity");
      await assert.rejects(rival.acquire(["t"], 5_000));
    } finally {
      if (cluster().cluster.node(3).state === "paused") cluster().cluster.resume(3);
      await holder.close();
      await rival.close();
    }
  });
});
