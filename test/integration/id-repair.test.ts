import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { NextId, NotInitializedError, QuorumError, type RepairEvent } from "../../src/index.js";
import { findIdViolations, type IdCall } from "../helpers/checkers.js";
import { useCluster } from "../helpers/cluster.js";
import { DelayProxy } from "../helpers/delay-proxy.js";
import { sleep } from "../helpers/sleep.js";

/**
 * Far above the slow node's 25 ms: its late answer must arrive within the
 * timeout to report its loss. At 100 ms a loaded machine made it time out
 * ("0 repairs", and init, which needs every node, failed).
 */
const nodeTimeoutMs = 500;
/** The smallest allowed (it must exceed 1000 ms), to keep each repair short. */
const repairDelayMs = 1_100;
/** Cap of the reconnect backoff of the connections redquorum opens (ioredis retryStrategy). */
const reconnectMaxMs = 1_000;
/**
 * A restarted node is met again within one reconnect backoff and repaired
 * `repairDelayMs` after that, plus a repair's two rounds; twice that bound
 * is the margin.
 */
const repairWithinMs = 2 * (reconnectMaxMs + repairDelayMs + 2 * nodeTimeoutMs);

const endpointOf = (url: string) => url.replace("redis://", "");

function options(key: string, repairs: RepairEvent[], retries?: number) {
  return {
    key,
    unsafeAllowNonDurableNodes: true, // persistence "none": nodes restart empty anyway
    nodeTimeoutMs,
    repairDelayMs,
    onRepair: (event: RepairEvent) => repairs.push(event),
    ...(retries === undefined ? {} : { retry: { retries } }),
  };
}

/** Records every call's IDs and timing for `findIdViolations`. */
async function record(calls: IdCall[], client: string, run: () => Promise<bigint[]>) {
  const startMs = performance.now();
  const ids = await run();
  calls.push({ client, startMs, endMs: performance.now(), ids });
  return ids;
}

function highestOf(calls: readonly IdCall[]): bigint {
  let highest = 0n;
  for (const call of calls) for (const id of call.ids) if (id > highest) highest = id;
  return highest;
}

async function waitFor(condition: () => boolean, withinMs: number): Promise<void> {
  const deadline = performance.now() + withinMs;
  while (!condition() && performance.now() < deadline) await sleep(10);
}

describe("NextId repairs a lost node that answers after the majority (5 nodes, one 25 ms slower)", () => {
  const cluster = useCluster({ nodeCount: 5, persistence: "none" });
  let proxy: DelayProxy;

  before(async () => {
    proxy = await DelayProxy.start(cluster().cluster.node(4).port, 25);
  });
  after(() => proxy?.close());

  it("every round is won without the slow node, yet once restarted empty it is repaired, and then carries a majority", async () => {
    const urls = [...cluster().urls.slice(0, 4), proxy.url];
    const repairs: RepairEvent[] = [];
    const ids = new NextId(urls, options("slow", repairs));
    const calls: IdCall[] = [];
    const failures: unknown[] = [];
    let running = true;
    let callers: Promise<unknown> | undefined;
    try {
      await ids.init();
      for (let i = 0; i < 20; i++) await record(calls, "warm-up", () => ids.nextBatch(5));
      const beforeLoss = highestOf(calls);
      await cluster().cluster.restart(4, { keepData: false });
      callers = Promise.all(
        Array.from({ length: 4 }, async (_, c) => {
          while (running) {
            try {
              await record(calls, `c${c}`, async () => [await ids.next()]);
            } catch (error) {
              failures.push(error);
            }
          }
        }),
      );
      await waitFor(() => repairs.length > 0, repairWithinMs);
      running = false;
      await callers;
      // Four fast nodes are a majority: nothing failed meanwhile.
      assert.deepEqual(failures.map(String), []);
      assert.ok(calls.length > 100, `only ${calls.length} calls`);
      assert.equal(
        repairs.length,
        1,
        `${calls.length} calls, ${ids.repairedCount} repairs: the slow node was never repaired`,
      );
      assert.equal(ids.repairedCount, 1);
      assert.equal(repairs[0]!.endpoint, endpointOf(proxy.url));
      assert.ok(repairs[0]!.value >= beforeLoss, `${repairs[0]!.value} < ${beforeLoss}`);
      assert.equal(await cluster().client(4).get("slow:marker"), "1");

      // Two other nodes stall: the two left and the repaired slow node are
      // a majority, so IDs go on (unrepaired, nothing could be handed out).
      const highest = highestOf(calls);
      cluster().cluster.pause(0);
      cluster().cluster.pause(1);
      const late = await record(calls, "paused", () => ids.nextBatch(3));
      assert.ok(late[0]! > highest, `${late[0]} after ${highest}`);
      assert.deepEqual(findIdViolations(calls), []);
    } finally {
      running = false;
      await callers;
      for (const i of [0, 1]) {
        if (cluster().cluster.node(i).state === "paused") cluster().cluster.resume(i);
      }
      await ids.close();
    }
  });
});

