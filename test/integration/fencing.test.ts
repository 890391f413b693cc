import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { after, before, describe, it } from "node:test";
import {
  defaults,
  fencedSet,
  InvalidArgumentError,
  type Lock,
  LockExpiredError,
  maxId,
  QuorumError,
  Redlock,
  ResourceLockedError,
} from "../../src/index.js";
import { libraryUrl } from "../helpers/built.js";
import { findOverlaps, type Hold } from "../helpers/checkers.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";
import { byScale } from "../helpers/scale.js";
import { describeSeed, prng, testSeed } from "../helpers/seed.js";
import { sleep } from "../helpers/sleep.js";

/** The TTL every contending client asks for. */
const lockTtlMs = 2_000;
/** ioredis backs off at most this long between reconnect attempts (ioredis-transport.ts). */
const reconnectBackoffCapMs = 1_000;

interface Grant extends Hold {
  readonly fence: bigint;
}

/** Tokens must strictly increase in hold order (holds never overlap). */
function fenceOrderViolations(grants: readonly Grant[]): string[] {
  const sorted = [...grants].sort((a, b) => a.startMs - b.startMs);
  const violations: string[] = [];
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i]!.fence <= sorted[i - 1]!.fence) {
      violations.push(
        `${sorted[i - 1]!.client} had ${sorted[i - 1]!.fence}, then ${sorted[i]!.client} got ${sorted[i]!.fence}`,
      );
    }
  }
  return violations;
}

/** What contending clients may meet while nodes are killed and restarted. */
function isExpected(error: unknown): boolean {
  return error instanceof ResourceLockedError || error instanceof QuorumError;
}

/**
 * `clients` Redlocks contend for one resource until `stop()`; every grant
 * is recorded. A hold counts only while the lock is valid: one that
 * outlived its validity is cut at its end (the lock no longer protects the
 * rest) and counted in `overran`. Only the errors the injected faults
 * explain are tolerated (`isExpected`); any other, `LockExpiredError`
 * included, is kept in `unexpected` and stops that client.
 */
function contend(urls: string[], clients: number, options: object) {
  const grants: Grant[] = [];
  const unexpected: unknown[] = [];
  let overran = 0;
  let running = true;
  const redlocks = Array.from({ length: clients }, () => new Redlock(urls, options));
  const done = Promise.all(
    redlocks.map(async (redlock, c) => {
      while (running) {
        let lock: Lock;
        try {
          lock = await redlock.acquire(["fenced"], lockTtlMs);
        } catch (error) {
          if (!isExpected(error)) {
            unexpected.push(error);
            return;
          }
          await sleep(5);
          continue;
        }
        const startMs = performance.now();
        await sleep(1);
        const valid = lock.remainingMs() > 0;
        const endMs = valid ? performance.now() : Math.max(startMs, lock.validUntilMs);
        if (!valid) overran++;
        grants.push({ client: `c${c}`, startMs, endMs, fence: lock.fence! });
        try {
          await lock.release();
        } catch (error) {
          // A release can miss a majority while nodes are down (the keys
          // then expire); a lock found gone is expected only if it overran.
          if (!(error instanceof QuorumError || (!valid && error instanceof LockExpiredError))) {
            unexpected.push(error);
            return;
          }
        }
      }
    }),
  );
  return {
    grants,
    unexpected,
    get overran() {
      return overran;
    },
    async stop() {
      running = false;
      await done;
      await Promise.all(redlocks.map((r) => r.close()));
    },
  };
}

/**
 * Waits until `count` grants are recorded. While the clients keep working
 * there is no deadline on the total (how fast they are is this machine's
 * business), but every gap between grants is bounded by what a healthy
 * cluster promises: a client's reconnect (backoff cap), a restarted node's
 * quarantine (`maxTtlMs`) and fencing repair (`repairDelayMs`), and the
 * TTL of a lock whose holder is gone. A stop, or an unexpected error, fails.
 */
async function waitForGrants(
  run: ReturnType<typeof contend>,
  count: number,
  maxTtlMs: number,
  context: string,
): Promise<void> {
  const stallMs = reconnectBackoffCapMs + maxTtlMs + defaults.repairDelayMs + lockTtlMs;
  let seen = run.grants.length;
  let progressAt = performance.now();
  while (run.grants.length < count) {
    assert.deepEqual(run.unexpected, [], context);
    if (run.grants.length > seen) {
      seen = run.grants.length;
      progressAt = performance.now();
    } else if (performance.now() - progressAt > stallMs) {
      assert.fail(`no grant for ${stallMs} ms, ${seen} of ${count} so far; ${context}`);
    }
    await sleep(50);
  }
}

