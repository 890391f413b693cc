import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { Redlock } from "../../src/index.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";

/**
 * Issue 10, item 7: the README advises turning off a caller's ioredis
 * offline queue; a client configured so and still connecting when
 * redquorum first uses it is waited for (within the call's bounds), not
 * refused with "Stream isn't writeable".
 */
describe("a caller's ioredis clients with the offline queue off", () => {
  let cluster: TestCluster;

  before(async () => {
    cluster = await startCluster({ nodeCount: 3 });
  });
  after(() => cluster.stop());

  for (const lazyConnect of [false, true]) {
    it(`init() and the first lock work while the clients are still connecting (lazyConnect: ${lazyConnect})`, async () => {
      const clients = cluster.urls.map(
        (url) =>
          new Redis(url, { enableOfflineQueue: false, lazyConnect, maxRetriesPerRequest: 0 }),
      );
      // Not about node timeouts: "no reply within 50 ms" (the default) on a
      // loaded machine failed the first lock here.
      const redlock = new Redlock(clients, { retry: { retries: 0 }, nodeTimeoutMs: 500 });
      try {
        assert.ok(
          clients.every((c) => c.status !== "ready"),
          "the clients are not ready yet",
        );
        const reports = await redlock.init();
        assert.ok(
          reports.every((r) => r.found !== "unreachable"),
          JSON.stringify(reports),
        );
        const lock = await redlock.acquire([`caller:${lazyConnect}`], 1_000);
        await lock.release();
      } finally {
        await redlock.close();
        for (const client of clients) {
          // redquorum left no listener of its own behind on the caller's client.
          assert.equal(client.listenerCount("ready"), 0);
          client.disconnect();
        }
      }
    });
  }
});