describe("NextId repairs lost nodes on an even number of nodes", () => {
  const two = useCluster({ nodeCount: 2, persistence: "none" });
  const four = useCluster({ nodeCount: 4, persistence: "none" });

  /**
   * Calls `next()` until it fails for the lost counter rather than for the
   * reconnecting connection, and returns that error. No ID can come out
   * meanwhile: the lost node has no vote until repaired.
   */
  async function lossError(ids: NextId): Promise<unknown> {
    const deadline = performance.now() + reconnectMaxMs * 2;
    for (;;) {
      let error: unknown;
      try {
        assert.fail(`handed out ${await ids.next()} while the lost node had no vote`);
      } catch (caught) {
        error = caught;
      }
      const connecting =
        error instanceof QuorumError &&
        !error.nodeErrors.some((e) => /lost its data|counter missing/.test(e.message));
      if (!connecting || performance.now() > deadline) return error;
      await sleep(10);
    }
  }

  it("2 nodes: a node restarted empty is named as lost (not 'not initialised'), repaired from the other, and IDs continue above every earlier one", async () => {
    const repairs: RepairEvent[] = [];
    const ids = new NextId(two().urls, options("two", repairs, 0));
    const calls: IdCall[] = [];
    try {
      await ids.init();
      for (let i = 0; i < 5; i++) await record(calls, "before", () => ids.nextBatch(10));
      await two().cluster.restart(1, { keepData: false });
      const error = await lossError(ids);
      assert.ok(!(error instanceof NotInitializedError), `misleading: ${String(error)}`);
      assert.ok(error instanceof QuorumError, String(error));
      assert.deepEqual(
        error.nodeErrors.map((e) => e.endpoint),
        [endpointOf(two().urls[1]!)],
      );
      assert.match(error.nodeErrors[0]!.message, /lost its data.*excluded until repaired/);

      await waitFor(() => repairs.length > 0, repairWithinMs);
      assert.equal(repairs.length, 1, "the node that lost its counter was never repaired");
      assert.equal(repairs[0]!.endpoint, endpointOf(two().urls[1]!));
      assert.ok(repairs[0]!.value >= highestOf(calls), String(repairs[0]!.value));
      const highest = highestOf(calls);
      const [id] = await record(calls, "after", async () => [await ids.next()]);
      assert.ok(id! > highest, `${id} after ${highest}`);
      assert.deepEqual(findIdViolations(calls), []);
    } finally {
      await ids.close();
    }
  });

  it("4 nodes: one restarted empty and another stopped, IDs continue once the lost one is repaired from the 2 healthy nodes", async () => {
    const repairs: RepairEvent[] = [];
    const ids = new NextId(four().urls, options("four", repairs, 0));
    const calls: IdCall[] = [];
    const failures: unknown[] = [];
    try {
      await ids.init();
      for (let i = 0; i < 5; i++) await record(calls, "before", () => ids.nextBatch(10));
      const highest = highestOf(calls);
      await four().cluster.kill(2);
      await four().cluster.restart(3, { keepData: false });
      // 2 healthy votes of the 3 needed until node 3 is repaired.
      const deadline = performance.now() + repairWithinMs;
      let id: bigint | undefined;
      while (id === undefined && performance.now() < deadline) {
        try {
          [id] = await record(calls, "after", async () => [await ids.next()]);
        } catch (error) {
          failures.push(error);
          await sleep(10);
        }
      }
      assert.ok(id !== undefined, `no ID within ${repairWithinMs} ms: ${String(failures.at(-1))}`);
      assert.equal(repairs.length, 1);
      assert.equal(repairs[0]!.endpoint, endpointOf(four().urls[3]!));
      assert.ok(repairs[0]!.value >= highest, String(repairs[0]!.value));
      assert.ok(id > highest, `${id} after ${highest}`);
      for (const failure of failures) assert.ok(failure instanceof QuorumError, String(failure));
      assert.ok(
        failures.some(
          (f) =>
            f instanceof QuorumError &&
            f.nodeErrors.some(
              (e) => e.endpoint === endpointOf(four().urls[3]!) && /lost its data/.test(e.message),
            ),
        ),
        "no failure named the lost node",
      );
      assert.deepEqual(findIdViolations(calls), []);
    } finally {
      await ids.close();
    }
  });
});
