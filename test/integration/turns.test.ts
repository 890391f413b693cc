import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { Redis } from "ioredis";
import NodeRedlock from "redlock";
import {
  type Clock,
  ClosedError,
  type Lock,
  Redlock,
  ResourceLockedError,
} from "../../src/index.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";
import { noTimers, until } from "../helpers/no-timers.js";
import { sleep } from "../helpers/sleep.js";

/**
 * An instance's turn (src/lock/turns.ts): for `turnMs` from the grant that
 * began it, an instance that releases a key and takes it again finds it
 * free instead of reserved for another instance's waiter; after the turn,
 * or when it does not take the key again, the waiter is handed the key.
 * The waiters here run on a clock without fallback polls: they can only
 * get the lock by being named heir.
 */
/**
 * A caller that may wait, so that a reservation for someone else counts as
 * held for it (a try-lock, `retries: 0`, takes a free key however it is
 * reserved), but gives up after its second refusal.
 */
const waitsBriefly = { retry: { retries: 1, delayMs: 1, jitterMs: 0 } };
/**
 * Not about node timeouts: the holders' calls are not on the 50 ms default,
 * which a loaded machine can exceed ("no reply within 50 ms" failed a
 * retake here).
 */
const patient = { nodeTimeoutMs: 500 } as const;

/** A monotonic clock on which no timer fires (until aborted). */
const timersNeverFire: Clock = {
  now: () => performance.now(),
  sleep: (_ms, signal) =>
    new Promise((_, reject) => {
      signal?.addEventListener("abort", () => reject(signal.reason), { once: true });
    }),
};

