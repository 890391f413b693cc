import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import NodeRedlock from "redlock";
import Redlock, {
  ExecutionError,
  type ExecutionStats,
  Lock,
  type RedlockAbortSignal,
  ResourceLockedError,
} from "../../src/compat/node-redlock.js";
import {
  ClosedError,
  Redlock as CoreRedlock,
  InvalidArgumentError,
  LocalCluster,
  LockLostError,
  NodeError,
  type RedquorumEvent,
} from "../../src/index.js";
import { sleep } from "../helpers/sleep.js";
import { notAboutTimeouts } from "../helpers/timeouts.js";

/** Resolves once `client` has ended (QUIT answered, connection closed); fails if it does not within 5 s. */
function ended(client: Redis): Promise<void> {
  if (client.status === "end") return Promise.resolve();
  return new Promise((resolve, reject) => {
    const bound = setTimeout(() => reject(new Error(`client still ${client.status}`)), 5_000);
    client.once("end", () => {
      clearTimeout(bound);
      resolve();
    });
  });
}

/** Resolves when `signal` aborts (with `Date.now()` then); fails if it does not within `boundMs`. */
function aborted(signal: AbortSignal, boundMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const bound = setTimeout(() => reject(new Error("no abort")), boundMs);
    signal.addEventListener("abort", () => {
      clearTimeout(bound);
      resolve(Date.now());
    });
  });
}

/** What these tests use of node-redlock v5 itself (its published types do not resolve here). */
interface NodeRedlockApi {
  acquire(resources: string[], duration: number): Promise<{ release(): Promise<unknown> }>;
  quit(): Promise<void>;
}

/** node-redlock v5 itself, on the caller's ioredis clients. */
function nodeRedlock(clients: Redis[], settings: object): NodeRedlockApi {
  return new NodeRedlock(clients, settings) as unknown as NodeRedlockApi;
}

/**
 * `redquorum/node-redlock`: node-redlock v5's own README programs, run
 * unchanged but for the import line, on real redis-servers; and node-redlock
 * itself beside the drop-in on the same keys.
 */
describe("the drop-in on nodes that all serve from a lost: marker", () => {
  it("takes them as they are (it has no fencing): no init error at each lock call", async () => {
    const cluster = await LocalCluster.start({ nodeCount: 3, persistence: "none", init: false });
    const core = new CoreRedlock(cluster.urls, {
      ...notAboutTimeouts,
      maxTtlMs: 1_000,
      fencing: false,
    });
    const inspect = cluster.urls.map((url) => new Redis(url));
    const drop = new Redlock(
      cluster.urls.map((url) => new Redis(url)),
      {
        retryCount: 0,
        redquorum: { ...notAboutTimeouts, recheckIntervalMs: 200, maxTtlMs: 1_000 },
      },
    );
    const errors: unknown[] = [];
    drop.on("error", (error) => errors.push(error));
    try {
      // A lock call before init meets unmarked nodes: lost: markers, a
      // quarantine; once it is over they serve locks as they are.
      const deadline = performance.now() + 15_000;
      for (;;) {
        const lock = await core
          .acquire(["first"], 500, { retry: { retries: 0 } })
          .catch(() => undefined);
        if (lock) {
          await lock.release();
          break;
        }
        assert.ok(performance.now() < deadline, "the quarantine never ended");
        await sleep(100);
      }
      // A majority granted; the last node's quarantine may have started
      // later (its first contact slower) and run on: init waits for none.
      while (
        (await Promise.all(inspect.map((c) => c.exists("redquorum:quarantine")))).some(Boolean)
      ) {
        assert.ok(performance.now() < deadline, "a quarantine never ended");
        await sleep(100);
      }
      const report = await core.init();
      assert.deepEqual(
        report.map((r) => r.action),
        ["none", "none", "none"],
        JSON.stringify(report),
      );
      for (let i = 0; i < 3; i++) {
        await (await drop.acquire([`lost-${i}`], 500)).release();
        await sleep(300); // past recheckIntervalMs: an init not done would run again
      }
      assert.deepEqual(errors, []);
    } finally {
      for (const client of inspect) client.disconnect();
      await drop.quit();
      await core.close();
      await cluster.stop();
    }
  });
});

