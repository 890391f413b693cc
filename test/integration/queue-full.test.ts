import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  ClosedError,
  type Lock,
  NextId,
  QueueFullError,
  Redlock,
  RedquorumError,
} from "../../src/index.js";
import { idLimits, limits } from "../../src/limits.js";
import { useCluster } from "../helpers/cluster.js";
import { sleep } from "../helpers/sleep.js";
import { notAboutTimeouts } from "../helpers/timeouts.js";

/**
 * The bound on calls waiting in one instance (limits.waitersMax for locks,
 * idLimits.queueLengthMax for IDs): the call past it fails at once with
 * QueueFullError instead of queueing without end, and the bound is on the
 * calls waiting now, not on the calls made.
 */

/**
 * Until `condition` holds, polling every few ms. `boundMs` is a hang guard
 * (what is awaited takes a few round trips), never what passes or fails.
 */
async function until(condition: () => boolean, what: string, boundMs = 30_000): Promise<void> {
  const deadline = performance.now() + boundMs;
  while (!condition()) {
    assert.ok(performance.now() < deadline, `${what} within ${boundMs} ms`);
    await sleep(5);
  }
}

/** Not about node timeouts: not on the 50 ms default, which a loaded machine exceeds. */

/** Whether `error` is the queue-full refusal of `what` at `limit`, as a caller sees it. */
function isQueueFull(error: unknown, what: string, limit: number): boolean {
  return (
    error instanceof QueueFullError &&
    error instanceof RedquorumError &&
    error.code === "ERR_QUEUE_FULL" &&
    error.message === `${what}: more than ${limit} calls waiting`
  );
}

describe("QueueFullError: the bound on waiting calls", () => {
  const cluster = useCluster({ nodeCount: 3 });

  it("a Redlock instance with limits.waitersMax callers waiting refuses the next at once; once one is served, a new caller may wait", async () => {
    // The bound lowered for this test (the check reads it per call): ending
    // 100,000 waiters at close() takes minutes here (each leaves an array).
    const bound = 64;
    const real = limits.waitersMax;
    (limits as { waitersMax: number }).waitersMax = bound;
    // Waiters that never poll on their own within the test (a minute
    // between polls): only the release of the lock, held by a caller of the
    // same instance, hands it to the first one.
    const waiting = new Redlock(cluster().urls, {
      ...notAboutTimeouts,
      retry: { retries: limits.retriesMax, delayMs: limits.delayMsMax, jitterMs: 0 },
    });
    const outcomes: Array<Promise<{ lock: Lock } | { error: unknown }>> = [];
    const wait = () => {
      const call = waiting.acquire(["queued"], 5_000);
      outcomes.push(
        call.then(
          (lock) => ({ lock }),
          (error: unknown) => ({ error }),
        ),
      );
    };
    try {
      const held = await waiting.acquire(["queued"], 30_000, { retry: { retries: 0 } });
      // The first waiter makes its attempt (refused) and then waits; the
      // others, finding a waiter of their instance ahead, wait behind it
      // without an attempt of their own.
      void wait();
      await until(() => waiting.waitingCount === 1, "the first caller never waited");
      for (let n = 1; n < bound; n++) void wait();
      await until(() => waiting.waitingCount === bound, `${bound} callers never waited`);
      // waitMs: were it queued (the bug), it would give up instead of hanging.
      const refused = await waiting.acquire(["queued"], 5_000, { waitMs: 1_000 }).then(
        () => assert.fail("a caller past the bound was queued and granted"),
        (error: unknown) => error,
      );
      assert.ok(isQueueFull(refused, "Redlock", bound), String(refused));
      assert.equal(waiting.waitingCount, bound, "the refused caller left a trace");
      // A place frees up: the release hands the lock to the first waiter.
      await held.release();
      await until(() => waiting.waitingCount < bound, "the first waiter was not served");
      void wait();
      await until(() => waiting.waitingCount === bound, "no caller let in after a place freed up");
    } finally {
      (limits as { waitersMax: number }).waitersMax = real;
      await waiting.close();
    }
    // The first caller was served (its lock left held, so no other was);
    // every other one was told at close that the instance closed.
    const settled = await Promise.all(outcomes);
    assert.equal(settled.length, bound + 1);
    assert.ok("lock" in settled[0]!, "the first waiter was not granted");
    for (const outcome of settled.slice(1)) {
      assert.ok(
        "error" in outcome && outcome.error instanceof ClosedError,
        JSON.stringify(outcome),
      );
    }
  });

  it("a NextId instance with idLimits.queueLengthMax calls queued refuses the next at once; the queued ones get their IDs", async () => {
    // Lowered as for locks: the check reads it per call.
    const bound = 64;
    const real = idLimits.queueLengthMax;
    (idLimits as { queueLengthMax: number }).queueLengthMax = bound;
    // Not about durability: these nodes run without persistence.
    const ids = new NextId(cluster().urls, {
      ...notAboutTimeouts,
      key: "queue-full:id",
      unsafeAllowNonDurableNodes: true,
    });
    try {
      await ids.init();
      await ids.next(); // first contact done: every call below is queued in one turn
      // All made in one turn: the round that serves them starts only on the
      // next tick, so every one of them is queued first.
      const calls = Array.from({ length: bound + 1 }, () =>
        ids.next().then(
          (id) => ({ id }),
          (error: unknown) => ({ error }),
        ),
      );
      const results = await Promise.all(calls);
      const last = results.at(-1)!;
      assert.ok(
        "error" in last && isQueueFull(last.error, "NextId", bound),
        `the call past the bound: ${"error" in last ? String(last.error) : `ID ${last.id}`}`,
      );
      const served = results.slice(0, -1).map((r) => {
        if ("error" in r) throw r.error;
        return r.id;
      });
      // Served in the order called, each above the one before.
      for (let i = 1; i < served.length; i++) assert.ok(served[i]! > served[i - 1]!);
      // The bound is on calls waiting now: the next call is served.
      assert.ok((await ids.next()) > served.at(-1)!);
    } finally {
      (idLimits as { queueLengthMax: number }).queueLengthMax = real;
      await ids.close();
    }
  });
});
