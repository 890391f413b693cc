import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  InvalidArgumentError,
  LockExpiredError,
  LockLostError,
  Redlock,
  ResourceLockedError,
} from "../../src/index.js";
import { useFreshCluster } from "../helpers/cluster.js";
import { sleep } from "../helpers/sleep.js";
import { notAboutTimeouts } from "../helpers/timeouts.js";

describe("redlock.using: auto-extension, loss and release", () => {
  const cluster = useFreshCluster({ nodeCount: 5 });

  it("keeps the lock through a routine that runs 10× the TTL, then releases it", async () => {
    // Not about node timeouts: "no reply within 50 ms" (the default) on a
    // loaded machine failed the rival's attempts with a QuorumError here.
    const holder = new Redlock(cluster().urls, { nodeTimeoutMs: 200 });
    const rival = new Redlock(cluster().urls, { retry: { retries: 0 }, nodeTimeoutMs: 500 });
    try {
      let rivalAttempts = 0;
      let rivalWins = 0;
      // TTL 1 s: the keep-alive extends with half of it to spare, so only a
      // stall of this process longer than ~500 ms (seen with the machine 3.5×
      // oversubscribed at TTL 300 ms) could lose it — which using() must then
      // report by aborting, as it did.
      const ttlMs = 1_000;
      const result = await holder.using(["job"], ttlMs, async (signal, lock) => {
        const end = performance.now() + 10 * ttlMs;
        while (performance.now() < end) {
          rivalAttempts++;
          await rival.acquire(["job"], ttlMs).then(
            async (l) => {
              rivalWins++;
              await l.release();
            },
            (error) => assert.ok(error instanceof ResourceLockedError, String(error)),
          );
          assert.equal(signal.aborted, false);
          assert.ok(lock.remainingMs() > 0);
          await sleep(100);
        }
        return "done";
      });
      assert.equal(result, "done");
      assert.ok(rivalAttempts > 20);
      assert.equal(rivalWins, 0, "another client took the lock while the routine ran");
      await cluster().waitForNoKeys();
      const after = await rival.acquire(["job"], 300);
      await after.release();
    } finally {
      await holder.close();
      await rival.close();
    }
  });

  it("killing 3 of 5 nodes mid-routine aborts the signal with LockLostError before the validity ends", async () => {
    const holder = new Redlock(cluster().urls, { nodeTimeoutMs: 50 });
    try {
      let killedAt = 0;
      let abortedAt = 0;
      let remainingAtAbort = -1;
      await assert.rejects(
        holder.using(["job"], 1_000, async (signal, lock) => {
          await sleep(200);
          for (const i of [0, 1, 2]) await cluster().cluster.kill(i);
          killedAt = performance.now();
          await new Promise<void>((resolve) => {
            signal.addEventListener("abort", () => resolve(), { once: true });
          });
          abortedAt = performance.now();
          remainingAtAbort = lock.remainingMs();
          throw signal.reason;
        }),
        (error: unknown) => {
          assert.ok(error instanceof LockLostError, String(error));
          assert.equal(error.code, "ERR_LOCK_LOST");
          return true;
        },
      );
      assert.ok(abortedAt - killedAt < 1_000, `aborted ${abortedAt - killedAt} ms after the kill`);
      assert.ok(remainingAtAbort > 0, "the abort must come before the validity ran out");
    } finally {
      await holder.close();
    }
  });

  it("a routine that shortens the lock itself is still kept alive (the timers follow the new validity)", async () => {
    // The holder's extensions must land on a loaded machine: the test is
    // about when they are sent, not about slow answers (a 200 ms node
    // timeout, and a shortened lock of 1.5 s, give them room).
    const holder = new Redlock(cluster().urls, { nodeTimeoutMs: 200 });
    // Its attempts must fail for the lock being held, not on a slow answer.
    const rival = new Redlock(cluster().urls, { retry: { retries: 0 }, nodeTimeoutMs: 500 });
    try {
      // Kept alive at half of 10 s: timers that did not follow the new
      // validity would first extend 5 s in, long after 1.5 s ran out.
      await holder.using(["job"], 10_000, async (signal, lock) => {
        await lock.extend(1_500);
        const end = performance.now() + 3_000;
        while (performance.now() < end) {
          assert.ok(lock.remainingMs() > 0, "the lock ran out");
          assert.equal(signal.aborted, false);
          await assert.rejects(rival.acquire(["job"], 1_000), ResourceLockedError);
          await sleep(50);
        }
      });
    } finally {
      await holder.close();
      await rival.close();
    }
  });

  it("an error thrown by the routine comes out unchanged, and the lock is released", async () => {
    const holder = new Redlock(cluster().urls);
    try {
      const failure = new TypeError("routine failed");
      await assert.rejects(
        holder.using(["job"], 1_000, async () => {
          throw failure;
        }),
        (error) => error === failure,
      );
      await cluster().waitForNoKeys();
    } finally {
      await holder.close();
    }
  });

  it("an extension that finds the keys gone from a majority leaves the lock no validity, and aborts the routine at once", async () => {
    const holder = new Redlock(cluster().urls, notAboutTimeouts);
    try {
      // Outside using: the Lock itself.
      const lock = await holder.acquire(["plain"], 10_000);
      for (const i of [0, 1, 2]) await cluster().client(i).del("plain");
      await assert.rejects(lock.extend(10_000), LockExpiredError);
      assert.equal(lock.remainingMs(), 0, "a lock a majority no longer holds has no validity");
      assert.equal(lock.validUntilMs, Number.NEGATIVE_INFINITY);
      await assert.rejects(lock.release(), LockExpiredError);

      // Inside using: the routine's own extension finds it gone.
      let abortedAfterExtend: boolean | undefined;
      await assert.rejects(
        holder.using(["job"], 10_000, async (signal, held) => {
          for (const i of [2, 3, 4]) await cluster().client(i).del("job");
          await assert.rejects(held.extend(10_000), LockExpiredError);
          abortedAfterExtend = signal.aborted;
        }),
        LockLostError,
      );
      assert.equal(abortedAfterExtend, true, "the signal aborts as the extension fails, not later");
    } finally {
      await holder.close();
    }
  });

  it("the routine's signal reads as aborted once the validity is down to the margin, though no timer could run", async () => {
    const holder = new Redlock(cluster().urls);
    try {
      let aborted: boolean | undefined;
      let thrown: unknown;
      await assert.rejects(
        holder.using(["job"], 500, async (signal, lock) => {
          // Holds the event loop past the validity (as a routine computing
          // between its checks would, or a stall elsewhere): neither the
          // extension nor the deadline timer can run meanwhile.
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 700);
          assert.equal(lock.remainingMs(), 0);
          aborted = signal.aborted;
          try {
            signal.throwIfAborted();
          } catch (error) {
            thrown = error;
          }
        }),
        LockLostError,
      );
      assert.equal(aborted, true, "signal.aborted said go on after the validity ended");
      assert.ok(thrown instanceof LockLostError, `throwIfAborted threw ${String(thrown)}`);
    } finally {
      await holder.close();
    }
  });

  it("a routine that holds the event loop past the validity and never reads its signal: using rejects with LockLostError, not the release's error", async () => {
    const holder = new Redlock(cluster().urls);
    try {
      await assert.rejects(
        holder.using(["overrun"], 500, async () => {
          // Neither the extension nor the deadline timer can run meanwhile;
          // the result it returns was computed without the lock.
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 700);
          return "done";
        }),
        (error: unknown) =>
          error instanceof LockLostError && /extensions failed|ran out/.test(error.message),
      );
    } finally {
      await holder.close();
    }
  });

  it("a routine that returns inside the margin, validity left, and one that released its own lock: using returns their results", async () => {
    // Margin: two node timeouts (1,002 ms) against a quarter of the TTL (1,000 ms).
    const holder = new Redlock(cluster().urls, { nodeTimeoutMs: 500 });
    try {
      const inMargin = await holder.using(["in-margin"], 4_000, async (_signal, lock) => {
        // Holds the event loop (no timer runs) until inside the margin, with
        // time left for the release: the work was done under the lock.
        while (lock.remainingMs() > 700)
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
        return "done";
      });
      assert.equal(inMargin, "done");
      const released = await holder.using(["released"], 4_000, async (_signal, lock) => {
        await lock.release();
        return "done";
      });
      assert.equal(released, "done");
    } finally {
      await holder.close();
    }
  });

  it("a routine that releases its own lock and goes on past the next extension's time: not lost, using returns its result", async () => {
    const holder = new Redlock(cluster().urls, { nodeTimeoutMs: 200 });
    try {
      let aborted: unknown;
      const result = await holder.using(["released-early"], 1_000, async (signal, lock) => {
        signal.addEventListener("abort", () => {
          aborted = signal.reason;
        });
        await lock.release();
        // Past the extension threshold (half the TTL) and the whole TTL:
        // the keep-alive must not take the release for a loss.
        await sleep(1_300);
        assert.equal(signal.aborted, false, "the signal aborted after the routine's own release");
        return "done";
      });
      assert.equal(result, "done");
      assert.equal(aborted, undefined, `aborted with ${aborted}`);
    } finally {
      await holder.close();
    }
  });

  it("close() while a routine runs: its signal aborts at once with LockLostError (cause ClosedError), and no keep-alive timer outlives close()", async () => {
    const holder = new Redlock(cluster().urls, { nodeTimeoutMs: 200 });
    let resolveStarted!: () => void;
    const started = new Promise<void>((resolve) => {
      resolveStarted = resolve;
    });
    let routineSignal: AbortSignal | undefined;
    const running = holder.using(["closing"], 10_000, async (signal) => {
      routineSignal = signal;
      resolveStarted();
      await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
      return "ended";
    });
    const outcome = running.then(
      () => undefined,
      (error: unknown) => error,
    );
    await started;
    await holder.close();
    // Told by the time close() resolves, not near the end of the 10 s TTL.
    assert.equal(routineSignal!.aborted, true, "the routine was not told when close() resolved");
    const error = await outcome;
    assert.ok(error instanceof LockLostError, String(error));
    assert.equal(
      (error.cause as { code?: string } | undefined)?.code,
      "ERR_CLOSED",
      String(error.cause),
    );
  });

  it("close() called as using()'s lock is granted (from an onEvent hook): the routine does not run, and using rejects with ClosedError", async () => {
    // Before, the keep-alive was registered after close() had abandoned
    // the others: the routine ran on a closed instance with a signal that
    // never aborted, its timers alive after close() resolved.
    let closing: Promise<void> | undefined;
    const holder: Redlock = new Redlock(cluster().urls, {
      nodeTimeoutMs: 200,
      onEvent: (event) => {
        if (event.type === "acquire" && event.outcome === "ok") closing = holder.close();
      },
    });
    let ran = false;
    await assert.rejects(
      holder.using(["raced"], 2_000, async () => {
        ran = true;
      }),
      { code: "ERR_CLOSED" },
    );
    assert.equal(ran, false, "the routine ran after close()");
    await closing;
  });

  it("a TTL short next to the node timeout is extended a quarter TTL apart, not back to back", async () => {
    // TTL 60 ms, node timeout 50 ms: the threshold an extension needs
    // (the margin plus a node timeout) is above what one extension gives;
    // the threshold is held at three quarters of the TTL instead.
    const holder = new Redlock(cluster().urls, { nodeTimeoutMs: 50 });
    try {
      const calls = async () => {
        const text = await cluster().client(0).info("commandstats");
        return (
          Number(/cmdstat_evalsha:calls=(\d+)/.exec(text)?.[1] ?? 0) +
          Number(/cmdstat_eval:calls=(\d+)/.exec(text)?.[1] ?? 0)
        );
      };
      const before = await calls();
      const routineMs = 600;
      await holder
        .using(["short"], 60, async (signal) => {
          const end = performance.now() + routineMs;
          while (performance.now() < end && !signal.aborted) await sleep(10);
        })
        .catch((error: unknown) => assert.ok(error instanceof LockLostError, String(error)));
      const made = (await calls()) - before;
      // Validity 57 ms (drift), extended at 42 ms left: one extension per
      // 15 ms or so, at most one per 10 ms, plus the acquire and the
      // release; back to back, one node took hundreds of calls in this time.
      const most = Math.ceil(routineMs / 10) + 2;
      assert.ok(
        made <= most,
        `${made} script calls on node 0 in ${routineMs} ms (at most ${most})`,
      );
    } finally {
      await holder.close();
    }
  });

  it("refuses bad options to extend and using with a typed error, before any call", async () => {
    const holder = new Redlock(cluster().urls);
    try {
      const lock = await holder.acquire(["job"], 5_000);
      for (const options of [null, "x", { signal: "x" }, { signal: {} }, { signa: undefined }]) {
        await assert.rejects(
          lock.extend(1_000, options as never),
          (error: unknown) => error instanceof InvalidArgumentError,
          `extend options ${JSON.stringify(options)}`,
        );
      }
      assert.ok(lock.remainingMs() > 1_000, "a refused call changed nothing");
      await lock.release();
      await assert.rejects(
        holder.using(["job"], 1_000, async () => 1, null as never),
        InvalidArgumentError,
      );
      assert.deepEqual(await cluster().keysByNode(), [[], [], [], [], []]);
    } finally {
      await holder.close();
    }
  });

  it("refuses a bad threshold and a missing routine", async () => {
    const holder = new Redlock(cluster().urls);
    try {
      await assert.rejects(
        holder.using(["job"], 1_000, async () => 1, { extendThresholdMs: 1_000 }),
        {
          code: "ERR_INVALID_ARGUMENT",
        },
      );
      // TTL 1 s, node timeout 50 ms: the give-up margin is 2 × 50 + 2 ms,
      // and an extension needs one node timeout more to finish before it.
      await assert.rejects(
        holder.using(["job"], 1_000, async () => 1, { extendThresholdMs: 152 }),
        /extendThresholdMs.*153/s,
      );
      assert.equal(
        await holder.using(["job"], 1_000, async () => 1, { extendThresholdMs: 153 }),
        1,
      );
      // At most what an extension gives (988 ms after the drift allowance)
      // less a quarter of the TTL: extensions a quarter TTL apart.
      await assert.rejects(
        holder.using(["job"], 1_000, async () => 1, { extendThresholdMs: 739 }),
        /extendThresholdMs.*153, 738/s,
      );
      await assert.rejects(holder.using(["job"], 1_000, undefined as never), {
        code: "ERR_INVALID_ARGUMENT",
      });
      assert.deepEqual(await cluster().keysByNode(), [[], [], [], [], []]);
    } finally {
      await holder.close();
    }
  });
});
