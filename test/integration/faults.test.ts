import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { QuorumError, Redlock, ResourceLockedError } from "../../src/index.js";
import { verdictOf } from "../../src/node/verdict.js";
import { type TestCluster, useFreshCluster } from "../helpers/cluster.js";

const fast = { retry: { retries: 2, delayMs: 10, jitterMs: 5 } } as const;
/**
 * For the cases not about node timeouts: killed nodes refuse at once, and a
 * running node slowed by a loaded machine must not miss the 50 ms default
 * ("extend reached 2 of 5 nodes" failed the 2-killed case here).
 */
const patient = { ...fast, nodeTimeoutMs: 500 } as const;

/** Every subset of {0..n-1}, as arrays of indexes. */
function subsets(n: number): number[][] {
  const all: number[][] = [];
  for (let mask = 0; mask < 1 << n; mask++) {
    all.push([...Array(n).keys()].filter((i) => mask & (1 << i)));
  }
  return all;
}

describe("node failures (5 nodes, Q = 3)", () => {
  // Every node back up and empty before each case.
  const cluster = useFreshCluster({ nodeCount: 5 });

  it("with 2 nodes killed, acquire, extend and release still work", async () => {
    const redlock = new Redlock(cluster().urls, patient);
    try {
      await cluster().cluster.kill(3);
      await cluster().cluster.kill(4);
      const lock = await redlock.acquire(["r"], 5_000);
      assert.equal(lock.grantedNodeCount, 3);
      await lock.extend(5_000);
      assert.ok(lock.remainingMs() > 4_000);
      await lock.release();
      const values = await Promise.all([0, 1, 2].map((i) => cluster().client(i).get("r")));
      assert.deepEqual(values, [null, null, null]);
    } finally {
      await redlock.close();
    }
  });

  it("with 3 nodes killed, acquire fails with a QuorumError naming the three, within the retry budget", async () => {
    // patient: a live node slowed past 50 ms by a loaded machine was named too.
    const redlock = new Redlock(cluster().urls, patient);
    try {
      for (const i of [0, 2, 4]) await cluster().cluster.kill(i);
      const start = performance.now();
      await assert.rejects(redlock.acquire(["r"], 5_000), (error: unknown) => {
        assert.ok(error instanceof QuorumError, String(error));
        assert.equal(error.code, "ERR_QUORUM");
        assert.equal(error.quorum, 3);
        const named = error.nodeErrors.map((e) => e.endpoint).sort();
        const killed = [0, 2, 4].map((i) => cluster().urls[i]!.replace("redis://", "")).sort();
        assert.deepEqual(named, killed);
        return true;
      });
      // 3 attempts with ~10 ms waits: far below one TTL, nowhere near a hang.
      assert.ok(performance.now() - start < 2_500, `took ${performance.now() - start} ms`);
      // No lock left on the survivors.
      const values = await Promise.all([1, 3].map((i) => cluster().client(i).get("r")));
      assert.deepEqual(values, [null, null]);
    } finally {
      await redlock.close();
    }
  });

  it("a node killed while a lock is held: extend and release still work on the rest", async () => {
    const redlock = new Redlock(cluster().urls, patient);
    try {
      const lock = await redlock.acquire(["r"], 5_000);
      await cluster().cluster.kill(1);
      await lock.extend(5_000);
      await lock.release();
      // release resolves at a majority; the fourth live node follows at once.
      await waitForNoKey(cluster(), "r", [0, 2, 3, 4]);
    } finally {
      await redlock.close();
    }
  });

  it("a paused node (SIGSTOP) costs about the node timeout, not the TTL", async () => {
    const nodeTimeoutMs = 50;
    const ttlMs = 10_000;
    const redlock = new Redlock(cluster().urls, { ...fast, nodeTimeoutMs });
    try {
      // First contact (connections, INFO checks) while every node answers.
      await (await redlock.acquire(["warm"], 1_000)).release();
      cluster().cluster.pause(2);
      const start = performance.now();
      const lock = await redlock.acquire(["r"], ttlMs);
      const acquireMs = performance.now() - start;
      // The validity is the TTL less the drift and the time the round took:
      // the paused node cost the round nothing of the TTL.
      const drift = ttlMs * 0.01 + 2;
      const remaining = lock.remainingMs();
      assert.ok(
        remaining > ttlMs - drift - (performance.now() - start) - 1,
        `remaining ${remaining} ms after a ${acquireMs} ms acquire`,
      );
      assert.ok(lock.grantedNodeCount >= 3);
      await lock.release();
      const cycleMs = performance.now() - start;
      assert.equal(lock.released, true);
      assert.equal(lock.remainingMs(), 0);
      // The release deleted the key on every running node.
      await waitForNoKey(cluster(), "r", [0, 1, 3, 4]);
      // The acquire needs only the 3 fastest; the release waits out the
      // paused node's timeout. Neither comes near the TTL (what a client
      // that waited for the paused node would cost): a tenth of it is
      // 200 node timeouts.
      assert.ok(acquireMs < ttlMs / 10, `acquire took ${acquireMs} ms`);
      assert.ok(cycleMs < ttlMs / 10, `acquire + release took ${cycleMs} ms`);
    } finally {
      cluster().cluster.resume(2);
      await redlock.close();
    }
    // Resumed, the node runs its queued acquire and release, in order.
    await waitForNoKey(cluster(), "r");
  });

  it("nodes restarted empty are quarantined until the other nodes can judge how long, then used again", async () => {
    // The client reaches a restarted node only on its next reconnect
    // attempt (backoff up to 1 s).
    const reconnectBackoffCapMs = 1_000;
    const maxTtlMs = 2 * reconnectBackoffCapMs;
    // Fencing off: with 2 nodes out and 2 that lost their counters, no
    // majority could repair the counters (see the fencing tests).
    // 200 ms per node: not about timeouts (a live node slowed past 50 ms by
    // a loaded machine would fail the acquires expected to succeed).
    const redlock = new Redlock(cluster().urls, {
      ...fast,
      nodeTimeoutMs: 200,
      maxTtlMs,
      fencing: false,
    });
    try {
      await (await redlock.acquire(["r"], 1_000)).release();
      // Without persistence they come back empty: they lost their memory.
      await cluster().cluster.restart(0, { keepData: false });
      await cluster().cluster.restart(1, { keepData: false });
      cluster().cluster.pause(2);
      cluster().cluster.pause(3);
      // Only 0, 1 (restarted) and 4 answer: a lock needs both restarted
      // nodes. How long their quarantine lasts is judged from N - Q + 1 = 3
      // other nodes not in quarantine (lock/quarantine-judge.ts); with 2 and
      // 3 out only node 4 is one, so they stay out, past maxTtlMs: more
      // faults than 5 nodes tolerate, and a lock of a client with a longer
      // maxTtlMs could still be held.
      const outUntil = performance.now() + maxTtlMs + reconnectBackoffCapMs + 500;
      let quarantined = 0;
      while (performance.now() < outUntil) {
        await assert.rejects(redlock.acquire(["r"], 1_000), (error: unknown) => {
          assert.ok(error instanceof QuorumError, String(error));
          quarantined += error.nodeErrors.filter((e) => /quarantined/.test(e.message)).length;
          return true;
        });
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.ok(quarantined > 0, "the restarted nodes never answered quarantined");
      for (const i of [0, 1]) {
        assert.match(String(await cluster().client(i).get("redquorum:quarantine")), /^unjudged:/);
      }
      const status = await redlock.status();
      assert.deepEqual(
        [0, 1].map((i) => status[i]!.quarantineJudged),
        [false, false],
      );
      assert.match(verdictOf(status).locks.reasons.join("\n"), /judged from the other nodes/);
      // Back: the next refusals have the quarantines judged, over by now.
      cluster().cluster.resume(2);
      cluster().cluster.resume(3);
      const deadline = performance.now() + 5_000;
      for (;;) {
        // Until the resumed nodes have answered their backlog the client
        // counts them stalled, and nodes 0 and 1 stay out until a judgement
        // from three others: a QuorumError then is the wait, not the result.
        // And the backlog itself (the acquires sent while they were paused,
        // run on resume after their attempts gave up) holds r there for up
        // to its 1 s TTL: a ResourceLockedError then is the wait too.
        const lock = await redlock.acquire(["r"], 1_000).catch((error: unknown) => {
          const waiting = error instanceof QuorumError || error instanceof ResourceLockedError;
          if (!waiting || performance.now() > deadline) throw error;
          return undefined;
        });
        if (!lock) {
          await new Promise((r) => setTimeout(r, 50));
          continue;
        }
        await new Promise((r) => setTimeout(r, 20)); // a node's answer may land after the majority's
        const on = await Promise.all([0, 1].map((i) => cluster().client(i).get("r")));
        await lock.release();
        if (on.every((value) => value === lock.value)) break;
        assert.ok(performance.now() < deadline, `restarted nodes not used again (${on})`);
        await new Promise((r) => setTimeout(r, 50));
      }
      for (const i of [0, 1]) {
        assert.equal(await cluster().client(i).get("redquorum:quarantine"), null);
      }
    } finally {
      for (const i of [2, 3]) {
        if (cluster().cluster.nodes[i]!.state === "paused") cluster().cluster.resume(i);
      }
      await redlock.close();
    }
  });

  for (const failed of subsets(5)) {
    const expectLock = failed.length <= 2;
    it(`nodes {${failed.join(",")}} paused: ${expectLock ? "acquires" : "QuorumError"}`, async () => {
      // A lock must come through whatever the paused nodes do, but a
      // running node may miss one short timeout on a loaded machine: a few
      // retries where a lock is expected (none where none can be had).
      const redlock = new Redlock(cluster().urls, {
        retry: expectLock ? { retries: 5, delayMs: 10, jitterMs: 5 } : { retries: 0 },
        nodeTimeoutMs: 200,
      });
      try {
        await (await redlock.acquire(["warm"], 1_000)).release();
        for (const i of failed) cluster().cluster.pause(i);
        const attempt = redlock.acquire(["r"], 2_000);
        if (expectLock) {
          const lock = await attempt;
          assert.ok(lock.grantedNodeCount >= 3);
          await lock.release();
        } else {
          await assert.rejects(attempt, (error: unknown) => {
            assert.ok(error instanceof QuorumError, String(error));
            assert.ok(error.successCount < 3);
            assert.ok(error.nodeErrors.length >= 3, `${error.nodeErrors.length} node errors`);
            return true;
          });
        }
      } finally {
        for (const i of failed) cluster().cluster.resume(i);
        await redlock.close();
      }
      // Whatever happened, once the paused nodes ran their queued commands
      // (acquire then release, in order) no key of the attempt is left.
      await waitForNoKey(cluster(), "r");
    });
  }
});

async function waitForNoKey(
  cluster: TestCluster,
  key: string,
  indexes = [0, 1, 2, 3, 4],
): Promise<void> {
  // A resumed node first runs what queued up while it was paused, after a
  // loaded machine gives it the CPU: the deadline only ends a hang.
  const deadline = performance.now() + 10_000;
  for (;;) {
    const values = await Promise.all(indexes.map((i) => cluster.client(i).exists(key)));
    if (values.every((n) => n === 0)) return;
    if (performance.now() > deadline) assert.fail(`key ${key} left on nodes: ${values}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
