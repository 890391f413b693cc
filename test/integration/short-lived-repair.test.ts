import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ClosedError, NextId, Redlock, type RedquorumEvent } from "../../src/index.js";
import { limits } from "../../src/limits.js";
import { finished, type Run, startCli } from "../helpers/cli.js";
import { useCluster } from "../helpers/cluster.js";
import { sleep } from "../helpers/sleep.js";
import { notAboutTimeouts } from "../helpers/timeouts.js";

/**
 * Short-lived clients (every CLI command, a serverless function) leave the
 * cluster no worse than they found it: a node restarted with its data
 * (AOF always, a new run_id) is out of service until repaired from the
 * others, and the client that met it repairs it before it closes (the
 * repair waits `repairDelayMs` after the loss was found: close() waits it
 * out instead of dropping the repair). Before, three such restarts one at a
 * time, each followed by one short-lived client, left three nodes out for
 * good: a majority of five.
 */

/** The smallest allowed (it must exceed 1000 ms), where a test may choose it. */
const repairDelayMs = 1_100;
/**
 * Bound on one CLI run: its start (about 0.2 s here, more on a loaded
 * machine), the repair delay its close() waits out (2 s: the CLI uses the
 * default) and the repair's rounds; a wide margin for a shared machine.
 */
const runTimeoutMs = 30_000;

function cli(args: readonly string[], urls: readonly string[]): Promise<Run> {
  // Not about node timeouts (a loaded machine misses the defaults).
  const env = { REDQUORUM_NODES: urls.join(","), REDQUORUM_NODE_TIMEOUT: "1s" };
  return finished(startCli(args, env), runTimeoutMs);
}

describe("short-lived ID clients repair the restarted nodes they meet (5 AOF-always nodes)", () => {
  const cluster = useCluster({ nodeCount: 5, persistence: "aof-always" });
  const markers = (key: string) => cluster().onAll((client) => client.get(`${key}:marker`));

  async function init(key: string): Promise<bigint> {
    const ids = new NextId(cluster().urls, { ...notAboutTimeouts, key });
    try {
      await ids.init();
      return await ids.next();
    } finally {
      await ids.close();
    }
  }

  it("`redquorum id next` after each of three restarts, one at a time: each run repairs the node it found restarted, and the run after the third still succeeds", async () => {
    const key = "rolling:cli";
    let last = await init(key);
    for (const index of [0, 1, 2]) {
      await cluster().cluster.restart(index);
      const run = await cli(["id", "next", "--key", key], cluster().urls);
      assert.equal(run.code, 0, `id next after node ${index}'s restart: ${run.stderr}`);
      const id = BigInt(run.stdout.trim());
      assert.ok(id > last, `ID ${id} after ${last}`);
      last = id;
      // Said as a line of the CLI's (it was Node's process warning).
      const endpoint = new URL(cluster().urls[index]!).host;
      assert.match(
        run.stderr,
        new RegExp(`^redquorum: repaired the ID counter on ${endpoint} `, "m"),
      );
      assert.doesNotMatch(run.stderr, /\(node:\d+\)|Warning/, run.stderr);
      assert.equal(
        await cluster().client(index).get(`${key}:marker`),
        "1",
        `node ${index} left unrepaired by the run that met its restart`,
      );
    }
    assert.deepEqual(await markers(key), Array(5).fill("1"));
  });

  it("a short-lived NextId whose only call meets three of five nodes restarted at once waits for their repair and gets its ID", async () => {
    const key = "together";
    const before = await init(key);
    await Promise.all([0, 1, 2].map((index) => cluster().cluster.restart(index)));
    // One retry at once: without waiting for the repairs, the call fails
    // long before they are due.
    const retry = { retries: 1, delayMs: 0, delayMsMax: 0 };
    const ids = new NextId(cluster().urls, { ...notAboutTimeouts, key, repairDelayMs, retry });
    try {
      const id = await ids.next();
      assert.ok(id > before, `ID ${id} after ${before}`);
      assert.equal(ids.repairedCount, 3);
    } finally {
      await ids.close();
    }
    assert.deepEqual(await markers(key), Array(5).fill("1"));
  });

  it("close() ends a call waiting for repairs with ClosedError at once, then finishes the repairs", async () => {
    const key = "closing";
    await init(key);
    await Promise.all([0, 1, 2].map((index) => cluster().cluster.restart(index)));
    const needsRepair = new Set<string>();
    const onEvent = (event: RedquorumEvent) => {
      if (event.type === "node" && event.state === "needs repair") needsRepair.add(event.endpoint);
    };
    const retry = { retries: 1, delayMs: 0, delayMsMax: 0 };
    const ids = new NextId(cluster().urls, {
      ...notAboutTimeouts,
      key,
      repairDelayMs,
      retry,
      onEvent,
    });
    const order: string[] = [];
    const call = ids.next().then(
      () => order.push("ID"),
      (error: unknown) => order.push(error instanceof ClosedError ? "call closed" : String(error)),
    );
    // Every lost round failed the call; its retry is used up well before the repairs are due.
    const deadline = performance.now() + 5_000;
    while (needsRepair.size < 3 && performance.now() < deadline) await sleep(10);
    assert.equal(needsRepair.size, 3);
    await ids.close().then(() => order.push("closed"));
    await call;
    assert.deepEqual(order, ["call closed", "closed"]);
    assert.deepEqual(await markers(key), Array(5).fill("1"));
  });

  it("close() repairs a restarted node it met even though another one it met is down by then, and returns", async () => {
    const key = "dead";
    await init(key);
    await cluster().cluster.restart(3);
    await cluster().cluster.restart(4);
    const needsRepair = new Set<string>();
    const onEvent = (event: RedquorumEvent) => {
      if (event.type === "node" && event.state === "needs repair") needsRepair.add(event.endpoint);
    };
    const nodeTimeoutMs = 200;
    const ids = new NextId(cluster().urls, { key, repairDelayMs, nodeTimeoutMs, onEvent });
    const endpoints = ids.endpoints;
    let closeMs: number;
    try {
      await ids.next();
      // Both losses reported (a won round does not wait for every answer).
      const deadline = performance.now() + 5_000;
      while (needsRepair.size < 2 && performance.now() < deadline) await sleep(10);
      assert.deepEqual([...needsRepair].sort(), [endpoints[3], endpoints[4]].sort());
      await cluster().cluster.kill(4);
    } finally {
      const startMs = performance.now();
      await ids.close();
      closeMs = performance.now() - startMs;
    }
    try {
      assert.equal(await cluster().client(3).get(`${key}:marker`), "1", "node 3 not repaired");
      // Bounded: the delay, the repairs' rounds, closing the connections
      // (one to a dead node); the margin is for a loaded machine.
      const boundMs = repairDelayMs + 2 * nodeTimeoutMs + limits.closeRepairMarginMs + 5_000;
      assert.ok(closeMs < boundMs, `close() took ${closeMs} ms`);
    } finally {
      await cluster().cluster.restart(4);
    }
  });
});

