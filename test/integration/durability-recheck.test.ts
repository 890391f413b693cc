import assert from "node:assert/strict";
import { beforeEach, describe, it } from "node:test";
import { DurabilityError, NextId, QuorumError } from "../../src/index.js";
import { startProxies } from "../faults/tools/proxy.js";
import { useCluster } from "../helpers/cluster.js";
import { sleep } from "../helpers/sleep.js";
import { notAboutTimeouts } from "../helpers/timeouts.js";

/** The client reconnects within its backoff cap (1 s); a round and a check follow. */
const reconnectMs = 1_000 + 2_000;

/**
 * FAULTS.md I14: durability changed under a running client. NextId checks
 * a node again after every reconnect and at a bounded interval, and takes
 * it out of service, naming node and setting, while it can lose
 * acknowledged writes.
 */
describe("NextId checks durability again (FAULTS.md I14)", () => {
  const cluster = useCluster({ nodeCount: 3, persistence: "aof-always" });
  let keyCounter = 0;
  let key: string;

  beforeEach(async () => {
    await cluster().restoreAll({ keepData: true });
    await cluster().onAll(async (client) => {
      await client.config("SET", "appendonly", "yes");
      await client.config("SET", "appendfsync", "always");
      await client.config("SET", "no-appendfsync-on-rewrite", "no");
    });
    key = `durability:${++keyCounter}`;
    const init = new NextId(cluster().urls, { ...notAboutTimeouts, key });
    await init.init();
    await init.close();
  });

  /**
   * Calls `next()` until it fails with a QuorumError whose message matches
   * `pattern` (returned). Earlier failures (a connection being re-opened)
   * are skipped; an ID means the node was still used, and fails the test.
   */
  async function failureMatching(
    ids: NextId,
    pattern: RegExp,
    forMs: number,
  ): Promise<QuorumError> {
    const deadline = performance.now() + forMs;
    let last: unknown;
    while (performance.now() < deadline) {
      try {
        const id = await ids.next();
        last = `an ID (${id}): the node was still used`;
      } catch (error) {
        if (error instanceof QuorumError && pattern.test(error.message)) return error;
        last = error;
      }
      await sleep(20);
    }
    assert.fail(`no failure matching ${pattern} within ${forMs} ms; last: ${String(last)}`);
  }

  it("no-appendfsync-on-rewrite yes is refused on first contact, naming node and setting", async () => {
    await cluster().client(1).config("SET", "no-appendfsync-on-rewrite", "yes");
    const ids = new NextId(cluster().urls, { key });
    try {
      await assert.rejects(ids.next(), (error: unknown) => {
        assert.ok(error instanceof DurabilityError, String(error));
        assert.equal(error.setting, "no-appendfsync-on-rewrite");
        assert.deepEqual(error.endpoints, [`127.0.0.1:${cluster().cluster.node(1).port}`]);
        return true;
      });
    } finally {
      await ids.close();
    }
  });

  it("appendfsync switched to everysec under a running client: the node is out within the recheck interval, back once fixed", async () => {
    const recheckIntervalMs = 300;
    const ids = new NextId(cluster().urls, {
      ...notAboutTimeouts,
      key,
      recheckIntervalMs,
      retry: { retries: 1 },
    });
    try {
      await ids.next();
      // Without node 1 every ID needs node 0.
      await cluster().cluster.kill(1);
      await ids.next();
      await cluster().client(0).config("SET", "appendfsync", "everysec");
      const error = await failureMatching(ids, /appendfsync/, recheckIntervalMs + reconnectMs);
      const endpoint = `127.0.0.1:${cluster().cluster.node(0).port}`;
      const cause = error.nodeErrors.find((e) => e.endpoint === endpoint);
      assert.ok(cause, error.message);
      assert.match(cause.message, /appendfsync everysec/);
      await cluster().client(0).config("SET", "appendfsync", "always");
      // Back once a check passes again (one per interval while out).
      const deadline = performance.now() + recheckIntervalMs + reconnectMs;
      for (;;) {
        try {
          await ids.next();
          break;
        } catch (retry) {
          assert.ok(performance.now() < deadline, `node 0 not back: ${String(retry)}`);
          await sleep(50);
        }
      }
    } finally {
      await ids.close();
    }
  });

  it("a reconnect makes the client check again (appendonly turned off, connection dropped)", async () => {
    // A long interval: only the reconnect can trigger the check.
    const ids = new NextId(cluster().urls, {
      ...notAboutTimeouts,
      key,
      recheckIntervalMs: 600_000,
      retry: { retries: 1 },
    });
    try {
      await ids.next();
      await cluster().cluster.kill(1);
      await ids.next();
      const node0 = cluster().client(0);
      await node0.config("SET", "appendonly", "no");
      // Drop every connection of other clients to node 0 (not this one).
      const self = await node0.client("ID");
      await node0.client("KILL", "SKIPME", "yes", "ID", String(self)).catch(() => {});
      const list = String(await node0.client("LIST"));
      for (const line of list.split("\n")) {
        const id = /id=(\d+)/.exec(line)?.[1];
        if (id && id !== String(self)) await node0.client("KILL", "ID", id).catch(() => {});
      }
      const error = await failureMatching(ids, /appendonly/, reconnectMs);
      assert.match(
        error.message,
        new RegExp(`127\\.0\\.0\\.1:${cluster().cluster.node(0).port}.*appendonly no`),
      );
    } finally {
      await ids.close();
    }
  });

  it("AOF turned on only at runtime over RDB save points, then kill -9: the node restarts from its older RDB; turned on again at runtime, its counter is not trusted until repaired, and no ID repeats", async () => {
    const node0 = () => cluster().client(0);
    // Node 0 runs as its configuration file says (RDB save points, no AOF),
    // and the operator turns AOF on at runtime: the clients accept it.
    await cluster().cluster.restart(0, {
      keepData: false,
      persistence: "none",
      extraArgs: ["--save", "3600 1"],
    });
    const durable = async () => {
      await node0().config("SET", "appendonly", "yes");
      await node0().config("SET", "appendfsync", "always");
      // The rewrite that turning AOF on starts: done before the node counts.
      const deadline = performance.now() + 10_000;
      for (;;) {
        const info = await node0().info("persistence");
        if (/aof_rewrite_in_progress:0/.test(info) && /aof_enabled:1/.test(info)) break;
        assert.ok(performance.now() < deadline, "node 0's AOF not on within 10 s of CONFIG SET");
        await sleep(20);
      }
    };
    await durable();
    const runtimeKey = `${key}:runtime-aof`;
    const options = { ...notAboutTimeouts, key: runtimeKey, retry: { retries: 1 } };
    const init = new NextId(cluster().urls, options);
    await init.init();
    await init.close();
    // X reaches the nodes through proxies, so that its link to node 2 can
    // be cut while node 2 itself runs on (and keeps what it has).
    const proxies = await startProxies(cluster().cluster);
    const x = new NextId(
      proxies.map((p) => p.url),
      options,
    );
    const y = new NextId(cluster().urls, options);
    try {
      for (let i = 0; i < 3; i++) await x.next();
      // What node 0's file keeps: the counter as it stands now.
      await node0().save();
      const saved = await node0().get(runtimeKey);
      // X's link to node 2 is cut while X draws more on 0 and 1; then its
      // connections there are reset, so what it sent never arrives.
      proxies[2]!.blackhole();
      let last = 0n;
      for (let i = 0; i < 5; i++) last = await x.next();
      proxies[2]!.heal({ reset: true });
      assert.equal(await node0().get(runtimeKey), String(last), "node 0 took X's last round");
      // kill -9: node 0 restarts as configured, from its RDB (no AOF): older.
      await cluster().cluster.kill(0);
      await cluster().cluster.restart(0);
      assert.equal(await node0().get(runtimeKey), saved, "node 0 came back from its older RDB");
      assert.equal(await cluster().client(2).get(runtimeKey), saved, "node 2 missed X's last IDs");
      // The operator turns AOF on at runtime again; node 1, the only node
      // that kept X's last IDs, goes down. Nodes 0 and 2 would make a
      // majority that hands out X's IDs again, were node 0 trusted.
      await durable();
      await cluster().cluster.kill(1);
      await assert.rejects(y.next(), (error: unknown) => {
        assert.ok(error instanceof QuorumError, String(error));
        // Node 0 refused for what it may have lost; node 2, which ran on, votes.
        assert.equal(error.successCount, 1, error.message);
        assert.match(
          error.message,
          new RegExp(
            `127\\.0\\.0\\.1:${cluster().cluster.node(0).port}: restarted \\(a new run_id\\)`,
          ),
        );
        return true;
      });
      // Node 1 back: node 0 is repaired from 1 and 2, and IDs go on above X's.
      await cluster().cluster.restart(1);
      const deadline = performance.now() + 10_000;
      let next: bigint | undefined;
      while (next === undefined) {
        next = await y.next().catch(() => undefined);
        if (next === undefined) {
          assert.ok(performance.now() < deadline, "no ID within 10 s of node 1's restart");
          await sleep(100);
        }
      }
      assert.ok(next > last, `Y's ID ${next} is not above X's last ${last}`);
    } finally {
      await Promise.all([x.close(), y.close()]);
      await Promise.all(proxies.map((p) => p.close()));
      await cluster().restoreAll({ keepData: true });
      await cluster().cluster.restart(0, {
        keepData: false,
        persistence: "aof-always",
        extraArgs: [],
      });
    }
  });
});
