import assert from "node:assert/strict";
import { createConnection } from "node:net";
import { after, afterEach, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { Redlock } from "../../../src/index.js";
import { startCluster, type TestCluster } from "../../helpers/cluster.js";
import { sleep } from "../../helpers/sleep.js";
import { FaultLog } from "./fault-log.js";
import { FaultProxy, startProxies } from "./proxy.js";
import { commandIs, scriptIs } from "./triggers.js";

/** A client through a proxy whose calls give up after `commandTimeoutMs`, retrying nothing. */
function clientOf(proxy: FaultProxy, commandTimeoutMs = 5_000): Redis {
  const client = new Redis(proxy.url, {
    commandTimeout: commandTimeoutMs,
    maxRetriesPerRequest: 0,
    retryStrategy: () => 50,
  });
  client.on("error", () => {});
  return client;
}

async function timed<T>(run: () => Promise<T>): Promise<{ value: T; elapsedMs: number }> {
  const start = performance.now();
  const value = await run();
  return { value, elapsedMs: performance.now() - start };
}

describe("fault proxy against a real redis-server", () => {
  let cluster: TestCluster;
  let proxy: FaultProxy;
  let log: FaultLog;
  const clients: Redis[] = [];
  const client = (commandTimeoutMs?: number) => {
    const c = clientOf(proxy, commandTimeoutMs);
    clients.push(c);
    return c;
  };

  before(async () => {
    cluster = await startCluster({ nodeCount: 3 });
  });
  after(() => cluster.stop());
  afterEach(async () => {
    for (const c of clients.splice(0)) c.disconnect();
    await proxy?.close();
    await cluster.restoreAll({ keepData: false });
    await cluster.flushAll();
  });

  async function startProxy(): Promise<void> {
    log = new FaultLog();
    proxy = await FaultProxy.start({
      targetPort: cluster.cluster.node(0).port,
      name: "node-0",
      log,
    });
  }

  it("passes pipelined commands and a 1 MB value through unchanged", async () => {
    await startProxy();
    const c = client();
    const big = "x".repeat(1 << 20);
    const pipeline = c.pipeline();
    for (let i = 0; i < 200; i++) pipeline.set(`k${i}`, String(i));
    pipeline.set("big", big);
    pipeline.mget(["k0", "k199", "none"]);
    pipeline.get("big");
    const results = (await pipeline.exec())!;
    assert.deepEqual(results.at(-2), [null, ["0", "199", null]]);
    assert.equal((results.at(-1)![1] as string).length, big.length);
  });

  it("latency shows in the round trip, and ends when cleared", async () => {
    await startProxy();
    const c = client();
    await c.ping();
    proxy.latency(150, { jitterMs: 20 });
    const slow = await timed(() => c.ping());
    assert.ok(slow.elapsedMs >= 130, `round trip ${slow.elapsedMs} ms under 150±20 ms latency`);
    proxy.latency(0);
    assert.deepEqual(
      log.events.map((e) => [e.fault, e.phase]),
      [
        ["latency", "start"],
        ["latency", "end"],
      ],
    );
  });

  it("jitter never reorders: 50 pipelined INCRs under 30 ± 30 ms both ways come back 1..50", async () => {
    await startProxy();
    const c = client();
    await c.ping();
    proxy.latency(30, { jitterMs: 30, direction: "both" });
    const replies = await Promise.all(Array.from({ length: 50 }, () => c.incr("n")));
    assert.deepEqual(
      replies,
      Array.from({ length: 50 }, (_, i) => i + 1),
    );
  });

  it("blackhole: a command times out; heal delivers and the stream stays whole", async () => {
    await startProxy();
    const c = client(300);
    await c.set("a", "1");
    proxy.blackhole();
    await assert.rejects(c.get("a"), /timed out/);
    // What the partition held flows on heal; later replies pair with the right commands.
    proxy.heal();
    assert.equal(await c.get("a"), "1");
    assert.equal(await c.incr("n"), 1);
    assert.deepEqual(
      log.events.map((e) => [e.fault, e.phase]),
      [
        ["blackhole", "start"],
        ["blackhole", "end"],
      ],
    );
  });

  it("blackhole then heal with reset: held connections are reset", async () => {
    await startProxy();
    const c = client(5_000);
    await c.ping();
    proxy.blackhole();
    const pending = c.get("a");
    await sleep(50);
    proxy.heal({ reset: true });
    await assert.rejects(pending, /ECONNRESET|Connection is closed|max retries/);
  });

  it("reset RSTs open connections; refuseNew RSTs new ones until healed", async () => {
    await startProxy();
    const c = client();
    await c.ping();
    const closed = new Promise<void>((resolve) => c.once("close", () => resolve()));
    assert.equal(proxy.reset(), 1);
    await closed;
    proxy.refuseNew();
    const error = await new Promise<NodeJS.ErrnoException>((resolve) => {
      const socket = createConnection({ host: "127.0.0.1", port: proxy.port });
      socket.on("error", resolve);
      socket.on("connect", () => socket.write("PING\r\n"));
    });
    assert.equal(error.code, "ECONNRESET");
    proxy.heal();
    assert.equal(await c.ping(), "PONG");
  });

  it("trigger swallow: the command runs on the node, the client never hears, nor any later reply", async () => {
    await startProxy();
    const c = client(300);
    const trigger = proxy.trigger({ match: commandIs("SET"), reply: "swallow" });
    await assert.rejects(c.set("k", "v"), /timed out/);
    assert.equal((await trigger.fired).name, "SET");
    assert.equal(await cluster.client(0).get("k"), "v");
    await assert.rejects(c.get("k"), /timed out/);
    assert.deepEqual(
      log.events.map((e) => e.fault),
      ["reply-swallowed"],
    );
  });

  it("trigger reset: the command ran, its reply is lost to a reset; the client reconnects", async () => {
    await startProxy();
    const c = client();
    proxy.trigger({ match: commandIs("INCR"), reply: "reset" });
    await assert.rejects(c.incr("n"), /ECONNRESET|Connection is closed|max retries/);
    assert.equal(await cluster.client(0).get("n"), "1");
    assert.equal(await c.incr("n"), 2);
  });

  it("trigger hold: that reply (and those behind it) come late, in order", async () => {
    await startProxy();
    const c = client();
    await c.ping();
    proxy.trigger({ match: commandIs("GET"), reply: { holdMs: 200 } });
    const start = performance.now();
    const [held, after] = await Promise.all([c.get("k"), c.incr("n")]);
    const elapsedMs = performance.now() - start;
    assert.equal(held, null);
    assert.equal(after, 1);
    assert.ok(elapsedMs >= 195, `held reply came after ${elapsedMs} ms`);
    assert.deepEqual(
      log.events.map((e) => [e.fault, e.phase]),
      [
        ["reply-held", "start"],
        ["reply-held", "end"],
      ],
    );
  });

  it("slicer and bandwidth deliver correct replies, at the rate asked", async () => {
    await startProxy();
    const c = client();
    const value = "v".repeat(2_000);
    await c.set("k", value);
    proxy.slicer({ sizeBytes: 7, sizeVariationBytes: 3, delayMs: 0, direction: "both" });
    assert.equal(await c.get("k"), value);
    proxy.clear("slicer");
    proxy.bandwidth(20_000);
    const slow = await timed(() => c.get("k"));
    assert.equal(slow.value, value);
    // 2 KB at 20 KB/s: ≥ 100 ms, less the first 10 ms slot.
    assert.ok(slow.elapsedMs >= 85, `2 KB at 20 KB/s took ${slow.elapsedMs} ms`);
  });

  it("limitData closes the connection after that many bytes", async () => {
    await startProxy();
    const c = client();
    await c.set("k", "v".repeat(100));
    proxy.limitData(50);
    await assert.rejects(c.get("k"), /ECONNRESET|Connection is closed|max retries/);
  });

  it("subscriber connections pass through (pushes are not replies)", async () => {
    await startProxy();
    const subscriber = client();
    proxy.trigger({ match: () => true, reply: "deliver", times: 1_000 });
    const got = new Promise<string>((resolve) => subscriber.on("message", (_c, m) => resolve(m)));
    await subscriber.subscribe("ch");
    await cluster.client(0).publish("ch", "hello");
    assert.equal(await got, "hello");
  });

  it("a connection opened during a blackhole hangs, and works once healed", async () => {
    await startProxy();
    proxy.blackhole();
    const late = client(5_000);
    const pong = late.ping();
    let answered = false;
    void pong.then(() => {
      answered = true;
    });
    await sleep(150);
    assert.equal(answered, false);
    proxy.heal();
    assert.equal(await pong, "PONG");
  });

  it("the node killed and restarted behind the proxy: the client hears the close, then reconnects", async () => {
    await startProxy();
    const c = client(5_000);
    await c.set("k", "1");
    const closed = new Promise<void>((resolve) => c.once("close", () => resolve()));
    await cluster.cluster.kill(0);
    await closed;
    await cluster.cluster.restart(0, { keepData: false });
    await cluster.markAll();
    assert.equal(await c.get("k"), null);
  });

  it("slowClose: the client hears of the node's close only that much later", async () => {
    await startProxy();
    const c = client(5_000);
    await c.ping();
    proxy.slowClose(300);
    const closed = new Promise<number>((resolve) =>
      c.once("close", () => resolve(performance.now())),
    );
    const killedAtMs = performance.now();
    await cluster.cluster.kill(0);
    assert.ok((await closed) - killedAtMs >= 295, "close came after the slow-close delay");
  });

  it("onReply sees the reply before the client does", async () => {
    await startProxy();
    const c = client();
    const seen: string[] = [];
    proxy.trigger({
      match: commandIs("INCR"),
      times: 2,
      onReply: (command, reply) => {
        seen.push(`${command.args[1]} ${reply}`);
      },
    });
    assert.equal(await c.incr("a"), 1);
    assert.equal(await c.incr("a"), 2);
    assert.equal(await c.incr("a"), 3);
    assert.deepEqual(seen, ["a :1", "a :2"]);
  });

  it("a hook that throws is reported in errors; the command still goes through", async () => {
    await startProxy();
    const c = client();
    proxy.trigger({
      match: commandIs("SET"),
      onCommand: () => {
        throw new Error("boom");
      },
    });
    assert.equal(await c.set("k", "v"), "OK");
    assert.equal(proxy.errors.length, 1);
    assert.match(String(proxy.errors[0]), /node-0: the onCommand hook of a trigger on SET threw/);
    assert.match(String((proxy.errors[0] as Error).cause), /boom/);
  });

  it("per-client proxies: a fault on A's link to a node leaves B's link to it alone", async () => {
    log = new FaultLog();
    const [a, b] = await Promise.all([
      startProxies(cluster.cluster, { client: "A", log }),
      startProxies(cluster.cluster, { client: "B", log }),
    ]);
    try {
      a![0]!.blackhole();
      const viaA = clientOf(a![0]!, 300);
      const viaB = clientOf(b![0]!, 5_000);
      clients.push(viaA, viaB);
      await assert.rejects(viaA.ping(), /timed out/);
      assert.equal(await viaB.ping(), "PONG");
      assert.deepEqual(
        log.events.map((e) => e.target),
        ["A→node-0"],
      );
    } finally {
      await Promise.all([...a!, ...b!].map((p) => p.close()));
    }
  });

  it("reset after the acquire ran on one node: a lost vote, and the release leaves no key (L12)", async () => {
    log = new FaultLog();
    const proxies = await startProxies(cluster.cluster, { client: "a", log });
    let redlock: Redlock | undefined;
    try {
      redlock = new Redlock(
        proxies.map((p) => p.url),
        { retry: { retries: 0 }, nodeTimeoutMs: 1_000 },
      );
      proxies[1]!.trigger({ match: scriptIs("acquire"), reply: "reset" });
      // A TTL no wait below reaches: a key the release left is not hidden
      // by its expiry (with 5 s, a release that missed node 1 passed or
      // failed by a few ms at the expiry).
      const lock = await redlock.acquire(["r"], 60_000);
      assert.equal(lock.grantedNodeCount, 2);
      // The script ran on node 1: its key is there though the client never heard.
      assert.equal(await cluster.client(1).exists("r"), 1);
      // The client reconnects to node 1 (its connection was reset); a
      // release sent before that fails there at once (no offline queue),
      // and the key would stay for its TTL. Once it is back, the release
      // reaches every node.
      const deadline = performance.now() + 10_000;
      while (!(await redlock.status())[1]!.reachable) {
        assert.ok(performance.now() < deadline, "the client never reconnected to node 1");
        await new Promise((r) => setTimeout(r, 20));
      }
      await lock.release();
      await cluster.waitForNoKeys(5_000);
      assert.deepEqual(
        log.events.map((e) => [e.fault, e.target]),
        [["reset-after-command", "a→node-1"]],
      );
    } finally {
      await redlock?.close();
      await Promise.all(proxies.map((p) => p.close()));
    }
  });

  it("onCommand hook: kill -9 a node as the acquire script reaches it; the acquire still wins 2 of 3", async () => {
    log = new FaultLog();
    const proxies = await startProxies(cluster.cluster, { client: "a", log });
    let redlock: Redlock | undefined;
    try {
      // Bounds, not what is tested: a loaded machine must not lose a vote to them.
      redlock = new Redlock(
        proxies.map((p) => p.url),
        { retry: { retries: 0 }, nodeTimeoutMs: 1_000 },
      );
      let killed: Promise<void> | undefined;
      const trigger = proxies[2]!.trigger({
        match: scriptIs("acquire"),
        onCommand: () => {
          log.instant({ fault: "kill", target: "node-2" });
          killed = cluster.cluster.kill(2);
          return killed;
        },
      });
      const lock = await redlock.acquire(["r"], 5_000);
      assert.equal((await trigger.fired).script, "acquire");
      assert.equal(lock.grantedNodeCount, 2);
      await killed;
      assert.equal(cluster.cluster.node(2).state, "stopped");
      await lock.release();
    } finally {
      await redlock?.close();
      await Promise.all(proxies.map((p) => p.close()));
    }
  });
});
