import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { QuorumError, Redlock, ResourceLockedError } from "../../src/index.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";
import { byScale } from "../helpers/scale.js";
import { wrappedTransports } from "../helpers/wrapped-transport.js";

/**
 * FAULTS.md I15, the pub/sub side: waiters come and go on a hot key while
 * a node never answers SUBSCRIBE (stalled). Each wait used to send a
 * SUBSCRIBE and an UNSUBSCRIBE that piled up in that node's connection
 * queue without bound; now at most one SUBSCRIBE is in flight per node.
 */
describe("pub/sub subscriptions on a stalled node stay bounded", () => {
  let cluster: TestCluster;

  before(async () => {
    cluster = await startCluster({ nodeCount: 3 });
  });
  after(() => cluster.stop());

  it("hundreds of short waits send a handful of SUBSCRIBE/UNSUBSCRIBE, not one pair each", async () => {
    // Real connections for the lock scripts; a pub/sub side that never
    // answers (what a SIGSTOPped node's subscriber connection does), counted.
    let sent = 0;
    const transports = wrappedTransports(cluster.urls, () => ({
      subscribe: () => ({
        add: () => {
          sent++;
          return new Promise<void>(() => {});
        },
        remove: () => {
          sent++;
          return new Promise<void>(() => {});
        },
        close: async () => {},
      }),
    }));
    const holder = new Redlock(cluster.urls);
    const waiter = new Redlock(transports, { retry: { retries: 1, delayMs: 1, jitterMs: 0 } });
    try {
      const lock = await holder.acquire(["hot"], 30_000);
      // 300 at the fast scale, 1,000 at the full one: either is far more
      // than the handful of subscription commands allowed.
      const waits = byScale(300, 1_000);
      for (let i = 0; i < waits; i++) {
        // Fails its first round, waits (watching the key), fails again
        // (a QuorumError when the machine is too loaded for 50 ms answers).
        await assert.rejects(
          waiter.acquire(["hot"], 1_000),
          (error) => error instanceof ResourceLockedError || error instanceof QuorumError,
        );
      }
      assert.equal(waiter.waitingCount, 0);
      assert.ok(
        sent <= 2 * transports.length,
        `${sent} subscription commands sent for ${waits} waits on ${transports.length} stalled nodes`,
      );
      await lock.release();
    } finally {
      await Promise.all([holder.close(), waiter.close()]);
    }
  });
});
