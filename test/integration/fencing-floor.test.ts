import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { InvalidArgumentError, Redlock } from "../../src/index.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";
import { sleep } from "../helpers/sleep.js";

/** Takes and releases `resource` `times` times; the last fencing token. */
async function lastTokenOf(redlock: Redlock, resource: string, times: number): Promise<bigint> {
  let token = 0n;
  for (let i = 0; i < times; i++) {
    const lock = await redlock.acquire([resource], 1_000);
    token = lock.fence!;
    await lock.release();
  }
  return token;
}

/**
 * Tries `resource` until `count` nodes refuse it with `pattern` (each try
 * meets the lost nodes: quarantine, then its judgement; once the
 * quarantines are over, what refuses is the counters); never a grant
 * meanwhile. Resolves with that refusal.
 */
async function untilRefused(
  redlock: Redlock,
  resource: string,
  pattern: RegExp,
  count: number,
): Promise<string> {
  const deadline = performance.now() + 60_000;
  for (;;) {
    const outcome = await redlock.acquire([resource], 1_000).then(
      async (lock) => {
        await lock.release();
        return `granted with token ${lock.fence}`;
      },
      (error: Error) => error.message,
    );
    assert.doesNotMatch(outcome, /^granted/, "granted with the nodes' memory lost");
    const global = new RegExp(pattern.source, "g");
    if ((outcome.match(global) ?? []).length === count) return outcome;
    assert.ok(performance.now() < deadline, `not refused so: ${outcome}`);
    await sleep(100);
  }
}

/** Tries `resource` until it is granted (once the nodes' quarantines are over); its fencing token. */
async function untilGranted(redlock: Redlock, resource: string): Promise<bigint> {
  const deadline = performance.now() + 60_000;
  for (;;) {
    const lock = await redlock.acquire([resource], 1_000).catch(() => undefined);
    if (lock) {
      await lock.release();
      return lock.fence!;
    }
    assert.ok(performance.now() < deadline, "the quarantines never ended");
    await sleep(100);
  }
}

/**
 * A short maxTtlMs: the restarted nodes' quarantines end within a test. Not
 * about node timeouts: not on the 50 ms default, which a loaded machine can
 * exceed ("no reply within 50 ms" failed a first lock here).
 */
const notHurried = { maxTtlMs: 1_000, retry: { retries: 0 }, nodeTimeoutMs: 500 } as const;

/**
 * Redlock.raiseFencingFloor (fencing/floor.ts): the way out when more than
 * N - Q nodes lost their fencing counters before any repair, which leaves
 * too few known others to repair them from.
 */