describe("fencing tokens: strictly increasing in grant order", () => {
  // Full scale: 16 clients, 2,000 grants across 8 kill -9 and restart
  // steps; fast: 8 clients, 250 grants across 4. How fast the grants come
  // is the machine's business (15 s for 2,000 here when quiet, minutes when
  // loaded): what bounds the test is that no gap between grants is longer
  // than the faults explain (waitForGrants), so at full scale it has a
  // bound of its own, above the runner's 60 s.
  const clients = byScale(8, 16);
  const grants = byScale(250, 2_000);
  const steps = byScale(4, 8);
  const timeout = byScale(60_000, 300_000);
  it(`${clients} clients, ${grants} grants, minority nodes kill -9'd and restarted ${steps} times (AOF always)`, {
    timeout,
  }, async (t) => {
    const cluster = await startCluster({ nodeCount: 5, persistence: "aof-always" });
    const seed = testSeed();
    const context = describeSeed(seed);
    t.diagnostic(context);
    const random = prng(seed);
    // 500 ms per node: not about node timeouts. With 50 ms and appendfsync
    // always, beside other test files' fsyncs, every round missed a
    // majority for seconds (5 grants in 10 s, a fresh-clone .ci/run).
    const run = contend(cluster.urls, clients, {
      nodeTimeoutMs: 500,
      retry: { retries: 10_000, delayMs: 3, jitterMs: 3 },
    });
    try {
      for (let step = 0; step < steps; step++) {
        const victim = Math.floor(random() * 5);
        await cluster.cluster.kill(victim);
        await sleep(300);
        await cluster.cluster.restart(victim);
        await sleep(300);
      }
      // Restarted with their data: no quarantine (0), only the fencing repair.
      await waitForGrants(run, grants, 0, context);
    } finally {
      await run.stop();
      await cluster.stop();
    }
    const summary = `${context}; ${run.overran} holds overran their validity`;
    t.diagnostic(summary);
    assert.deepEqual(run.unexpected, [], summary);
    assert.ok(run.grants.length >= grants, summary);
    assert.deepEqual(findOverlaps(run.grants), [], summary);
    assert.deepEqual(fenceOrderViolations(run.grants), [], summary);
  });

  it("nodes restarting empty one at a time (quarantine on): still strictly increasing", async (t) => {
    const cluster = await startCluster({ nodeCount: 5, persistence: "none" });
    const maxTtlMs = 2_000;
    // The shortest repair delay allowed: the repair's wait is not what this is about.
    const repairDelayMs = 1_100;
    // Contending clients: 4 at the fast scale, 16 at the full one.
    const run = contend(cluster.urls, byScale(4, 16), {
      nodeTimeoutMs: 500,
      maxTtlMs,
      repairDelayMs,
      retry: { retries: 10_000, delayMs: 3, jitterMs: 3 },
    });
    try {
      for (const victim of [0, 3]) {
        await sleep(300);
        await cluster.cluster.restart(victim, { keepData: false });
        // The clients reconnect (backoff cap), the node sits out its
        // quarantine (maxTtlMs), its counters are repaired (repairDelayMs),
        // and the next grant (within one TTL) writes the counter there.
        const boundMs = reconnectBackoffCapMs + maxTtlMs + repairDelayMs + lockTtlMs;
        const deadline = performance.now() + boundMs;
        for (;;) {
          assert.deepEqual(run.unexpected, []);
          const fence = await cluster
            .client(victim)
            .get("redquorum:fence:fenced")
            .catch(() => null);
          if (fence !== null) break;
          if (performance.now() > deadline) {
            assert.fail(
              `node ${victim}'s fencing counter not repaired ${boundMs} ms after its restart ` +
                `(${run.grants.length} grants so far)`,
            );
          }
          await sleep(50);
        }
      }
      await sleep(300);
    } finally {
      await run.stop();
      await cluster.stop();
    }
    t.diagnostic(`${run.grants.length} grants, ${run.overran} holds overran their validity`);
    assert.deepEqual(run.unexpected, []);
    // Contention went on throughout (a loaded machine made 49 in one run).
    assert.ok(run.grants.length >= 20, `only ${run.grants.length} grants`);
    assert.deepEqual(findOverlaps(run.grants), []);
    assert.deepEqual(fenceOrderViolations(run.grants), []);
  });
});

