import assert from "node:assert/strict";
import { createServer, type Server, type Socket } from "node:net";
import { describe, it } from "node:test";
import { LocalCluster, NextId, type NodeState, type RedquorumEvent } from "../../src/index.js";
import { IoredisTransport } from "../../src/node/ioredis-transport.js";
import { useCluster } from "../helpers/cluster.js";
import { sleep } from "../helpers/sleep.js";
import { notAboutTimeouts } from "../helpers/timeouts.js";

/** A client reconnects within its backoff cap (1 s). */
const reconnectMs = 1_000;
/** A connection of redquorum's own must be ready this long after its socket opened. */
const readyTimeoutMs = 2_000;
/** Each step of a node's check is bounded by checkTimeoutMs (the default). */
const checkMs = 2_000;
const repairDelayMs = 1_100;
/**
 * The clients' node timeout: not what these tests are about (the 200 ms
 * default is missed on a loaded machine, and a repair's round that misses
 * it waits for the loss to be reported again and another repair delay).
 * A repair is two rounds, each bounded by it.
 */
const nodeTimeoutMs = notAboutTimeouts.nodeTimeoutMs;
const repairMs = repairDelayMs + 2 * nodeTimeoutMs;

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
    const init = new NextId(cluster().urls, { ...notAboutTimeouts, key });
    await init.init();
    await init.close();
    const events: Array<{ endpoint: string; state: NodeState; detail: string; atMs: number }> = [];
    const ids = new NextId(cluster().urls, {
      key,
      nodeTimeoutMs,
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
    let down = false;
    try {
      await client.ids.next();
      const port = cluster().cluster.node(0).port;
      cluster().client(0).disconnect();
      await cluster().cluster.kill(0);
      down = true;
      // Taken before the stranger starts: the client may meet it before
      // start() returns (on a loaded machine it did, and the event was missed).
      const since = performance.now();
      stranger = await LocalCluster.start({ ports: [port], persistence: "none", init: false });
      // The client meets the stranger and takes node 0 out for its configuration.
      const excluded = await client.waitFor(
        "excluded",
        since,
        readyTimeoutMs + reconnectMs + 3 * checkMs,
      );
      assert.match(excluded.detail, /appendonly no/);
      await stranger.stop();
      stranger = undefined;
      // Before the restart, for the same reason: nothing repairs node 0 before it.
      const back = performance.now();
      await cluster().cluster.restart(0);
      down = false;
      // Restarted with its data, node 0 may have come back older: it is
      // repaired once met on its new connection.
      await client.waitFor(
        "repaired",
        back,
        readyTimeoutMs + reconnectMs + 3 * checkMs + repairMs + 2_000,
      );
    } finally {
      await stranger?.stop();
      // A failure above leaves the suite's node 0 running for the next tests.
      if (down) await cluster().cluster.restart(0);
      await client.stop();
    }
    assert.deepEqual(client.failures.map(String), []);
  });

  /**
   * While node 0 is down, a listener at its port that accepts connections
   * and never answers, until one of ours reached it; it then stops
   * listening but keeps what it accepted, as a process that lives on would:
   * the node can take its port back. `sockets` holds what it accepted
   * (the caller destroys them).
   */
  async function deadEndWhileDown(
    sockets: Socket[],
    meanwhile: () => Promise<void> = async () => {},
  ): Promise<number> {
    const port = cluster().cluster.node(0).port;
    // The suite's own inspection connection must not be the one that
    // reaches the stranger (a later client(0) opens a fresh one).
    cluster().client(0).disconnect();
    await cluster().cluster.kill(0);
    const server: Server = createServer((socket) => sockets.push(socket));
    // When node 0 starts again: nothing repairs it before (the caller waits
    // for events from here; restart() itself may return after them).
    let backAtMs = 0;
    try {
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, "127.0.0.1", resolve);
      });
      const deadline = performance.now() + reconnectMs + 2_000;
      while (sockets.length === 0) {
        assert.ok(performance.now() < deadline, "no connection reached the stranger");
        await sleep(20);
      }
      await meanwhile();
    } finally {
      // close() calls back only once what it accepted ends: not waited for.
      server.close();
      // Restarted also after a failure above, for the next tests.
      backAtMs = performance.now();
      await cluster().cluster.restart(0);
    }
    return backAtMs;
  }

  it("a process that accepts connections and never answers held it: the connection is dropped, the node is back once it is", async () => {
    const client = await busyClient();
    const accepted: Socket[] = [];
    try {
      await client.ids.next();
      const back = await deadEndWhileDown(accepted);
      await client.waitFor(
        "repaired",
        back,
        readyTimeoutMs + reconnectMs + 3 * checkMs + repairMs + 2_000,
      );
    } finally {
      for (const socket of accepted) socket.destroy();
      await client.stop();
    }
    assert.deepEqual(client.failures.map(String), []);
  });

  /** A pub/sub connection of redquorum's own to node 0, and the messages it heard. */
  function subscriberOnNode0() {
    const transport = IoredisTransport.fromUrl(cluster().urls[0]!, "node 0");
    const received: string[] = [];
    const subscription = transport.subscribe!((_, message) => received.push(message));
    return {
      subscription,
      received,
      async close() {
        await subscription.close();
        await transport.close();
      },
    };
  }

  /**
   * Publishes on `channel` until `received` holds a message, at most
   * `withinMs`: Redis drops a message nobody is subscribed to.
   */
  async function publishUntilHeard(channel: string, received: string[], withinMs: number) {
    const deadline = performance.now() + withinMs;
    for (let n = 0; received.length === 0; n++) {
      assert.ok(performance.now() < deadline, `no message on ${channel} within ${withinMs} ms`);
      await cluster()
        .client(0)
        .publish(channel, String(n))
        .catch(() => {});
      await sleep(50);
    }
  }

  it("the same for the pub/sub connection: messages arrive again once the node is back", async () => {
    const { subscription, received, close } = subscriberOnNode0();
    const accepted: Socket[] = [];
    try {
      await subscription.add("address-taken");
      await deadEndWhileDown(accepted);
      await publishUntilHeard("address-taken", received, readyTimeoutMs + reconnectMs + 2_000);
    } finally {
      for (const socket of accepted) socket.destroy();
      await close();
    }
  });

  it("a SUBSCRIBE written to the stranger fails when that connection is dropped, and a later one holds", async () => {
    const { subscription, received, close } = subscriberOnNode0();
    const accepted: Socket[] = [];
    let outcome: string | undefined;
    try {
      // Connected once, to the node, with no channel yet.
      await subscription.add("address-taken:warm-up");
      await deadEndWhileDown(accepted, async () => {
        // The connection is open on the stranger and not ready: ioredis
        // writes SUBSCRIBE on it at once, and no answer ever comes.
        await sleep(100);
        subscription.add("address-taken:later").then(
          () => {
            outcome = "resolved";
          },
          (error: unknown) => {
            outcome = `rejected: ${String(error)}`;
          },
        );
      });
      const deadline = performance.now() + readyTimeoutMs + 2_000;
      while (outcome === undefined) {
        assert.ok(
          performance.now() < deadline,
          "the SUBSCRIBE written to the stranger never settled",
        );
        await sleep(20);
      }
      assert.match(outcome, /^rejected: .*closed before the node answered/);
      // Asked again (as the next waiter does), it holds once the node is back.
      await subscription.add("address-taken:later");
      await publishUntilHeard("address-taken:later", received, reconnectMs + 2_000);
    } finally {
      for (const socket of accepted) socket.destroy();
      await close();
    }
  });
});