describe("raiseFencingFloor: fenced locks after more than N - Q nodes lost their counters", () => {
  let cluster: TestCluster;

  before(async () => {
    cluster = await startCluster({ nodeCount: 3, persistence: "none" });
  });
  after(() => cluster.stop());

  it("is refused for good after two of three nodes restart empty, until the floor is raised above every token issued", async () => {
    const redlock = new Redlock(cluster.urls, notHurried);
    try {
      // The members recorded, as a deployment's init does.
      await redlock.init();
      const issued = await lastTokenOf(redlock, "r", 5);
      await cluster.cluster.restart(0, { keepData: false });
      await cluster.cluster.restart(1, { keepData: false });
      // More than N - Q members lost their memory: the client takes
      // neither back (one member holds the record; it needs two), and
      // says the operator does.
      const refusal = await untilRefused(redlock, "r", /only the operator takes them back/, 2);
      assert.match(refusal, /redquorum fencing-floor/);
      // It stays so.
      await sleep(2_500);
      await assert.rejects(redlock.acquire(["r"], 1_000), /only the operator takes them back/);

      await assert.rejects(redlock.raiseFencingFloor({ atLeast: -1 }), InvalidArgumentError);
      await assert.rejects(redlock.raiseFencingFloor({ atLeast: "1e3" }), InvalidArgumentError);
      await assert.rejects(redlock.raiseFencingFloor({} as never), InvalidArgumentError);

      // The protected resource saw `issued`; the operator gives more.
      const floor = issued + 100n;
      const reports = await redlock.raiseFencingFloor({ atLeast: floor });
      assert.deepEqual(
        reports.map((r) => [r.found, r.action]),
        [
          ["unknown", "raised"],
          ["unknown", "raised"],
          // Its counters known, it gets the floor too: a floor only moves votes up.
          ["known", "raised"],
        ],
        JSON.stringify(reports),
      );
      // Taken back by it, in their quarantine until it is judged and over.
      const token = await untilGranted(redlock, "r");
      assert.ok(token > floor, `token ${token} not above the floor ${floor}`);
      // Run again, it changes nothing: every node's floor is there already.
      const again = await redlock.raiseFencingFloor({ atLeast: floor });
      assert.deepEqual(
        again.map((r) => r.action),
        ["none", "none", "none"],
      );
    } finally {
      await redlock.close();
    }
  });

  it("init after every node lost its memory marks nothing, where tokens would start again from 1; with the floor raised they go on above", async () => {
    await cluster.flushAll();
    const redlock = new Redlock(cluster.urls, notHurried);
    try {
      const issued = await lastTokenOf(redlock, "all-lost", 5);
      for (const index of [0, 1, 2]) await cluster.cluster.restart(index, { keepData: false });
      // Every node serves locks from a lost: marker, its counters unknown.
      await untilRefused(redlock, "all-lost", /fencing counters unknown/, 3);
      // Marked, the nodes would start their counters again: token 1, below
      // the 5 a store holds.
      const report = await redlock.init();
      assert.deepEqual(
        report.map((r) => r.action),
        ["none", "none", "none"],
        JSON.stringify(report),
      );
      assert.match(report[0]!.detail, /every node lost its memory/);
      // They serve locks without fencing as they are, and no fenced one.
      assert.deepEqual(
        report.map((r) => r.serves),
        Array(3).fill("unfenced locks"),
      );
      await assert.rejects(redlock.acquire(["all-lost"], 1_000), /fencing counters unknown/);
      await redlock.raiseFencingFloor({ atLeast: issued });
      const lock = await redlock.acquire(["all-lost"], 1_000);
      assert.ok(lock.fence! > issued, `token ${lock.fence} not above ${issued}`);
      await lock.release();
    } finally {
      await redlock.close();
    }
  });

  it("a floor given too low is corrected by a second run with a higher one: every node's floor is raised, known counters or not", async () => {
    await cluster.flushAll();
    const redlock = new Redlock(cluster.urls, notHurried);
    try {
      await redlock.init();
      const issued = await lastTokenOf(redlock, "low", 5);
      for (const index of [0, 1, 2]) await cluster.cluster.restart(index, { keepData: false });
      // Every node lost its memory, the membership record with it: this
      // client's lock calls take none back (the list could be one whose
      // nodes were removed and emptied), nor grant anything; once it is
      // connected to every node again, each refuses so.
      await untilRefused(redlock, "low", /so did every other node of the list/, 3);
      // The operator's act does, from this client: its list is the cluster's.
      // The bound is below a token the store saw: tokens repeat (for a
      // client that did not see the earlier ones: this one's own proposals
      // would still go above them).
      const first = await redlock.raiseFencingFloor({ atLeast: issued - 3n });
      assert.deepEqual(
        first.map((r) => [r.found, r.action]),
        Array(3).fill(["unknown", "raised"]),
        JSON.stringify(first),
      );
      for (const i of [0, 1, 2]) assert.ok(await cluster.client(i).get("redquorum:node"));
      const other = new Redlock(cluster.urls, notHurried);
      const repeated = await untilGranted(other, "low").finally(() => other.close());
      assert.ok(repeated <= issued, `token ${repeated}: the floor was not too low after all`);
      // Found out, the operator runs it again with a bound high enough. The
      // nodes' counters are known now (floored): each is raised all the same.
      const floor = issued + 1_000n;
      const reports = await redlock.raiseFencingFloor({ atLeast: floor });
      assert.deepEqual(
        reports.map((r) => [r.found, r.action]),
        Array(3).fill(["known", "raised"]),
        JSON.stringify(reports),
      );
      assert.match(reports[0]!.detail, new RegExp(`fencing floor raised to ${floor}`));
      const token = await lastTokenOf(redlock, "low", 1);
      assert.ok(token > floor, `token ${token} not above the corrected floor ${floor}`);
      // Never lowered: a lower bound afterwards changes nothing.
      const lower = await redlock.raiseFencingFloor({ atLeast: issued });
      assert.deepEqual(
        lower.map((r) => r.action),
        ["none", "none", "none"],
        JSON.stringify(lower),
      );
      assert.ok((await lastTokenOf(redlock, "low", 1)) > token);
    } finally {
      await redlock.close();
    }
  });

  it("takes nodes with no marker (restarted empty, met by no client) for lost: marks them, starts their quarantine, sets the floor", async () => {
    await cluster.flushAll();
    const service = new Redlock(cluster.urls, notHurried);
    // The operator's, as `redquorum fencing-floor` and `redquorum init`
    // are: a new client, which finds no record of the cluster.
    const redlock = new Redlock(cluster.urls, notHurried);
    try {
      await service.init();
      const issued = await lastTokenOf(service, "u", 3);
      // Every node loses its memory at once: to init, a new cluster.
      for (const i of [0, 1, 2]) await cluster.client(i).flushall();
      const floor = issued + 1_000n;
      const reports = await redlock.raiseFencingFloor({ atLeast: floor });
      assert.deepEqual(
        reports.map((r) => [r.found, r.action]),
        Array(3).fill(["unknown", "raised"]),
        JSON.stringify(reports),
      );
      for (const report of reports)
        assert.match(report.detail, /no marker \(taken for a node that lost its memory/);
      for (const i of [0, 1, 2]) {
        assert.match((await cluster.client(i).get("redquorum:marker")) ?? "", /^lost:/);
        assert.ok(
          (await cluster.client(i).pttl("redquorum:quarantine")) > 0,
          `node ${i} not quarantined`,
        );
      }
      // init now sees a cluster in use and marks nothing; it records the
      // members anew, under a new cluster id.
      assert.ok((await redlock.init()).every((r) => r.action !== "marked"));
      // Once the quarantines are judged and over, tokens go on above the floor.
      const token = await untilGranted(redlock, "u");
      assert.ok(token > floor, `token ${token} not above the floor ${floor}`);
      // A service running since before is refused until restarted; the
      // refusal names each node under one cluster only.
      const refusal = await service.acquire(["u"], 1_000).then(
        () => "granted",
        (error: Error) => error.message,
      );
      const split = /(\S+) belongs to cluster \w+, (.*) to cluster \w+/.exec(refusal);
      assert.ok(split, refusal);
      assert.ok(!split[2]!.split(", ").includes(split[1]!), refusal);
    } finally {
      await redlock.close();
      await service.close();
    }
    await assert.rejects(redlock.raiseFencingFloor({ atLeast: 1 }), { code: "ERR_CLOSED" });
  });

  it("init reports a node repaired but still in quarantine as in quarantine, not in service", async () => {
    await cluster.flushAll();
    // A quarantine longer than the fencing repair's delay (2 s).
    const redlock = new Redlock(cluster.urls, { ...notHurried, maxTtlMs: 20_000 });
    try {
      await redlock.init();
      await (await redlock.acquire(["q"], 1_000)).release();
      await cluster.client(0).flushall();
      // Lock calls meet the loss (quarantine, judged from the others'
      // records), and the fencing repair sets node 0's floor.
      const deadline = performance.now() + 30_000;
      while ((await cluster.client(0).exists("redquorum:fence-floor")) === 0) {
        assert.ok(performance.now() < deadline, "node 0 was never repaired");
        await redlock.acquire(["q"], 1_000).then(
          (lock) => lock.release(),
          () => {},
        );
        await sleep(100);
      }
      assert.ok((await cluster.client(0).pttl("redquorum:quarantine")) > 0);
      const reports = await redlock.init();
      assert.deepEqual(
        reports.map((r) => r.found),
        ["in quarantine", "in service", "in service"],
        JSON.stringify(reports),
      );
      assert.match(reports[0]!.detail, /serves the quarantine/);
    } finally {
      await redlock.close();
    }
  });

  it("never sets a floor below a value a node still knows", async () => {
    await cluster.flushAll();
    const redlock = new Redlock(cluster.urls, notHurried);
    try {
      await redlock.init();
      const issued = await lastTokenOf(redlock, "s", 3);
      await cluster.cluster.restart(2, { keepData: false });
      // The lost node's loss is seen (and its run_id recorded) by a lock
      // call, once the client has reconnected to it.
      const deadline = performance.now() + 30_000;
      while (!(await cluster.client(2).get("redquorum:marker"))?.startsWith("lost:")) {
        assert.ok(performance.now() < deadline, "no lock call met the restarted node");
        await redlock.acquire(["s"], 1_000).then(
          (lock) => lock.release(),
          () => {},
        );
        await sleep(50);
      }
      // Raised at once, before the repair's delay: a floor of 0 gives the
      // highest value the others know instead.
      const reports = await redlock.raiseFencingFloor({ atLeast: 0 });
      const raised = reports[2]!;
      if (raised.action === "raised") {
        assert.match(raised.detail, /floor set to (\d+)/);
        const set = BigInt(/floor set to (\d+)/.exec(raised.detail)![1]!);
        assert.ok(set >= issued, `floor ${set} below token ${issued} already issued`);
      } else {
        // The automatic repair got there first.
        assert.equal(raised.found, "known", JSON.stringify(raised));
      }
      assert.deepEqual(
        reports.slice(0, 2).map((r) => r.found),
        ["known", "known"],
      );
    } finally {
      await redlock.close();
    }
  });
});