describe("the GC pause (FAULTS.md L15 / I12): a paused client is fenced off", () => {
  let cluster: TestCluster;

  before(async () => {
    cluster = await startCluster({ nodeCount: 5, persistence: "none" });
  });
  after(() => cluster.stop());

  /**
   * Client A in a child process acquires with a 300 ms TTL and is SIGSTOPped
   * past it; B acquires and writes; A is resumed and writes with its old
   * token. Returns the stored value afterwards.
   */
  async function pausedWriter(fenced: boolean): Promise<{ value: string | null; aResult: string }> {
    const store = cluster.client(0);
    await store.del("balance", "balance:fence");
    const script = `
      import { Redis } from "ioredis";
      import { Redlock, fencedSet } from "${libraryUrl}";
      const urls = ${JSON.stringify(cluster.urls)};
      // Retries and a node timeout for a loaded machine: a first acquire
      // that missed the 50 ms default there ended A before it held the lock.
      const redlock = new Redlock(urls, {
        retry: { retries: 20, delayMs: 50, jitterMs: 10 },
        nodeTimeoutMs: 200,
      });
      const store = new Redis(urls[0]);
      const lock = await redlock.acquire(["account"], 300);
      console.log("acquired " + lock.fence);
      process.stdin.once("data", async () => {
        const result = ${fenced}
          ? (await fencedSet(store, "balance", "written by A", lock.fence)).written ? "written" : "rejected"
          : (await store.set("balance", "written by A"), "written");
        console.log("A " + result + " remaining=" + lock.remainingMs());
        store.disconnect();
        await redlock.close();
        process.stdin.destroy();
      });
    `;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      stdio: ["pipe", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
    });
    // Until A holds its lock; if A fails first (its retries are few, and
    // each of its calls is bounded), it exits, and that fails the test.
    const exited = once(child, "exit");
    while (!out.includes("acquired")) {
      const status = await Promise.race([exited, sleep(10).then(() => undefined)]);
      if (status)
        assert.fail(
          `client A exited (code ${status[0]}, signal ${status[1]}) before acquiring:\n${out}`,
        );
    }
    child.kill("SIGSTOP");
    await sleep(500); // past A's 300 ms TTL
    const b = new Redlock(cluster.urls, { retry: { retries: 20, delayMs: 50, jitterMs: 10 } });
    try {
      const lock = await b.acquire(["account"], 5_000);
      assert.ok(lock.fence! > BigInt(/acquired (\d+)/.exec(out)![1]!), "B's token is higher");
      if (fenced)
        assert.equal(
          (await fencedSet(store, "balance", "written by B", lock.fence!)).written,
          true,
        );
      else await store.set("balance", "written by B");
      child.kill("SIGCONT");
      child.stdin.write("go\n");
      await exited;
      await lock.release();
    } finally {
      await b.close();
    }
    return { value: await store.get("balance"), aResult: out };
  }

  it("with the fenced write helper, A's late write is rejected and B's value stays", async () => {
    const { value, aResult } = await pausedWriter(true);
    assert.match(aResult, /A rejected remaining=0/);
    assert.equal(value, "written by B");
  });

  it("fencedSet accepts an equal token, refuses a lower one, and refuses bad input", async () => {
    const store = cluster.client(1);
    await store.del("k", "k:fence");
    assert.deepEqual(await fencedSet(store, "k", "a", 5n), { written: true });
    assert.deepEqual(await fencedSet(store, "k", "b", 5n), { written: true });
    assert.deepEqual(await fencedSet(store, "k", "c", 4n), { written: false, seenToken: 5n });
    assert.equal(await store.get("k"), "b");
    await assert.rejects(fencedSet(cluster.urls[1]!, "k", "d", 6n), {
      code: "ERR_INVALID_ARGUMENT",
    });
    await assert.rejects(fencedSet(store, "k", "d", 6 as never), { code: "ERR_INVALID_ARGUMENT" });
    // The token kept under the key written: the value would overwrite it.
    await assert.rejects(fencedSet(store, "k", "d", 6n, { fenceKey: "k" }), {
      code: "ERR_INVALID_ARGUMENT",
      message: /fenceKey/,
    });
    assert.equal(await store.get("k"), "b", "nothing written");
  });

  it("fencedSet refuses bad arguments and options before writing anything, naming them", async () => {
    const store = cluster.client(1);
    await store.del("k2", "k2:fence", "undefined", "undefined:fence");
    const lookAlike = { status: "ready", call() {}, connect() {}, options: {} };
    const cases: Array<[string, () => Promise<unknown>]> = [
      ["client", () => fencedSet(null as never, "k2", "v", 1n)],
      ["client", () => fencedSet({} as never, "k2", "v", 1n)],
      ["client", () => fencedSet(lookAlike as never, "k2", "v", 1n)],
      ["key", () => fencedSet(store, undefined as never, "v", 1n)],
      ["key", () => fencedSet(store, {} as never, "v", 1n)],
      ["key", () => fencedSet(store, "", "v", 1n)],
      ["key", () => fencedSet(store, "k2\uD800", "v", 1n)],
      ["value", () => fencedSet(store, "k2", undefined as never, 1n)],
      ["value", () => fencedSet(store, "k2", { a: 1 } as never, 1n)],
      // Kept, it would fail every later write to the key ("not a counter value").
      ["token", () => fencedSet(store, "k2", "v", 2n ** 63n)],
      ["token", () => fencedSet(store, "k2", "v", -1n)],
      ["options", () => fencedSet(store, "k2", "v", 1n, null as never)],
      ["options.timeout", () => fencedSet(store, "k2", "v", 1n, { timeout: 5 } as never)],
      ["options.fenceKey", () => fencedSet(store, "k2", "v", 1n, { fenceKey: 5 as never })],
      ["options.fenceKey", () => fencedSet(store, "k2", "v", 1n, { fenceKey: "" })],
      // NaN or a string set no bound at all; above 2^31 - 1 the timer fired at once.
      ["options.timeoutMs", () => fencedSet(store, "k2", "v", 1n, { timeoutMs: Number.NaN })],
      ["options.timeoutMs", () => fencedSet(store, "k2", "v", 1n, { timeoutMs: "100" as never })],
      ["options.timeoutMs", () => fencedSet(store, "k2", "v", 1n, { timeoutMs: -5 })],
      ["options.timeoutMs", () => fencedSet(store, "k2", "v", 1n, { timeoutMs: 3e9 })],
    ];
    for (const [argument, call] of cases) {
      await assert.rejects(call(), (error: unknown) => {
        assert.ok(error instanceof InvalidArgumentError, `${argument}: ${String(error)}`);
        assert.equal(error.argument, argument);
        return true;
      });
    }
    assert.deepEqual(await store.exists("k2", "k2:fence", "undefined", "undefined:fence"), 0);
    // The largest token is taken, and a lower one after it refused as usual.
    assert.deepEqual(await fencedSet(store, "k2", "a", maxId, { timeoutMs: 1_000 }), {
      written: true,
    });
    assert.deepEqual(await fencedSet(store, "k2", "b", 1n), { written: false, seenToken: maxId });
  });

  it("negative control: without the helper, A's late write overwrites B's (the lost update)", async () => {
    const { value, aResult } = await pausedWriter(false);
    assert.match(aResult, /A written remaining=0/);
    assert.equal(value, "written by A");
  });
});

