import assert from "node:assert/strict";
import { createServer, type Server, type Socket } from "node:net";
import { describe, it } from "node:test";
import { LocalCluster, NextId, type NodeState, type RedquorumEvent } from "../../src/index.js";
import { useCluster } from "../helpers/cluster.js";
import { sleep } from "../helpers/sleep.js";

/** A client reconnects within its backoff cap (1 s). */
const reconnectMs = 1_000;
/** A connection of redquorum's own must be ready this long after its socket opened. */
const readyTimeoutMs = 2_000;
/** Each step of a node's check is bounded by checkTimeoutMs (the default). */
const checkMs = 2_000;
const repairDelayMs = 1_100;

/**
 * While a node is down, something else can take its address for a while:
 * another redis-server handed the free port, a process listening there, a
 * proxy. Once the node is back at its address, it is back in service, not a
 * recheck interval (here ten minutes) later, and never only once that
 * stranger exits.
 */
describe("a node's address taken by a stranger while the node was down", () => {
  const cluster = useCluster({ nodeCount: 3, persistence: "aof-always" });
  let keyCounter = 0;

  /** A NextId that records when each of its node events came, and callers that keep it busy. */
  async function busyClient() {
    const key = `address-taken:${++keyCounter}`;
    const init = new NextId(cluster().urls, { key });
    await init.init();
    await init.close();
    const events: Array<{ endpoint: string; state: NodeState; detail: string; atMs: number }> = [];
    const ids = new NextId(cluster().urls, {
      key,
      // Only a new connection can make a check sooner than this.
      recheckIntervalMs: 600_000,
      repairDelayMs,
      onRepair: () => {},
      onEvent: (event: RedquorumEvent) => {
        if (event.type === "node") events.push({ ...event, atMs: performance.now() });
      },
    });
    let running = true;
    const failures: unknown[] = [];
    const callers = Promise.all(
      [0, 1].map(async () => {
        while (running) {
          // Nodes 1 and 2 keep answering: calls succeed throughout.
          await ids.next().catch((error: unknown) => failures.push(error));
          await sleep(5);
        }
      }),
    );
    return {
      ids,
      events,
      failures,
      /** Waits for node 0 to be `state` (an event at or after `sinceMs`), at most `withinMs`. */
      async waitFor(state: NodeState, sinceMs: number, withinMs: number) {
        const endpoint = `127.0.0.1:${cluster().cluster.node(0).port}`;
        const deadline = performance.now() + withinMs;
        for (;;) {
          const event = events.find(
            (e) => e.endpoint === endpoint && e.state === state && e.atMs >= sinceMs,
          );
          if (event) return event;
          const seen = events.filter((e) => e.endpoint === endpoint).map((e) => e.state);
          assert.ok(
            performance.now() < deadline,
            `node 0 not ${state} within ${withinMs} ms; its events: ${seen.join(", ")}`,
          );
          await sleep(20);
        }
      },
      async stop() {
        running = false;
        await callers;
        await ids.close();
      },
    };
  }

  it("a redis-server that NextId refuses (appendonly no) answered there: the node is back once it is", async () => {
    const client = await busyClient();
    let stranger: LocalCluster | undefined;
    try {
      await client.ids.next();
      const port = cluster().cluster.node(0).port;
      await cluster().cluster.kill(0);
      stranger = await LocalCluster.start({ ports: [port], persistence: "none", init: false });
      const since = performance.now();
      // The client meets the stranger and takes node 0 out for its configuration.
      const excluded = await client.waitFor("excluded", since, reconnectMs + 3 * checkMs);
      assert.match(excluded.detail, /appendonly no/);
      await stranger.stop();
      stranger = undefined;
      await cluster().cluster.restart(0);
      const back = performance.now();
      // Restarted with its data, node 0 may have come back older: it is
      // repaired once met on its new connection.
      await client.waitFor("repaired", back, reconnectMs + 3 * checkMs + repairDelayMs + 2_000);
    } finally {
      await stranger?.stop();
      await client.stop();
    }
    assert.deepEqual(client.failures.map(String), []);
  });

  it("a process that accepts connections and never answers held it: the connection is dropped, the node is back once it is", async () => {
    const client = await busyClient();
    const accepted: Socket[] = [];
    let server: Server | undefined;
    try {
      await client.ids.next();
      const port = cluster().cluster.node(0).port;
      await cluster().cluster.kill(0);
      server = createServer((socket) => accepted.push(socket));
      await new Promise<void>((resolve, reject) => {
        server!.once("error", reject);
        server!.listen(port, "127.0.0.1", resolve);
      });
      // The client's next connection reaches it, and waits for an answer.
      const deadline = performance.now() + reconnectMs + 2_000;
      while (accepted.length === 0) {
        assert.ok(performance.now() < deadline, "no connection reached the stranger");
        await sleep(20);
      }
      // It stops listening but keeps what it accepted, as a process that
      // lives on would: the node can take its port back. (close() calls
      // back only once those end.)
      server.close();
      server = undefined;
      await cluster().cluster.restart(0);
      const back = performance.now();
      await client.waitFor(
        "repaired",
        back,
        readyTimeoutMs + reconnectMs + 3 * checkMs + repairDelayMs + 2_000,
      );
    } finally {
      for (const socket of accepted) socket.destroy();
      server?.close();
      await client.stop();
    }
    assert.deepEqual(client.failures.map(String), []);
  });
});
