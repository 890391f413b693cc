import assert from "node:assert/strict";
import { beforeEach, describe, it } from "node:test";
import { DurabilityError, NextId, QuorumError } from "../../src/index.js";
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
});