describe("redquorum/node-redlock, the drop-in for node-redlock v5", () => {
  let cluster: LocalCluster;
  /** Every client a test made, disconnected at the end whatever happened. */
  const made: Redis[] = [];

  /** One ioredis client per node, as a node-redlock program makes them. */
  const clients = () =>
    cluster.urls.map((url) => {
      const client = new Redis(url);
      // The last test kills a node: its reconnects are not this file's news.
      client.on("error", () => {});
      made.push(client);
      return client;
    });

  /** An inspection client's view of `key` on every node. */
  const valuesOf = async (key: string) => {
    const inspect = clients();
    try {
      return await Promise.all(inspect.map((client) => client.get(key)));
    } finally {
      for (const client of inspect) client.disconnect();
    }
  };

  before(async () => {
    // Nodes redquorum never used (no marker): the drop-in's init() marks them.
    cluster = await LocalCluster.start({ nodeCount: 3, persistence: "none", init: false });
  });
  after(async () => {
    for (const client of made) client.disconnect();
    await cluster.stop();
  });

  it("README: acquire, extend, release with node-redlock's settings; the first call marked the new nodes", async () => {
    assert.deepEqual(await valuesOf("redquorum:marker"), [null, null, null]);
    const [redisA, redisB, redisC] = clients();
    const redlock = new Redlock([redisA!, redisB!, redisC!], {
      driftFactor: 0.01,
      retryCount: 10,
      retryDelay: 200,
      retryJitter: 200,
      automaticExtensionThreshold: 500,
      redquorum: notAboutTimeouts,
    });
    const startedAt = Date.now();
    let lock = await redlock.acquire(["a"], 5000);
    const first = lock;
    try {
      assert.deepEqual(await valuesOf("a"), [lock.value, lock.value, lock.value]);
      assert.deepEqual(lock.resources, ["a"]);
      // A wall-clock time a Date can show, within the duration less the drift.
      assert.ok(!Number.isNaN(new Date(lock.expiration).getTime()));
      assert.ok(lock.expiration > Date.now(), `${lock.expiration} is past`);
      assert.ok(lock.expiration <= Date.now() + 5000 - 52, `${lock.expiration - startedAt}`);
      assert.equal(lock.attempts.length, 1);
      const stats: ExecutionStats = await lock.attempts[0]!;
      assert.equal(stats.membershipSize, 3);
      assert.equal(stats.quorumSize, 2);
      assert.deepEqual([...stats.votesFor], [redisA, redisB, redisC]);
      assert.equal(stats.votesAgainst.size, 0);
      lock = await lock.extend(5000);
      assert.notEqual(lock, first, "extend resolves to a new Lock");
      assert.equal(first.expiration, 0, "the lock extend replaced reads 0, as in node-redlock");
      assert.ok(lock.expiration > Date.now());
      assert.equal(lock.value, first.value);
    } finally {
      await lock.release();
    }
    assert.equal(lock.expiration, 0);
    assert.deepEqual(await valuesOf("a"), [null, null, null]);
    assert.deepEqual(await valuesOf("redquorum:marker"), ["1", "1", "1"]);
    await redlock.quit();
    // node-redlock's quit() quits the clients it was given.
    await Promise.all([redisA!, redisB!, redisC!].map(ended));
  });

  it("README: using() extends the lock while the routine runs longer than the duration", async () => {
    const extensions: RedquorumEvent[] = [];
    const redlock = new Redlock(clients(), {
      redquorum: {
        ...notAboutTimeouts,
        onEvent: (event) => event.type === "extend" && extensions.push(event),
      },
    });
    try {
      const duration = 1000;
      const result = await redlock.using(["u"], duration, async (signal) => {
        // 2.5 durations: the lock lives only if it was extended.
        for (let i = 0; i < 5; i++) {
          await sleep(duration / 2);
          if (signal.aborted) throw signal.error;
        }
        const [held] = await valuesOf("u");
        assert.ok(held, "the key is still held at the routine's end");
        return "done";
      });
      assert.equal(result, "done");
      assert.ok(extensions.length >= 2, `${extensions.length} extensions`);
      assert.ok(extensions.every((event) => "outcome" in event && event.outcome === "ok"));
      assert.deepEqual(await valuesOf("u"), [null, null, null], "released at the end");
    } finally {
      await redlock.quit();
    }
  });

  // The README's way (`if (signal.aborted) throw signal.error`), and
  // `signal.throwIfAborted()`, which throws the signal's reason: using
  // tells both as node-redlock's signal.error.
  const endings: Array<[string, (signal: RedlockAbortSignal) => void]> = [
    [
      "README: a routine that throws signal.error",
      (signal) => {
        if (signal.aborted) throw signal.error;
      },
    ],
    ["a routine that calls signal.throwIfAborted()", (signal) => signal.throwIfAborted()],
  ];
  for (const [name, end] of endings) {
    it(`using(): ${name} when the lock is lost makes using reject with signal.error, an ExecutionError`, async () => {
      const redlock = new Redlock(clients());
      const cleaner = clients();
      const resource = `lost:${name}`;
      try {
        const duration = 1000;
        let seen: Error | undefined;
        const error = await redlock
          .using([resource], duration, async (signal) => {
            // Someone else takes the keys away (FLUSHALL, a failover, an admin).
            await Promise.all(cleaner.map((client) => client.del(resource)));
            // The next extension finds them gone: bounded wait for the abort.
            await aborted(signal, 4 * duration);
            assert.equal(signal.aborted, true);
            seen = signal.error;
            end(signal);
            return "not reached";
          })
          .then(
            () => assert.fail("using resolved"),
            (e: unknown) => e,
          );
        assert.ok(error instanceof ExecutionError, String(error));
        assert.equal(error, seen, "using rejects with the signal's error");
        assert.ok(error.cause instanceof LockLostError, String(error.cause));
      } finally {
        await redlock.quit();
      }
    });
  }

  it("using(): a call's driftFactor gives up the lock within the validity that drift gives", async () => {
    const redlock = new Redlock(clients());
    const duration = 4000;
    const driftFactor = 0.3;
    // The validity a grant made after this moment can have with that drift
    // (node-redlock's: less the drift and 2 ms): the signal must abort before it ends.
    const startedAt = Date.now();
    const validUntil = startedAt + duration - duration * driftFactor - 2;
    let abortedAt: number | undefined;
    try {
      const error = await redlock
        .using(["drift"], duration, { driftFactor }, async (signal) => {
          // A majority stops answering: every extension fails.
          cluster.pause(1);
          cluster.pause(2);
          try {
            abortedAt = await aborted(signal, 2 * duration);
          } finally {
            cluster.resume(1);
            cluster.resume(2);
          }
          throw signal.error;
        })
        .catch((e: unknown) => e);
      assert.ok(error instanceof ExecutionError, String(error));
      assert.ok(abortedAt !== undefined);
      // The instance's drift (0.01) would give up ~0.29 * duration later, past this validity.
      assert.ok(
        abortedAt < validUntil,
        `aborted ${abortedAt - startedAt} ms after the call; that drift's validity ends within ${validUntil - startedAt} ms`,
      );
    } finally {
      if (cluster.node(1).state === "paused") cluster.resume(1);
      if (cluster.node(2).state === "paused") cluster.resume(2);
      await redlock.quit();
    }
  });

  it("using(): a node that fails its grant or an extension goes to the \"error\" event, as acquire's and extend's do", async () => {
    const redlock = new Redlock(clients());
    const stalled = cluster.urls[2]!.replace("redis://", "");
    const nodeErrors: NodeError[] = [];
    let heard: () => void = () => {};
    redlock.on("error", (error) => {
      if (error instanceof NodeError && error.endpoint === stalled) {
        nodeErrors.push(error);
        if (nodeErrors.length >= 2) heard();
      }
    });
    const duration = 1000;
    try {
      // Up for the init, then stopped: the grant and each extension get 2 of 3.
      await redlock.acquire(["events-warm"], duration).then((lock) => lock.release());
      cluster.pause(2);
      const result = await redlock.using(["events"], duration, async (signal) => {
        // The grant's failed node, then an extension's (the lock is extended
        // once half the duration is left): a bounded wait for both.
        await new Promise<void>((resolve) => {
          const bound = setTimeout(resolve, 3 * duration);
          heard = () => {
            clearTimeout(bound);
            resolve();
          };
          if (nodeErrors.length >= 2) heard();
        });
        return signal.aborted;
      });
      assert.equal(result, false, "2 of 3 keep the lock");
      assert.ok(nodeErrors.length >= 2, `${nodeErrors.length} NodeError(s) for the stopped node`);
    } finally {
      if (cluster.node(2).state === "paused") cluster.resume(2);
      await redlock.quit();
    }
  });

  it("ResourceLockedError is made with node-redlock's constructor, new ResourceLockedError(message)", async () => {
    const message = "The operation was applied to: 0 of the 1 requested resources.";
    const made = new ResourceLockedError(message);
    assert.equal(made.message, message);
    assert.equal(made.name, "ResourceLockedError");
    assert.equal(made.code, "ERR_RESOURCE_LOCKED");
    assert.ok(made instanceof ResourceLockedError);
    assert.ok(made instanceof Error);
  });

  it("lock.expiration set to 0 (node-redlock's way to invalidate a lock) reads back 0", async () => {
    const redlock = new Redlock(clients());
    try {
      const lock = await redlock.acquire(["exp0"], 5000);
      lock.expiration = 0;
      assert.equal(lock.expiration, 0);
      const past = Date.now() - 1000;
      const other = await redlock.acquire(["exp1"], 5000);
      other.expiration = past;
      assert.equal(other.expiration, past, "a past time reads back as given");
      // Raising it again has no effect.
      other.expiration = Date.now() + 60_000;
      assert.equal(other.expiration, past);
      await assert.rejects(lock.extend(5000), /already-expired/);
      await Promise.all([lock.release(), other.release()]);
    } finally {
      await redlock.quit();
    }
  });

  it("using(resources, duration, settings, routine): the 4-argument form takes the call's settings", async () => {
    const holder = new Redlock(clients());
    const redlock = new Redlock(clients(), { redquorum: notAboutTimeouts });
    try {
      const held = await holder.acquire(["four"], 10_000);
      let ran = false;
      const error = await redlock
        .using(["four"], 1000, { retryCount: 0 }, async () => {
          ran = true;
        })
        .catch((e: unknown) => e);
      assert.ok(error instanceof ExecutionError, String(error));
      assert.equal(error.attempts.length, 1, "retryCount 0: one attempt");
      assert.equal(ran, false);
      await held.release();
      const value = await redlock.using(["four"], 1000, { retryCount: 0 }, async (signal) => {
        assert.equal(signal.aborted, false);
        assert.equal((signal as { error?: Error }).error, undefined);
        return 42;
      });
      assert.equal(value, 42);
    } finally {
      await Promise.all([holder.quit(), redlock.quit()]);
    }
  });

  it("README: the retryCount 0 try-lock idiom says busy while held, and takes the lock once it is free", async () => {
    const holder = new Redlock(clients());
    const redlock = new Redlock(clients(), { redquorum: notAboutTimeouts });
    const tryLock = async (resource: string) => {
      try {
        return await redlock.acquire([resource], 5000, { retryCount: 0 });
      } catch {
        return null;
      }
    };
    try {
      const held = await holder.acquire(["t"], 10_000);
      assert.equal(await tryLock("t"), null, "busy while held");
      const error = await redlock.acquire(["t"], 5000, { retryCount: 0 }).catch((e: unknown) => e);
      assert.ok(error instanceof ExecutionError, String(error));
      assert.equal(error.attempts.length, 1);
      assert.ok(error.cause instanceof ResourceLockedError, String(error.cause));
      const stats = await error.attempts[0]!;
      assert.equal(stats.lockedCount, 3);
      await held.release();
      const lock = await tryLock("t");
      assert.ok(lock instanceof Lock, "free: the try-lock takes it");
      await lock.release();
    } finally {
      await Promise.all([holder.quit(), redlock.quit()]);
    }
  });

  it("retryCount N makes N + 1 attempts retryDelay apart; -1 retries until the lock is free", async () => {
    const holder = new Redlock(clients());
    const redlock = new Redlock(clients(), { retryDelay: 20, retryJitter: 10 });
    try {
      const held = await holder.acquire(["r"], 10_000);
      const error = await redlock.acquire(["r"], 5000, { retryCount: 3 }).catch((e: unknown) => e);
      assert.ok(error instanceof ExecutionError, String(error));
      assert.equal(error.attempts.length, 4);
      // Freed only once the unbounded waiter has failed some attempts.
      let failures = 0;
      const counting = new Redlock(clients(), { retryCount: -1, retryDelay: 20, retryJitter: 10 });
      counting.on("error", (e) => {
        if (e instanceof ResourceLockedError && ++failures === 5) void held.release();
      });
      try {
        const lock = await counting.acquire(["r"], 5000);
        assert.ok(lock.attempts.length > 5, `${lock.attempts.length} attempts`);
        await lock.release();
      } finally {
        await counting.quit();
      }
    } finally {
      await Promise.all([holder.quit(), redlock.quit()]);
    }
  });

  it("a call's driftFactor above the instance's shortens that lock's expiration", async () => {
    const redlock = new Redlock(clients());
    try {
      const lock = await redlock.acquire(["d"], 10_000, { driftFactor: 0.2 });
      // 10 s less 20 % and the 2 ms: never more, however fast the round.
      assert.ok(lock.expiration <= Date.now() + 8_000 - 2, `${lock.expiration - Date.now()}`);
      assert.ok(lock.expiration > Date.now());
      await lock.release();
    } finally {
      await redlock.quit();
    }
  });

  for (const stepMs of [3_600_000, -3_600_000]) {
    it(`lock.expiration follows the monotonic validity: a wall clock stepped an hour ${stepMs > 0 ? "ahead" : "back"} leaves the lock valid for as long as before, no longer`, async () => {
      const redlock = new Redlock(clients(), { redquorum: notAboutTimeouts });
      const realNow = Date.now;
      try {
        const lock = await redlock.acquire(["w"], 5000);
        const before = lock.expiration - Date.now();
        Date.now = () => realNow() + stepMs;
        const after = lock.expiration - Date.now();
        assert.ok(after > 0, `stepped ${stepMs} ms, ${after} ms left`);
        assert.ok(after <= before + 1, `${before} then ${after}`);
        // extend's own check (expiration < Date.now()) agrees.
        const extended = await lock.extend(5000);
        const left = extended.expiration - Date.now();
        assert.ok(left > 0 && left <= 5000, `extended: ${left} ms left`);
        Date.now = realNow;
        await extended.release();
      } finally {
        Date.now = realNow;
        await redlock.quit();
      }
    });
  }

  it("extend of an expired or replaced lock, and release of a lock gone from a majority, reject with ExecutionError", async () => {
    const redlock = new Redlock(clients(), { redquorum: notAboutTimeouts });
    const cleaner = clients();
    try {
      const lock = await redlock.acquire(["e"], 5000);
      const extended = await lock.extend(5000);
      await assert.rejects(lock.extend(5000), (error: unknown) => {
        assert.ok(error instanceof ExecutionError);
        assert.equal(error.message, "Cannot extend an already-expired lock.");
        return true;
      });
      await Promise.all(cleaner.map((client) => client.del("e")));
      await assert.rejects(extended.extend(5000), ExecutionError);
      const gone = await redlock.acquire(["e2"], 5000);
      await Promise.all(cleaner.map((client) => client.del("e2")));
      await assert.rejects(gone.release(), ExecutionError);
    } finally {
      await redlock.quit();
    }
  });

  it("node-redlock itself and the drop-in exclude each other on the same key", async () => {
    const theirs = nodeRedlock(clients(), { retryCount: 0 });
    const ours = new Redlock(clients(), { retryCount: 0, redquorum: notAboutTimeouts });
    try {
      const their = await theirs.acquire(["shared"], 10_000);
      const refused = await ours.acquire(["shared"], 10_000).catch((e: unknown) => e);
      assert.ok(refused instanceof ExecutionError, String(refused));
      assert.ok(refused.cause instanceof ResourceLockedError);
      await their.release();
      const mine = await ours.acquire(["shared"], 10_000);
      const theirRefused = await theirs.acquire(["shared"], 10_000).catch((e: unknown) => e);
      assert.equal((theirRefused as Error).name, "ExecutionError", String(theirRefused));
      await mine.release();
      const again = await theirs.acquire(["shared"], 10_000);
      await again.release();
    } finally {
      await Promise.all([theirs.quit(), ours.quit()]);
    }
  });

  it("node-redlock and drop-in instances contending for one key never hold it at once", async () => {
    const settings = { retryCount: -1, retryDelay: 10, retryJitter: 5 };
    const instances = [
      { name: "node-redlock 1", redlock: nodeRedlock(clients(), settings) },
      { name: "node-redlock 2", redlock: nodeRedlock(clients(), settings) },
      { name: "drop-in 1", redlock: new Redlock(clients(), settings) as NodeRedlockApi },
      { name: "drop-in 2", redlock: new Redlock(clients(), settings) as NodeRedlockApi },
    ];
    let holder: string | undefined;
    const overlaps: string[] = [];
    const grants = new Map<string, number>();
    try {
      await Promise.all(
        instances.map(async ({ name, redlock }) => {
          for (let i = 0; i < 15; i++) {
            const lock = await redlock.acquire(["contended"], 5000);
            if (holder !== undefined) overlaps.push(`${name} granted while ${holder} held it`);
            holder = name;
            grants.set(name, (grants.get(name) ?? 0) + 1);
            await sleep(2);
            holder = undefined;
            await lock.release();
          }
        }),
      );
    } finally {
      await Promise.all(instances.map(({ redlock }) => redlock.quit()));
    }
    assert.deepEqual(overlaps, []);
    assert.deepEqual([...grants.values()], [15, 15, 15, 15]);
  });

  it("bad settings, a foreign Lock and custom scripts are typed errors, before anything is sent", async () => {
    const given = clients();
    const cases: Array<[() => unknown, RegExp]> = [
      [() => new Redlock(given, { retryCount: -2 }), /settings\.retryCount: expected an integer/],
      [() => new Redlock(given, { retryCount: 1.5 }), /settings\.retryCount/],
      [() => new Redlock(given, { driftFactor: 2 }), /settings\.driftFactor/],
      [() => new Redlock(given, { retryDelay: "200" as never }), /settings\.retryDelay/],
      [() => new Redlock(given, { retries: 3 } as never), /settings\.retries: unknown option/],
      [
        () => new Redlock(given, { redquorum: { retry: { retries: 1 } } as never }),
        /settings\.redquorum\.retry: not an option here; use node-redlock's retryCount/,
      ],
      [
        // The drop-in's Lock has no field for a token: fenced grants were
        // made (and a fencing failure escaped as no ExecutionError).
        () => new Redlock(given, { redquorum: { fencing: true } }),
        /settings\.redquorum\.fencing: got true: the drop-in's locks carry no fencing token/,
      ],
      [() => new Redlock(given, {}, { acquireScript: "return 1" }), /scripts: custom scripts/],
      [() => new Redlock(given, { redquorum: { nodeTimeoutMs: 0 } }), /options\.nodeTimeoutMs/],
    ];
    for (const [make, message] of cases) {
      assert.throws(make, (error: unknown) => {
        assert.ok(error instanceof InvalidArgumentError, String(error));
        assert.match(error.message, message);
        return true;
      });
    }
    const redlock = new Redlock(given);
    try {
      await assert.rejects(
        redlock.acquire(["x"], 1000, { retryCount: -3 }),
        /settings\.retryCount/,
      );
      await assert.rejects(redlock.acquire(["x"], 1.5), InvalidArgumentError);
      const foreign = new Lock(redlock, ["x"], "value", [], Date.now() + 1000);
      assert.equal(foreign.expiration > Date.now(), true);
      await assert.rejects(redlock.release(foreign), /not granted by this Redlock/);
      await assert.rejects(
        redlock.using(["x"], 550, async () => {}),
        /at least 100ms greater than the `automaticExtensionThreshold`/,
      );
    } finally {
      await redlock.quit();
    }
  });

  it("quit() ends a wait between attempts at once, and quits the clients", async () => {
    const holder = new Redlock(clients());
    const given = clients();
    const redlock = new Redlock(given, { retryCount: -1, retryDelay: 60_000, retryJitter: 0 });
    try {
      const held = await holder.acquire(["q"], 10_000);
      let failures = 0;
      const waiting = redlock.acquire(["q"], 5000).catch((e: unknown) => e);
      redlock.on("error", () => failures++);
      while (failures === 0) await sleep(5);
      // The waiter sleeps a minute before its next attempt; quit() ends that.
      await redlock.quit();
      const error = await waiting;
      assert.ok(error instanceof ClosedError, String(error));
      await Promise.all(given.map(ended));
      await held.release();
    } finally {
      await holder.quit();
    }
  });

  it('async hooks that reject (settings.redquorum.onEvent, an "error" listener) leave no unhandled rejection; once listeners still go', async () => {
    const unhandled: unknown[] = [];
    const seen = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", seen);
    const told: string[] = [];
    const holder = new Redlock(clients());
    const redlock = new Redlock(clients(), {
      retryCount: 0,
      redquorum: {
        ...notAboutTimeouts,
        onEvent: async (event) => {
          told.push(event.type);
          throw new Error("metrics backend down");
        },
      },
    });
    let listened = 0;
    let once = 0;
    redlock.on("error", async () => {
      listened++;
      throw new Error("listener down");
    });
    redlock.once("error", () => once++);
    try {
      const held = await holder.acquire(["async-hooks"], 10_000);
      await assert.rejects(redlock.acquire(["async-hooks"], 5_000), ExecutionError);
      await assert.rejects(redlock.acquire(["async-hooks"], 5_000), ExecutionError);
      await held.release();
      await (await redlock.acquire(["async-hooks"], 5_000)).release();
      // Rejections are reported after the microtasks that follow them.
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.deepEqual(told, ["acquire", "acquire", "acquire", "release"]);
      assert.equal(listened, 2, "the async listener heard each refused attempt");
      assert.equal(once, 1, "a once listener, once");
      assert.deepEqual(unhandled, []);
    } finally {
      process.off("unhandledRejection", seen);
      await Promise.all([holder.quit(), redlock.quit()]);
    }
  });

  it('README: the "error" event tells each failed attempt and each node out of service', async () => {
    const errors: unknown[] = [];
    const holder = new Redlock(clients());
    const redlock = new Redlock(clients(), {
      retryCount: 1,
      retryDelay: 10,
      redquorum: notAboutTimeouts,
    });
    redlock.on("error", (error) => {
      // Ignore cases where a resource is explicitly marked as locked on a client.
      if (error instanceof ResourceLockedError) {
        errors.push("locked");
        return;
      }
      errors.push(error);
    });
    try {
      const held = await holder.acquire(["ev"], 10_000);
      await assert.rejects(redlock.acquire(["ev"], 5000), ExecutionError);
      assert.deepEqual(errors, ["locked", "locked"], "one per attempt");
      await held.release();
      errors.length = 0;
      // A node down: the lock is still granted (2 of 3), and the node's failure is told.
      await cluster.kill(2);
      const lock = await redlock.acquire(["ev2"], 5000);
      await lock.release();
      const down = cluster.urls[2]!.replace("redis://", "");
      // Told once every node answered or timed out, with the attempt's stats.
      const stats = await lock.attempts[0]!;
      assert.equal(stats.votesFor.size, 2);
      assert.equal(stats.votesAgainst.size, 1);
      assert.ok(
        (errors as unknown[]).some((e) => e instanceof NodeError && e.endpoint === down),
        `errors: ${errors.map(String).join("; ")}`,
      );
    } finally {
      // Back up, so that quit()'s QUIT reaches every node as the clients reconnect.
      await cluster.restart(2);
      await Promise.all([holder.quit(), redlock.quit()]);
    }
  });
});
