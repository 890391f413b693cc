import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { createClient } from "redis";
import { IoredisTransport } from "../../src/node/ioredis-transport.js";
import { NodeRedisTransport } from "../../src/node/node-redis-transport.js";
import { RedisNode } from "../../src/node/redis-node.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";
import { sleep } from "../helpers/sleep.js";
import { TcpProxy } from "../helpers/tcp-proxy.js";

/** Longer than any connect here takes: a bound on a hang, never what decides a case. */
const connectWaitMs = 10_000;

/** redquorum's own ioredis client behind a node (to watch its connection state). */
const clientOf = (node: RedisNode) => (node.transport as unknown as { client: Redis }).client;

async function until(what: string, check: () => boolean): Promise<void> {
  const deadline = performance.now() + connectWaitMs;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/** Retries PING until the node answers it, so its connection is up again. */
async function untilAnswers(node: RedisNode): Promise<void> {
  const deadline = performance.now() + connectWaitMs;
  for (;;) {
    try {
      if ((await node.command(["PING"], { timeoutMs: 1_000 })) === "PONG") return;
    } catch (error) {
      if (performance.now() > deadline) throw error;
    }
    await sleep(10);
  }
}

describe("one node's commands go out in the order issued, or never (FAULTS.md L26)", () => {
  let cluster: TestCluster;
  let proxy: TcpProxy;

  before(async () => {
    cluster = await startCluster({ nodeCount: 1 });
    proxy = await TcpProxy.start(cluster.cluster.node(0).port);
  });
  after(async () => {
    await proxy.close();
    await cluster.stop();
  });

  it("a SET parked while connecting never runs after a later DEL failed on the reconnect", async () => {
    const key = "order:flap";
    const node = new RedisNode(IoredisTransport.fromUrl(proxy.url, "proxy"));
    try {
      proxy.hold = true;
      // The acquire's write, parked: the first connection is open but not ready.
      const set = node.command(["SET", key, "1"], { timeoutMs: connectWaitMs });
      const first = await proxy.nextHeld();
      proxy.hold = false;
      // The connection drops before it was ever ready; ioredis reconnects.
      proxy.reset(first);
      await new Promise((resolve) => clientOf(node).once("reconnecting", resolve));
      // The release's delete, issued while reconnecting, fails at once.
      const del = node.command(["DEL", key], { timeoutMs: connectWaitMs });
      const [setOutcome, delOutcome] = await Promise.allSettled([set, del]);
      assert.equal(delOutcome.status, "rejected");
      await untilAnswers(node);
      assert.equal(await cluster.client(0).exists(key), 0, "the key reappeared after the DEL");
      // The SET was issued first: once the DEL failed, it may not go out any more.
      assert.equal(setOutcome.status, "rejected", "the parked SET was sent after the DEL failed");
    } finally {
      proxy.hold = false;
      await node.close();
    }
  });

  it("a DEL that gives up waiting for the connection takes the SET parked before it along", async () => {
    const key = "order:gave-up";
    const node = new RedisNode(IoredisTransport.fromUrl(proxy.url, "proxy"));
    try {
      proxy.hold = true;
      const set = node.command(["SET", key, "1"], { timeoutMs: connectWaitMs });
      const first = await proxy.nextHeld();
      // A shorter wait than the SET's: it runs out while the connection is
      // held (the transport's wait and the call's bound are both 50 ms).
      const del = node.command(["DEL", key], { timeoutMs: 50 });
      await assert.rejects(del);
      proxy.hold = false;
      proxy.forward(first);
      const [setOutcome] = await Promise.allSettled([set]);
      await untilAnswers(node);
      assert.equal(await cluster.client(0).exists(key), 0, "the key reappeared after the DEL");
      assert.equal(setOutcome.status, "rejected", "the parked SET was sent after the DEL failed");
    } finally {
      proxy.hold = false;
      await node.close();
    }
  });

  it("commands issued while the first connection opens are all sent once it is ready, in order", async () => {
    const key = "order:first-connect";
    const node = new RedisNode(IoredisTransport.fromUrl(proxy.url, "proxy"));
    try {
      proxy.hold = true;
      const pushes = Array.from({ length: 20 }, (_, i) =>
        node.command(["RPUSH", key, String(i)], { timeoutMs: connectWaitMs }),
      );
      const first = await proxy.nextHeld();
      proxy.hold = false;
      proxy.forward(first);
      // RPUSH answers the new length: 1, 2, ... when they ran in issue order.
      assert.deepEqual(
        await Promise.all(pushes),
        pushes.map((_, i) => i + 1),
      );
      assert.equal(await node.command(["RPUSH", key, "20"], { timeoutMs: 1_000 }), 21);
      const values = await cluster.client(0).lrange(key, 0, -1);
      assert.deepEqual(
        values,
        Array.from({ length: 21 }, (_, i) => String(i)),
      );
    } finally {
      proxy.hold = false;
      await node.close();
    }
  });
});

describe("connection epoch", () => {
  let cluster: TestCluster;

  before(async () => {
    cluster = await startCluster({ nodeCount: 1 });
  });
  after(() => cluster.stop());

  it("grows across a node restart, for every kind of client", async () => {
    const url = cluster.urls[0]!;
    const own = new RedisNode(IoredisTransport.fromUrl(url, "own"));
    const ioredisClient = new Redis(url, { retryStrategy: () => 20 });
    ioredisClient.on("error", () => {});
    const nodeRedisClient = createClient({ url, socket: { reconnectStrategy: () => 20 } });
    nodeRedisClient.on("error", () => {});
    await nodeRedisClient.connect();
    const nodes = [
      own,
      new RedisNode(IoredisTransport.fromClient(ioredisClient)),
      new RedisNode(new NodeRedisTransport(nodeRedisClient)),
    ];
    try {
      for (const node of nodes) await untilAnswers(node);
      const before = nodes.map((node) => node.epoch);
      await cluster.cluster.restart(0);
      // The ioredis ones answer again, over a new connection. node-redis is
      // not asked to: 5.9 can come out "ready" on a socket that was reset
      // during its handshake (the dying server's backlog) and then never
      // answers; its epoch still tells that its connection dropped.
      for (const node of nodes.slice(0, 2)) await untilAnswers(node);
      await until("node-redis to see its connection drop", () => nodes[2]!.epoch > before[2]!);
      nodes.forEach((node, i) => {
        assert.ok(node.epoch > before[i]!, `${i}: epoch ${before[i]} -> ${node.epoch}`);
      });
    } finally {
      await Promise.all(nodes.map((node) => node.close()));
      ioredisClient.disconnect();
      nodeRedisClient.destroy();
    }
  });

  it("is 0 for a transport that does not tell", () => {
    const node = new RedisNode({
      endpoint: "custom",
      send: async () => "OK",
      close: async () => {},
    });
    assert.equal(node.epoch, 0);
  });
});
