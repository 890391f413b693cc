import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { changeMembers, NextId, Redlock } from "../../src/index.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";

// Not about node timeouts: a loaded machine must not fail these on 50 ms.
const options = { nodeTimeoutMs: 500, retry: { retries: 0 } } as const;

/**
 * The runbook's "The whole cluster lost power" with `appendfsync always`
 * (docs/operations.md), when one member never comes back: the members that
 * restarted are not repaired while it is a member, and replacing it with
 * an empty node brings locks, their fencing tokens and IDs back, each
 * above what was handed out before.
 */
describe("the whole cluster restarts and one member never returns", () => {
  let cluster: TestCluster;
  const urls = (...indexes: number[]) => indexes.map((i) => cluster.urls[i]!);

  before(async () => {
    // Members 0–2; node 3 is the empty spare that replaces node 2.
    cluster = await startCluster({ nodeCount: 4, persistence: "aof-always" });
    await cluster.client(3).flushall();
  });
  after(() => cluster.stop());

  it("fenced locks and IDs stay refused until the lost member is replaced, then resume above what was issued", async () => {
    const before = new Redlock(urls(0, 1, 2), options);
    const idsBefore = new NextId(urls(0, 1, 2), { nodeTimeoutMs: 500 });
    let fenceBefore: bigint;
    let idBefore: bigint;
    try {
      await before.init();
      await idsBefore.init();
      const lock = await before.acquire(["orders"], 5_000);
      fenceBefore = lock.fence!;
      await lock.release();
      idBefore = await idsBefore.next();
    } finally {
      await Promise.all([before.close(), idsBefore.close()]);
    }
    // The power loss: every member stops; 0 and 1 come back with their AOF.
    await cluster.cluster.kill(2);
    await cluster.cluster.restart(0);
    await cluster.cluster.restart(1);

    const old = new Redlock(urls(0, 1, 2), options);
    const oldIds = new NextId(urls(0, 1, 2), { nodeTimeoutMs: 500 });
    try {
      // Restarted members count as repair witnesses only when every other
      // member answers: without node 2, neither is repaired.
      // The ID call takes its rounds for a few seconds, longer than the
      // repair delay: the lock asked again after it is refused the same way.
      for (const when of ["first", "after the repair delay"]) {
        await assert.rejects(old.acquire(["orders"], 5_000), (error: Error) => {
          assert.equal(
            error.message.match(/fencing counters unknown/g)?.length,
            2,
            `${when}: ${error.message}`,
          );
          return true;
        });
        if (when === "first") {
          await assert.rejects(oldIds.next(), (error: Error) => {
            assert.equal(error.message.match(/excluded until repaired/g)?.length, 2, error.message);
            return true;
          });
        }
      }
      // Not for want of a majority: a lock without a fencing token is granted.
      const unfenced = new Redlock(urls(0, 1, 2), { ...options, fencing: false });
      try {
        await (await unfenced.acquire(["orders:unfenced"], 5_000)).release();
      } finally {
        await unfenced.close();
      }
    } finally {
      await Promise.all([old.close(), oldIds.close()]);
    }

    const report = await changeMembers(urls(0, 1, 2), {
      remove: cluster.urls[2]!,
      add: cluster.urls[3]!,
    });
    assert.equal(report.to.epoch, report.from.epoch + 1);

    // The clients get the new list; one lock call and one ID call (retried
    // while the repairs run) bring the nodes back into service.
    const after = new Redlock(urls(0, 1, 3), {
      ...options,
      retry: { retries: 100, delayMs: 100, jitterMs: 0 },
    });
    const idsAfter = new NextId(urls(0, 1, 3), { nodeTimeoutMs: 500 });
    try {
      const lock = await after.acquire(["orders"], 5_000);
      assert.ok(lock.fence! > fenceBefore, `token ${lock.fence} after ${fenceBefore}`);
      await lock.release();
      let id: bigint | undefined;
      for (let attempt = 0; id === undefined && attempt < 100; attempt++) {
        id = await idsAfter.next().catch(async () => {
          await new Promise((resolve) => setTimeout(resolve, 100));
          return undefined;
        });
      }
      assert.ok(id !== undefined && id > idBefore, `ID ${id} after ${idBefore}`);
    } finally {
      await Promise.all([after.close(), idsAfter.close()]);
    }
  });
});
