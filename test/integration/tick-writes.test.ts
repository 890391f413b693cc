import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Redis } from "ioredis";
import { IoredisTransport } from "../../src/node/ioredis-transport.js";
import { RedisNode } from "../../src/node/redis-node.js";
import { roundEnded, roundStarted, roundsUnderWay } from "../../src/node/rounds-under-way.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";

/** Bounds a connect: never what decides a case. */
const connectWaitMs = 10_000;

interface Writes {
  /** Each write the socket made: how many commands it carried, and whether it was made before `send` returned. */
  readonly log: Array<{ commands: number; synchronous: boolean }>;
  /** Set while a test's `send` calls run. */
  sending: boolean;
}

/** Watches the socket under a node's own connection: each write it makes (one command, or several at once). */
function watchWrites(node: RedisNode): Writes {
  const client = (node.transport as unknown as { client: Redis }).client;
  const stream = client.stream as unknown as {
    _write: (...args: unknown[]) => void;
    _writev: (chunks: unknown[], callback: unknown) => void;
  };
  const writes: Writes = { log: [], sending: false };
  const write = stream._write.bind(stream);
  const writev = stream._writev.bind(stream);
  stream._write = (...args) => {
    writes.log.push({ commands: 1, synchronous: writes.sending });
    write(...args);
  };
  stream._writev = (chunks, callback) => {
    writes.log.push({ commands: chunks.length, synchronous: writes.sending });
    writev(chunks, callback);
  };
  return writes;
}

/** `count` PINGs issued in one tick; resolves once all are answered. */
async function pings(node: RedisNode, writes: Writes, count: number): Promise<void> {
  writes.sending = true;
  const replies = Array.from({ length: count }, () =>
    node.command(["PING"], { timeoutMs: connectWaitMs }),
  );
  writes.sending = false;
  assert.deepEqual(await Promise.all(replies), new Array(count).fill("PONG"));
}

/**
 * When a tick's commands on one of redquorum's connections go out: at once
 * for a lone caller, together in one write where other rounds are under way
 * (rounds-under-way.ts). Either way every command is written, in order.
 */
describe("a tick's commands on one connection", () => {
  let cluster: TestCluster;
  let node: RedisNode;
  let writes: Writes;

  before(async () => {
    cluster = await startCluster({ nodeCount: 1 });
    node = new RedisNode(IoredisTransport.fromUrl(cluster.urls[0]!, "node"));
    await node.command(["PING"], { timeoutMs: connectWaitMs }); // connected: a socket to watch
    writes = watchWrites(node);
  });
  after(async () => {
    await node.close();
    await cluster.stop();
  });

  it("a lone caller's command is written before send returns, not at the end of the tick", async () => {
    assert.equal(roundsUnderWay.now, 0);
    writes.log.length = 0;
    await pings(node, writes, 1);
    assert.deepEqual(writes.log, [{ commands: 1, synchronous: true }]);
  });

  it("a lone caller's further commands in one tick follow its first in one write", async () => {
    writes.log.length = 0;
    await pings(node, writes, 4);
    assert.deepEqual(writes.log, [
      { commands: 1, synchronous: true },
      { commands: 3, synchronous: false },
    ]);
  });

  it("with other rounds under way, the tick's commands leave together in one write", async () => {
    roundStarted();
    roundStarted();
    try {
      writes.log.length = 0;
      await pings(node, writes, 4);
      assert.deepEqual(writes.log, [{ commands: 4, synchronous: false }]);
    } finally {
      roundEnded();
      roundEnded();
    }
  });

  it("rounds that ended in this tick still count until the connections wrote", async () => {
    // Many callers whose replies came in one read end their rounds together
    // and start the next ones in the same tick: they must stay corked.
    roundStarted();
    roundStarted();
    roundEnded();
    roundEnded();
    writes.log.length = 0;
    await pings(node, writes, 3);
    assert.deepEqual(writes.log, [{ commands: 3, synchronous: false }]);
    // After that write the peak is back to the rounds under way: none.
    writes.log.length = 0;
    await pings(node, writes, 1);
    assert.deepEqual(writes.log, [{ commands: 1, synchronous: true }]);
  });
});
