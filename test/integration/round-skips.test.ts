import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { NodeTimeoutError } from "../../src/index.js";
import { IoredisTransport } from "../../src/node/ioredis-transport.js";
import { RedisNode } from "../../src/node/redis-node.js";
import { NodeGroup } from "../../src/quorum/node-group.js";
import { useCluster } from "../helpers/cluster.js";
import { TcpProxy } from "../helpers/tcp-proxy.js";

/**
 * A round calls a node only once it may vote: one not checked yet waits
 * for its check. A node the round does not call (a release that knows the
 * node holds nothing of ours, a repair of another node) must not make the
 * round wait for that check, which on a node that does not answer ends
 * only with the round's timeout.
 */
describe("a round does not wait for the check of a node it skips", () => {
  const cluster = useCluster({ nodeCount: 3 });
  let proxy: TcpProxy;

  before(async () => {
    proxy = await TcpProxy.start(cluster().cluster.node(2).port);
    // Node 2 accepts connections and answers nothing: its check hangs.
    proxy.hold = true;
  });
  after(() => proxy?.close());

  it("answers a skipped node at once, while a called one waits for its check", async () => {
    const urls = [cluster().urls[0]!, cluster().urls[1]!, proxy.url];
    const nodes = urls.map((url, i) => new RedisNode(IoredisTransport.fromUrl(url, `node ${i}`)));
    // The check of node 2 outlasts every round below by far.
    const group = new NodeGroup(nodes, {
      checkTimeoutMs: 60_000,
      onWarning: () => {},
      recheckIntervalMs: 60_000,
      graceMs: 0,
    });
    try {
      await group.ready(); // nodes 0 and 1 passed; node 2's check is still running
      const called: number[] = [];
      const ping = (node: RedisNode, index: number) => {
        called.push(index);
        return node.command(["PING"], { timeoutMs: 5_000 });
      };
      const options = { isYes: () => true, stop: "all", timeoutMs: 2_000 } as const;
      const skip = (index: number) => (index === 2 ? Promise.resolve("skipped") : undefined);

      const skipping = await group.round(ping, { ...options, skip });
      assert.deepEqual(
        skipping.outcomes.map((o) => o?.kind === "yes" && o.value),
        ["PONG", "PONG", "skipped"],
      );
      assert.deepEqual(called.sort(), [0, 1], "a skipped node was called");

      // The same round calling node 2: its call waits for its check, which
      // the round's timeout ends first.
      const waiting = await group.round(ping, options);
      const outcome = waiting.outcomes[2];
      assert.equal(outcome?.kind, "error");
      assert.ok(
        outcome?.kind === "error" && outcome.error instanceof NodeTimeoutError,
        String(outcome),
      );
    } finally {
      await Promise.allSettled(nodes.map((node) => node.close()));
    }
  });
});
