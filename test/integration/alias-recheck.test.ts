import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { QuorumError, Redlock } from "../../src/index.js";
import { useCluster } from "../helpers/cluster.js";
import { sleep } from "../helpers/sleep.js";
import { TcpProxy } from "../helpers/tcp-proxy.js";
import { notAboutTimeouts } from "../helpers/timeouts.js";

/**
 * FAULTS.md L23, after first contact: an address that was its own server
 * when first checked comes back, after a reconnect, as another node's
 * server. Counting it twice would fake a majority; the check made after
 * every reconnect takes it out instead.
 */
describe("a node that comes back as another node's server (guard rails after a reconnect)", () => {
  const cluster = useCluster({ nodeCount: 3 });
  let proxy: TcpProxy;

  before(async () => {
    proxy = await TcpProxy.start(cluster().cluster.node(2).port);
  });
  after(() => proxy?.close());

  it("is taken out of service with a reason naming both addresses, never counted as a second node", async () => {
    const urls = [cluster().urls[0]!, cluster().urls[1]!, proxy.url];
    const redlock = new Redlock(urls, { ...notAboutTimeouts, retry: { retries: 0 } });
    try {
      // Every node passes its first check (and votes) before the proxy moves:
      // a first contact goes on once a majority passed, and a check of the
      // proxy still pending when it moves would be first contact's, which
      // refuses the whole instance instead (a loaded machine showed it).
      const deadlineFirst = performance.now() + 10_000;
      for (;;) {
        const lock = await redlock.acquire(["alias"], 5_000);
        await sleep(20); // the proxied node's answer may land after the majority's
        const voted = (await cluster().client(2).get("alias")) === lock.value;
        await lock.release();
        if (voted) break;
        assert.ok(performance.now() < deadlineFirst, "the proxied node never voted");
      }
      // The proxy's address now leads to node 0; node 1 goes down. Only
      // node 0 is left, reachable under two names.
      proxy.retarget(cluster().cluster.node(0).port);
      await cluster().cluster.kill(1);
      // The client reconnects within its backoff (at most 1 s); then the check runs.
      const deadline = performance.now() + 1_000 + 3_000;
      let last: unknown;
      while (performance.now() < deadline) {
        try {
          const lock = await redlock.acquire(["alias"], 5_000);
          assert.fail(`granted by ${lock.grantedNodeCount} votes from one server`);
        } catch (error) {
          if (error instanceof assert.AssertionError) throw error;
          assert.ok(error instanceof QuorumError, String(error));
          last = error;
          if (/same Redis server/.test(error.message)) break;
        }
        await sleep(20);
      }
      assert.match(String(last), /same Redis server/);
      // Named: both addresses, so the operator can see which two they are.
      assert.match(String(last), new RegExp(`127\\.0\\.0\\.1:${proxy.port}`));
    } finally {
      await redlock.close();
    }
  });
});