describe("short-lived Redlock clients repair the fencing counters of the restarted nodes they meet (5 AOF-always nodes)", () => {
  const cluster = useCluster({ nodeCount: 5, persistence: "aof-always" });

  it("a Redlock that takes one fenced lock and closes, after each of three restarts one at a time: each repairs the node it found restarted, and the lock after the third still gets a token", async () => {
    const resource = "rolling:lock";
    let last = 0n;
    const takeOnce = async () => {
      // No retries: a lock that needs a repair first fails at once. A node
      // timeout for a loaded machine (these are fresh connections).
      const redlock = new Redlock(cluster().urls, {
        retry: { retries: 0 },
        nodeTimeoutMs: 500,
        repairDelayMs,
      });
      try {
        const lock = await redlock.acquire([resource], 5_000);
        assert.ok(lock.fence! > last, `token ${lock.fence} after ${last}`);
        last = lock.fence!;
        await lock.release();
      } finally {
        await redlock.close();
      }
    };
    await takeOnce();
    for (const index of [0, 1, 2]) {
      await cluster().cluster.restart(index);
      await takeOnce();
      assert.notEqual(
        await cluster().client(index).get("redquorum:fence-floor"),
        null,
        `node ${index}'s fencing counters left unrepaired by the client that met its restart`,
      );
    }
    const status = new Redlock(cluster().urls);
    try {
      const nodes = await status.status();
      assert.deepEqual(
        nodes.map((node) => node.marker),
        Array(5).fill(true),
      );
    } finally {
      await status.close();
    }
  });
});

describe("`redquorum status` and nodes restarted that no client has checked since", () => {
  const cluster = useCluster({ nodeCount: 3, persistence: "aof-always" });

  it("names them 'restarted, not yet checked', counts them out of both verdicts, and counts them in again once a short-lived client repaired them", async () => {
    const key = "redquorum:id";
    const ids = new NextId(cluster().urls, { ...notAboutTimeouts, key });
    try {
      await ids.init();
      await ids.next();
    } finally {
      await ids.close();
    }
    const healthy = await cli(["status"], cluster().urls);
    assert.equal(healthy.code, 0, healthy.stderr);
    assert.match(healthy.stdout, /IDs: safe \(3 of 3/);

    await cluster().cluster.restart(0);
    await cluster().cluster.restart(1);
    const text = await cli(["status"], cluster().urls);
    assert.equal(text.code, 3, `${text.stdout}\n${text.stderr}`);
    const rows = text.stdout.split("\n");
    for (const index of [0, 1]) {
      const endpoint = cluster().urls[index]!.replace("redis://", "");
      const row = rows.find((line) => line.startsWith(endpoint));
      assert.match(row ?? "", /restarted, not yet checked/, text.stdout);
    }
    assert.match(text.stdout, /locks: NOT safe \(1 of 3 nodes usable, 2 needed\)/);
    assert.match(text.stdout, /IDs: NOT safe \(1 of 3 nodes usable, 2 needed\)/);
    assert.match(text.stdout, /restarted, not yet checked: .*out of service until/);

    const json = await cli(["status", "--json"], cluster().urls);
    const report = JSON.parse(json.stdout);
    assert.deepEqual(
      report.nodes.map((node: { restartUnchecked?: boolean }) => node.restartUnchecked),
      [true, true, false],
    );
    assert.deepEqual(
      report.idNodes.map((node: { restartUnchecked?: boolean }) => node.restartUnchecked),
      [true, true, false],
    );

    // `id next` meets both restarts (the node left is no majority), waits
    // for their repair and succeeds; a lock run repairs the fencing side.
    const next = await cli(["id", "next"], cluster().urls);
    assert.equal(next.code, 0, next.stderr);
    const lock = await cli(["lock", "status:probe", "--", "true"], cluster().urls);
    assert.equal(lock.code, 0, lock.stderr);
    const after = await cli(["status"], cluster().urls);
    assert.equal(after.code, 0, `${after.stdout}\n${after.stderr}`);
    assert.doesNotMatch(after.stdout, /not yet checked/);
    assert.match(after.stdout, /locks: safe \(3 of 3/);
    assert.match(after.stdout, /IDs: safe \(3 of 3/);
  });
});