describe("a node whose fencing counter is unknown", () => {
  let cluster: TestCluster;

  before(async () => {
    cluster = await startCluster({ nodeCount: 5, persistence: "none" });
  });
  after(() => cluster.stop());

  it("does not vote and keeps no lock key; the others grant with a token", async () => {
    // Node 0 lost its memory earlier and sat out its quarantine: its marker
    // names the loss, and its counter for "u" is gone (unknown, not 0).
    await cluster.client(0).set("redquorum:marker", "lost:1.0");
    const redlock = new Redlock(cluster.urls);
    try {
      const lock = await redlock.acquire(["u"], 10_000);
      assert.equal(lock.grantedNodeCount >= 3, true);
      assert.ok(lock.fence! > 0n);
      // The round ended at a majority; the fourth grant lands just after.
      let values = await cluster.onAll((c) => c.get("u"));
      for (let i = 0; i < 100 && values.filter((v) => v === lock.value).length < 4; i++) {
        await new Promise((r) => setTimeout(r, 10));
        values = await cluster.onAll((c) => c.get("u"));
      }
      assert.equal(values[0], null, "the refusing node holds no key of the lock");
      assert.equal(values.filter((v) => v === lock.value).length, 4);
      assert.equal(await cluster.client(0).get("redquorum:fence:u"), null);
      await lock.release();
    } finally {
      await redlock.close();
    }
  });
});