describe("an instance's turn on a contended key", () => {
  let cluster: TestCluster;

  before(async () => {
    cluster = await startCluster({ nodeCount: 5 });
  });
  after(() => cluster.stop());
  beforeEach(() => cluster.flushAll());

  /** A waiter of another instance, queued on every node and listening for its notice. */
  async function queuedWaiter(resource: string) {
    // Its place in the nodes' queues, never renewed by a poll, lasts 4
    // retry delays: 20 s, not the default's 1.2 s, which a slow setup on a
    // loaded machine could outlast.
    const redlock = new Redlock(cluster.urls, {
      clock: noTimers,
      nodeTimeoutMs: 1_000,
      turnMs: 0,
      retry: { retries: 10, delayMs: 5_000, jitterMs: 0 },
    });
    const waiting = redlock.acquire([resource], 10_000, { signal: AbortSignal.timeout(20_000) });
    await until("the waiter to queue", () => redlock.waitingCount === 1);
    await until("the waiter to listen on every node", async () =>
      (await cluster.heirSubscribers()).every((n) => n === 1),
    );
    return { redlock, waiting };
  }

  it("within its turn an instance takes back the key it released in one round, and a release it does not follow up passes the turn", async () => {
    // A turn far longer than the test: every retake below is within it.
    const holder = new Redlock(cluster.urls, { ...patient, turnMs: 10_000 });
    let lock: Lock = await holder.acquire(["k"], 10_000);
    const waiter = await queuedWaiter("k");
    try {
      for (let i = 0; i < 5; i++) {
        const before = await cluster.evalshaCalls();
        await lock.release();
        const next = await holder.acquire(["k"], 10_000, { retry: { retries: 0 } });
        assert.ok(next.fence! > lock.fence!, "tokens rise with every retake");
        lock = next;
        // The nodes not needed for the majority answer a moment later.
        await until(
          `retake ${i}: every node to answer`,
          async () => (await cluster.evalshaCalls()) - before >= 10,
        );
        await sleep(5); // a pass, if any, would follow on the next tick
        assert.equal(
          (await cluster.evalshaCalls()) - before,
          10,
          `retake ${i}: one release and one acquire call per node, nothing reserved or passed`,
        );
        const heirs = await cluster.onAll((c) => c.exists("redquorum:heir:k"));
        assert.deepEqual(heirs, [0, 0, 0, 0, 0], `retake ${i}: no node reserved the key`);
        assert.equal(waiter.redlock.waitingCount, 1, `retake ${i}: the waiter still waits`);
      }
      // Released and not taken back: the turn passes to the waiter, whose
      // clock has no fallback poll, so only the notice can wake it.
      await lock.release();
      const got = await waiter.waiting;
      assert.ok(got.fence! > lock.fence!, "tokens rise from holder to heir");
      await got.release();
    } finally {
      await Promise.all([holder.close(), waiter.redlock.close()]);
    }
  });

  it("a key kept within a turn is refused to other redquorum instances' callers that wait, not to its own or to node-redlock", async () => {
    // The holder's timers never fire, so its turn is never passed on: what
    // the kept release left on the nodes stays until it lapses.
    const holder = new Redlock(cluster.urls, {
      ...patient,
      turnMs: 10_000,
      clock: timersNeverFire,
    });
    const other = new Redlock(cluster.urls, { ...patient, ...waitsBriefly });
    const clients = cluster.urls.map((url) => new Redis(url));
    const theirs = new NodeRedlock(clients, { retryCount: 0 });
    let lock: Lock = await holder.acquire(["o"], 10_000);
    const waiter = await queuedWaiter("o");
    try {
      // The kept reservation lasts limits.turnReservationMs: if this process
      // stalled past it before reading, release and take the key again.
      let keptFor: string | undefined;
      for (let i = 0; i < 20 && keptFor === undefined; i++) {
        await lock.release();
        const heirs = await cluster.onAll((c) => c.get("redquorum:heir:o"));
        if (heirs.every((heir) => heir !== null && heir === heirs[0])) keptFor = heirs[0]!;
        else lock = await holder.acquire(["o"], 10_000, { retry: { retries: 0 } });
      }
      assert.ok(keptFor !== undefined, "a kept release reserves the key on every node");
      assert.doesNotMatch(keptFor, /:/, "for the instance, not one of its waiters");
      // Made long, so that the rest does not race its lapse.
      await cluster.onAll((c) => c.set("redquorum:heir:o", keptFor!, "PX", 60_000));
      await assert.rejects(other.acquire(["o"], 10_000), ResourceLockedError);
      const foreign = await theirs.acquire(["o"], 5_000);
      await foreign.release();
      // node-redlock's release resolves on a majority; the rest follow.
      await until("node-redlock's release to reach every node", async () =>
        (await cluster.onAll((c) => c.exists("o"))).every((n) => n === 0),
      );
      lock = await holder.acquire(["o"], 10_000, { retry: { retries: 0 } });
      // Granted by a majority; the last node answers a moment later.
      await until("the retake to take the reservation up on every node", async () =>
        (await cluster.onAll((c) => c.exists("redquorum:heir:o"))).every((n) => n === 0),
      );
      assert.equal(waiter.redlock.waitingCount, 1, "the waiter still waits");
    } finally {
      await Promise.all([holder.close(), other.close(), waiter.redlock.close()]);
      for (const client of clients) client.disconnect();
    }
  });

  it("a turn ends turnMs after the grant that began it: that release hands the key to the waiter", async () => {
    const turnMs = 100;
    const holder = new Redlock(cluster.urls, { ...patient, turnMs });
    try {
      // The turn must begin after the waiter queued, or it may be over
      // before the first retake: the waiter queues behind a key set by hand,
      // deleted by hand (no release, so no notice), then the holder takes it.
      // A run that kept nothing (this process stalled past turnMs) is rerun.
      let kept: number[] = [];
      for (let run = 0; run < 10 && kept.length === 0; run++) {
        const key = `e${run}`;
        await cluster.onAll((c) => c.set(key, "by-hand", "PX", 60_000));
        const waiter = await queuedWaiter(key);
        try {
          await cluster.onAll((c) => c.del(key));
          const beganAfter = performance.now();
          let lock: Lock = await holder.acquire([key], 10_000, waitsBriefly);
          const beganBy = performance.now();
          kept = [];
          let handedOverBy: number | undefined;
          for (let i = 0; i < 100_000 && handedOverBy === undefined; i++) {
            const releasing = performance.now();
            await lock.release();
            const released = performance.now();
            try {
              lock = await holder.acquire([key], 10_000, waitsBriefly);
              kept.push(releasing);
            } catch (error) {
              assert.ok(error instanceof ResourceLockedError, `retake ${i}: ${error}`);
              handedOverBy = released;
            }
          }
          // The turn began at that grant (between beganAfter and beganBy):
          // a release kept the key only before turnMs had passed, and the
          // one that handed it over came after.
          for (const at of kept) assert.ok(at < beganBy + turnMs, `kept at +${at - beganBy} ms`);
          assert.ok(handedOverBy !== undefined && handedOverBy >= beganAfter + turnMs);
          const got = await waiter.waiting;
          await got.release();
        } finally {
          await waiter.redlock.close();
        }
      }
      assert.ok(kept.length > 0, "some run retook the key within its turn");
    } finally {
      await holder.close();
    }
  });

  it("two callers of one instance looping on the key let another instance's waiter in when the turn ends", async () => {
    const holder = new Redlock(cluster.urls, { ...patient, turnMs: 50 });
    const first = await holder.acquire(["two"], 10_000);
    const waiter = await queuedWaiter("two");
    let stop = false;
    let grants = 0;
    // Each caller takes the key, releases it and takes it again, parking
    // behind the other one as it must; the waiter has no fallback poll.
    const loop = async (held: Lock | undefined) => {
      while (!stop) {
        const lock = held ?? (await holder.acquire(["two"], 10_000));
        held = undefined;
        grants++;
        await lock.release();
      }
    };
    const loops = [loop(first), loop(undefined)];
    try {
      const got = await waiter.waiting;
      stop = true;
      assert.ok(grants >= 1, "the instance's callers took the key before the waiter");
      await got.release();
      await Promise.all(loops);
    } finally {
      stop = true;
      await Promise.allSettled(loops);
      await Promise.all([holder.close(), waiter.redlock.close()]);
    }
  });

  it("a release within a turn followed by close() still hands the key to the waiter", async () => {
    const holder = new Redlock(cluster.urls, { ...patient, turnMs: 10_000 });
    const lock = await holder.acquire(["c"], 10_000);
    const waiter = await queuedWaiter("c");
    try {
      await lock.release(); // kept: its pass is due on the next tick
      await holder.close(); // before that tick
      const got = await waiter.waiting;
      await got.release();
    } finally {
      await Promise.all([holder.close(), waiter.redlock.close()]);
    }
  });

  it("a release within a turn leaves a key reserved for another waiter reserved for that waiter", async () => {
    const holder = new Redlock(cluster.urls, { ...patient, turnMs: 10_000 });
    const lock = await holder.acquire(["o"], 10_000);
    const waiter = await queuedWaiter("o");
    waiter.waiting.catch(() => {}); // it never gets the key here: close() ends its wait
    try {
      // A reservation for a waiter of a third instance, planted while the
      // key is held (as a multi-key waiter's pass can leave one,
      // heir-queue.ts): the kept release must not take it over for the
      // holder's instance, nor its pass hand it to the queued waiter.
      await cluster.onAll((c) => c.set("redquorum:heir:o", "third:1", "PX", 10_000));
      await lock.release();
      await until("every node to run the release", async () =>
        (await cluster.onAll((c) => c.exists("o"))).every((n) => n === 0),
      );
      await sleep(5); // the turn's pass, if any, runs on the next tick
      assert.deepEqual(await cluster.onAll((c) => c.get("redquorum:heir:o")), [
        "third:1",
        "third:1",
        "third:1",
        "third:1",
        "third:1",
      ]);
    } finally {
      await Promise.all([holder.close(), waiter.redlock.close()]);
    }
  });

  it("an acquire of ours that fails after a kept release still passes the turn", async () => {
    const holder = new Redlock(cluster.urls, { ...patient, turnMs: 10_000 });
    let lock: Lock = await holder.acquire(["f"], 10_000);
    const waiter = await queuedWaiter("f");
    try {
      // The try-lock starts at once (holding the pass back) and is aborted
      // while its round is out; if the round wins first, go again.
      let aborted = false;
      for (let i = 0; i < 50 && !aborted; i++) {
        await lock.release();
        const controller = new AbortController();
        const trying = holder.acquire(["f"], 10_000, {
          retry: { retries: 0 },
          signal: controller.signal,
        });
        setImmediate(() => controller.abort());
        try {
          lock = await trying;
        } catch (error) {
          assert.equal((error as Error).name, "AbortError", `try ${i}: ${error}`);
          aborted = true;
        }
      }
      assert.ok(aborted, "some try-lock was aborted while its round was out");
      const got = await waiter.waiting;
      await got.release();
    } finally {
      await Promise.all([holder.close(), waiter.redlock.close()]);
    }
  });

  it("close() while an attempt of ours holds the pass: the attempt fails and the waiter still gets the key", async () => {
    // Long per-node bounds: the attempt waits out the pause instead of failing on its own.
    const holder = new Redlock(cluster.urls, { turnMs: 10_000, nodeTimeoutMs: 1_000 });
    const lock = await holder.acquire(["h"], 10_000);
    const waiter = await queuedWaiter("h");
    try {
      await lock.release(); // kept: its pass is due on the next tick
      for (let i = 0; i < cluster.urls.length; i++) cluster.cluster.pause(i);
      // Started before that tick, it holds the pass; its round waits on the paused nodes.
      const following = holder.acquire(["h"], 10_000, { retry: { retries: 0 } });
      await sleep(20);
      const closing = holder.close();
      for (let i = 0; i < cluster.urls.length; i++) cluster.cluster.resume(i);
      await assert.rejects(following, ClosedError);
      await closing;
      const got = await waiter.waiting;
      await got.release();
    } finally {
      await cluster.restoreAll({ keepData: true });
      await Promise.all([holder.close(), waiter.redlock.close()]);
    }
  });

  it("two callers of one instance handing the lock back and forth really release it after a run of handoffs", async () => {
    // No turn: only the run of in-process handoffs can keep the key from
    // the waiter, and it ends after limits.handoffRunMin (16) in a row.
    const holder = new Redlock(cluster.urls, { ...patient, turnMs: 0 });
    const first = await holder.acquire(["pp"], 10_000);
    const waiter = await queuedWaiter("pp");
    let stop = false;
    let grants = 0;
    // Held a moment, so that the other caller is parked by then: every
    // release is a handoff to it.
    const loop = async (held: Lock | undefined) => {
      while (!stop) {
        const lock = held ?? (await holder.acquire(["pp"], 10_000));
        held = undefined;
        grants++;
        await sleep(1);
        await lock.release();
      }
    };
    const loops = [loop(first), loop(undefined)];
    try {
      for (let round = 0; round < 5; round++) {
        let waiting = waiter.waiting;
        if (round > 0) {
          // Counted from its park (it queued on the nodes just before), not
          // from its call: on a loaded machine its first round took long
          // enough for 20 and more handoffs before it was even queued.
          waiting = waiter.redlock.acquire(["pp"], 10_000, { signal: AbortSignal.timeout(20_000) });
          let settled = false;
          void waiting.then(
            () => (settled = true),
            () => (settled = true),
          );
          await until("the waiter to park", () => settled || waiter.redlock.waitingCount === 1);
        }
        const before = grants;
        const got = await waiting;
        // 16 handoffs, the grant under way when it queued, and slack for a
        // run that doubled (to 32) while no other instance waited between rounds.
        const meanwhile = grants - before;
        assert.ok(
          meanwhile <= 40,
          `round ${round}: the instance took the key ${meanwhile} times first`,
        );
        await got.release();
      }
      stop = true;
      await Promise.all(loops);
    } finally {
      stop = true;
      await Promise.allSettled(loops);
      await Promise.all([holder.close(), waiter.redlock.close()]);
    }
  });

  it("a run of handoffs grown long while nobody else waited ends within runMin handoffs once another instance's waiter queues", async () => {
    // Four callers of one instance, each holding a moment: nearly every
    // release is a handoff, and with nobody else waiting each run is twice
    // as long as the last (up to limits.handoffRunMax, 1024): by 1,200
    // grants the runs are 1,024 long. A waiter of another instance heads
    // the nodes' queues after a handoff or two (the callers register anew
    // at each refusal), and the handoff's reply says so: the run then ends
    // after limits.handoffRunMin (16), where it used to go on for up to
    // 1,024 handoffs.
    const holder = new Redlock(cluster.urls, { ...patient, turnMs: 0 });
    let stop = false;
    let grants = 0;
    let grown: () => void = () => {};
    const longRuns = new Promise<void>((resolve) => {
      grown = resolve;
    });
    const loop = async () => {
      while (!stop) {
        const lock = await holder.acquire(["grown"], 10_000);
        if (++grants === 1_200) grown();
        await sleep(1); // the others are parked by then: the release is a handoff
        await lock.release();
      }
    };
    const loops = [loop(), loop(), loop(), loop()];
    const other = new Redlock(cluster.urls, { ...patient, turnMs: 0 });
    try {
      // Its first contact with the nodes before it counts: on a loaded
      // machine that contact took long enough for dozens of handoffs (the
      // test before this one counts from its waiter's park for that reason).
      await other.release(await other.acquire(["grown-warm-up"], 10_000));
      await longRuns;
      const waiting = other.acquire(["grown"], 10_000, {
        retry: { retries: 10_000, delayMs: 10, jitterMs: 5 },
        signal: AbortSignal.timeout(60_000),
      });
      let settled = false;
      void waiting.then(
        () => (settled = true),
        () => (settled = true),
      );
      // Counted from its park: it queued on the nodes just before.
      await until("the waiter to park", () => settled || other.waitingCount === 1);
      const before = grants;
      const got = await waiting;
      const meanwhile = grants - before;
      await got.release();
      // 16 handoffs, the one or two before the waiter heads the queues, and
      // slack for the grants under way: far below a run of 1,024.
      assert.ok(meanwhile <= 40, `the instance took the key ${meanwhile} times first`);
    } finally {
      stop = true;
      await Promise.allSettled(loops);
      await Promise.all([holder.close(), other.close()]);
    }
  });

  it("with turnMs 0 every release hands the key to the waiter", async () => {
    const holder = new Redlock(cluster.urls, { ...patient, turnMs: 0 });
    const lock = await holder.acquire(["z"], 10_000);
    const waiter = await queuedWaiter("z");
    try {
      await lock.release();
      await assert.rejects(holder.acquire(["z"], 10_000, waitsBriefly), ResourceLockedError);
      const got = await waiter.waiting;
      await got.release();
    } finally {
      await Promise.all([holder.close(), waiter.redlock.close()]);
    }
  });
});
