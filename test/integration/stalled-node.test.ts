import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { NextId, NodeError, NodeTimeoutError } from "../../src/index.js";
import { limits } from "../../src/limits.js";
import { IoredisTransport } from "../../src/node/ioredis-transport.js";
import { RedisNode } from "../../src/node/redis-node.js";
import { startProxies } from "../faults/tools/proxy.js";
import { useCluster } from "../helpers/cluster.js";
import { sleep } from "../helpers/sleep.js";
import { notAboutTimeouts } from "../helpers/timeouts.js";

/** The nodes behind a NextId (internal: the test watches what waits on each). */
const nodesOf = (ids: NextId) =>
  (ids as unknown as { group: { nodes: readonly RedisNode[] } }).group.nodes;

/** Waits for something that follows at once from what the test did; the deadline only ends a hang. */
async function until(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = performance.now() + 10_000;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/** Rejects unless `call` fails with a plain NodeError (not a timeout) whose message matches. */
async function refusedAtOnce(call: Promise<unknown>, pattern: RegExp): Promise<void> {
  await assert.rejects(call, (error: unknown) => {
    assert.ok(error instanceof NodeError, String(error));
    assert.ok(!(error instanceof NodeTimeoutError), `timed out instead: ${error}`);
    assert.match(error.message, pattern);
    return true;
  });
}

describe("a stalled node holds a bounded number of commands (FAULTS.md I15)", () => {
  const cluster = useCluster({ nodeCount: 5 });
  const paused = 2;

  it("under steady NextId load: bounded, flat once stalled, the load stays live, used again on resume", async () => {
    const key = "stalled:ids";
    // Half the default: the node counts as stalled after 1 s of silence.
    const nodeStallMs = 1_000;
    // init() needs every node within the node timeout, which a loaded
    // machine misses: a client of its own, not about timeouts (the test's
    // client keeps the default, below its nodeStallMs).
    const setup = new NextId(cluster().urls, {
      key,
      unsafeAllowNonDurableNodes: true,
      ...notAboutTimeouts,
    });
    await setup.init();
    await setup.close();
    const ids = new NextId(cluster().urls, { key, unsafeAllowNonDurableNodes: true, nodeStallMs });
    const nodes = nodesOf(ids);
    const stalled = nodes[paused]!;
    let running = true;
    let succeeded = 0;
    const failures: unknown[] = [];
    const load = Promise.all(
      Array.from({ length: 16 }, async () => {
        while (running) {
          try {
            await ids.next();
            succeeded++;
          } catch (error) {
            failures.push(error);
            await sleep(1);
          }
        }
      }),
    );
    try {
      await until("the load to run", () => succeeded > 0);
      cluster().cluster.pause(paused);
      // Long enough that the second half starts well after the node counts as stalled.
      const pauseMs = 3 * nodeStallMs;
      const pausedAt = performance.now();
      const samples: Array<{ atMs: number; outstanding: number; succeeded: number }> = [];
      while (performance.now() - pausedAt < pauseMs) {
        await sleep(20);
        samples.push({
          atMs: performance.now() - pausedAt,
          outstanding: stalled.outstanding,
          succeeded,
        });
      }
      // While stalled, a call fails at once instead of joining the queue.
      const probe = stalled.command(["PING"], { timeoutMs: limits.nodeTimeoutMsMax });
      await probe.catch(() => {});
      cluster().cluster.resume(paused);

      const most = Math.max(...samples.map((s) => s.outstanding));
      assert.ok(most <= limits.outstandingCommandsMax, `${most} commands outstanding`);
      const secondHalf = samples.filter((s) => s.atMs >= pauseMs / 2);
      const first = secondHalf[0]!;
      const last = secondHalf.at(-1)!;
      assert.ok(first.outstanding > 0, "nothing was waiting on the paused node");
      assert.deepEqual(
        secondHalf.map((s) => s.outstanding).filter((n) => n !== first.outstanding),
        [],
        `outstanding grew while stalled: ${first.outstanding} -> ${last.outstanding}`,
      );
      // The other four kept handing out IDs.
      assert.ok(
        last.succeeded > first.succeeded,
        "no ID was handed out while the node was stalled",
      );
      await refusedAtOnce(probe, /stalled: \d+ commands unanswered for \d+ ms/);

      // Resumed: it answers its queue, and new calls go to it again.
      await until("the resumed node to answer", async () => {
        try {
          return (await stalled.command(["PING"], { timeoutMs: 1_000 })) === "PONG";
        } catch {
          return false;
        }
      });
      const atResume = succeeded;
      await until("more IDs after the resume", () => succeeded > atResume + 100);
      running = false;
      await load;
      // Every command sent before a PING on the same connection is answered first.
      for (const node of nodes) await node.command(["PING"], { timeoutMs: 1_000 });
      assert.equal(stalled.outstanding, 0);
      const counters = await cluster().onAll((client) => client.get(key));
      const [counter] = counters;
      assert.ok(counter && BigInt(counter) > 0n, String(counters));
      assert.deepEqual(
        counters,
        counters.map(() => counter),
        "the resumed node did not vote",
      );
      assert.deepEqual(failures, []);
    } finally {
      running = false;
      if (cluster().cluster.node(paused).state === "paused") cluster().cluster.resume(paused);
      await load;
      await ids.close();
    }
  });

  it(`at most outstandingCommandsMax commands wait on one node; more fail at once`, async () => {
    // Not about the stall bound: making 5,000 calls took more than its
    // default 2 s on a loaded machine, and the rest were refused as stalled
    // ("2573 !== 5000"). A minute is more than the test takes.
    const node = new RedisNode(IoredisTransport.fromUrl(cluster().urls[paused]!, "paused"), 60_000);
    try {
      assert.equal(await node.command(["PING"], { timeoutMs: 1_000 }), "PONG");
      cluster().cluster.pause(paused);
      const max = limits.outstandingCommandsMax;
      // Each call gives up after 50 ms; its command stays queued on the connection.
      const waiting = Array.from({ length: max }, () =>
        node.command(["PING"], { timeoutMs: 50 }).catch(() => {}),
      );
      assert.equal(node.outstanding, max);
      await refusedAtOnce(
        node.command(["PING"], { timeoutMs: limits.nodeTimeoutMsMax }),
        new RegExp(`${max} commands unanswered, at most ${max} may wait`),
      );
      assert.equal(node.outstanding, max);
      await Promise.all(waiting);
      cluster().cluster.resume(paused);
      await until("the queue to drain", () => node.outstanding === 0);
      assert.equal(await node.command(["PING"], { timeoutMs: 1_000 }), "PONG");
    } finally {
      if (cluster().cluster.node(paused).state === "paused") cluster().cluster.resume(paused);
      await node.close();
    }
  });

  it("a command in flight when its node is killed fails saying the connection closed before the reply", async () => {
    const node = new RedisNode(IoredisTransport.fromUrl(cluster().urls[paused]!, "killed"), 60_000);
    try {
      assert.equal(await node.command(["PING"], { timeoutMs: 1_000 }), "PONG");
      // Paused, the node holds the command unanswered; killed, it closes
      // the connection with the command still in flight.
      cluster().cluster.pause(paused);
      const inFlight = node.command(["PING"], { timeoutMs: 10_000 });
      // Watched before the kill: the rejection can come before kill() resolves.
      const refused = refusedAtOnce(
        inFlight,
        /^killed: the connection closed before a reply came \(the node stopped, restarted or dropped it;/,
      );
      await cluster().cluster.kill(paused);
      await refused;
    } finally {
      await cluster().cluster.restart(paused);
      await node.close();
    }
  });

  it("a slow connection that is not ready yet says it is being opened, not that the server is loading", async () => {
    // Replies 150 ms late: the handshake (CLIENT SETINFO, then the ready
    // check's INFO) outlasts a 200 ms call, on a server that loads nothing.
    const [proxy] = await startProxies({ nodes: [cluster().cluster.node(0)] });
    const node = new RedisNode(IoredisTransport.fromUrl(proxy!.url, "slow"), 60_000);
    try {
      proxy!.latency(150);
      await assert.rejects(node.command(["PING"], { timeoutMs: 200 }), (error: unknown) => {
        assert.ok(error instanceof NodeError, String(error));
        assert.match(error.message, /\(the connection is being opened\)$/);
        assert.doesNotMatch(error.message, /loading/);
        return true;
      });
    } finally {
      await node.close();
      await proxy!.close();
    }
  });

  it("a connection whose handshake is answered but not its ready check is dropped and opened again", async () => {
    const [proxy] = await startProxies({ nodes: [cluster().cluster.node(0)] });
    const node = new RedisNode(IoredisTransport.fromUrl(proxy!.url, "hung"), 60_000);
    try {
      // As a proxy whose upstream went away after it answered the
      // handshake (CLIENT SETINFO): the ready check's INFO is never answered.
      proxy!.trigger({
        match: (command) => command.name === "INFO",
        reply: "swallow",
        times: Number.POSITIVE_INFINITY,
      });
      await assert.rejects(node.command(["PING"], { timeoutMs: 200 }), NodeError);
      // Dropped 2 s after it connected (the transport's bound for a
      // connection to become ready), and opened again: a new epoch.
      await until("the connection dropped and opened again", () => node.epoch >= 1);
    } finally {
      await node.close();
      await proxy!.close();
    }
  });
});
