/**
 * Members that lost their memory beyond what the cluster can spare (more
 * than N - Q of N): no lock or ID call takes them back (membership/view.ts,
 * confirmCurrent), only the operator's fencing floor does. Taken back on
 * every other member's answer, as before, a client left on a list whose
 * nodes were removed took them back as a cluster of its own.
 */
import assert from "node:assert/strict";
import { after, afterEach, before, beforeEach, describe, it } from "node:test";
import { changeMembers, Redlock } from "../../src/index.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";
import { sleep } from "../helpers/sleep.js";

// Not about node timeouts: a loaded machine must not fail these on 50 ms.
const options = {
  fencing: false,
  nodeTimeoutMs: 500,
  maxTtlMs: 1_000,
  retry: { retries: 0, delayMs: 10, jitterMs: 0 },
};

describe("members that lost their memory beyond N - Q", () => {
  let cluster: TestCluster;
  const open: Redlock[] = [];
  const client = (indexes: number[]) => {
    const redlock = new Redlock(
      indexes.map((i) => cluster.urls[i]!),
      options,
    );
    open.push(redlock);
    return redlock;
  };
  /** Tries `resource` on `redlock` until granted (the nodes' quarantines over); rejects after 30 s. */
  async function untilGranted(redlock: Redlock, resource: string, ttlMs = 1_000) {
    const deadline = performance.now() + 30_000;
    for (;;) {
      const lock = await redlock.acquire([resource], ttlMs).catch(() => undefined);
      if (lock) return lock;
      assert.ok(performance.now() < deadline, `${resource} never granted`);
      await sleep(100);
    }
  }
  /** What `redlock` gets asking for `resource` for `ms`: the last refusal, or "granted". */
  async function askFor(redlock: Redlock, resource: string, ms: number): Promise<string> {
    let last = "";
    for (const until = performance.now() + ms; performance.now() < until; ) {
      last = await redlock.acquire([resource], 1_000).then(
        async (lock) => {
          await lock.release();
          return "granted";
        },
        (error: Error) => error.message,
      );
      if (last === "granted") break;
      await sleep(100);
    }
    return last;
  }

  before(async () => {
    cluster = await startCluster({ nodeCount: 6, persistence: "aof-always" });
  });
  // A test that failed with a node down leaves it down: started again
  // (empty, as flushAll leaves every node) so that the next one starts whole.
  beforeEach(async () => {
    await cluster.restoreAll({ keepData: false });
    await cluster.flushAll();
  });
  afterEach(async () => {
    await Promise.allSettled(open.splice(0).map((redlock) => redlock.close()));
  });
  after(() => cluster.stop());

  it("a client left on a list whose members were replaced, one of them while down (back with its old record), the others emptied: takes none back", async () => {
    await client([0, 1, 2]).init();
    // A client running since: it holds epoch 1 of {0, 1, 2}.
    const stale = client([0, 1, 2]);
    await stale.release(await untilGranted(stale, "warm"));
    // Node 0 is down when it is replaced, and comes back with its data
    // (its record of epoch 1, its member id); 1 and 2 are replaced and
    // emptied to be reused.
    await cluster.cluster.kill(0);
    const urls = (...indexes: number[]) => indexes.map((i) => cluster.urls[i]!);
    await changeMembers(urls(0, 1, 2), { add: cluster.urls[3]!, remove: cluster.urls[0]! });
    await changeMembers(urls(3, 1, 2), { add: cluster.urls[4]!, remove: cluster.urls[1]! });
    await changeMembers(urls(3, 4, 2), { add: cluster.urls[5]!, remove: cluster.urls[2]! });
    await cluster.client(1).flushall();
    await cluster.client(2).flushall();
    await cluster.cluster.restart(0, { keepData: true });
    // The current list holds r for longer than the stale client asks.
    const current = new Redlock(
      [3, 4, 5].map((i) => cluster.urls[i]!),
      { ...options, maxTtlMs: 10_000 },
    );
    open.push(current);
    const held = await untilGranted(current, "r", 10_000);
    // Before, node 0's old record counted as a confirmation and every other
    // member had answered: the stale client took 1 and 2 back at epoch 1
    // and, their quarantine over (1 s), won r beside the current list.
    const refusal = await askFor(stale, "r", 5_000);
    assert.notEqual(refusal, "granted", "the stale list won r while the current list held it");
    for (const i of [1, 2]) {
      assert.equal(await cluster.client(i).get("redquorum:node"), null, `node ${i} taken back`);
    }
    assert.match(refusal, /only the operator takes them back/);
    await held.release();
  });

  it("one of three members restarted empty while another is down: waited for, without sending the operator to the fencing floor", async () => {
    const service = client([0, 1, 2]);
    await service.init();
    await service.release(await untilGranted(service, "r"));
    await cluster.cluster.kill(2);
    await cluster.cluster.restart(0, { keepData: false });
    const refusal = await askFor(service, "r", 2_000);
    assert.notEqual(refusal, "granted");
    assert.match(
      refusal,
      /lost its membership record; .* \(1 answered\): it waits for the others to answer/,
    );
    assert.doesNotMatch(refusal, /fencing-floor/);
    await cluster.cluster.restart(2, { keepData: true });
  });

  it("one of three members restarted empty while another is gone for good: the runbook's way out (an empty server at the gone member's address, then the operator's fencing floor) brings fenced locks back above every token issued", async () => {
    const fenced = { ...options, fencing: true };
    const service = new Redlock(
      [0, 1, 2].map((i) => cluster.urls[i]!),
      fenced,
    );
    open.push(service);
    await service.init();
    let issued = 0n;
    for (let i = 0; i < 3; i++) {
      const lock = await untilGranted(service, "r");
      issued = lock.fence!;
      await lock.release();
    }
    await cluster.cluster.kill(2);
    await cluster.cluster.restart(0, { keepData: false });
    // While node 2 does not answer the client waits for it, and says where
    // the way out is if it never will.
    const waiting = await askFor(service, "r", 2_000);
    assert.match(waiting, /it waits for the others to answer/);
    assert.match(
      waiting,
      /if a member that does not answer is gone for good, see the operations guide, "A member is gone for good while another lost its memory"/,
    );
    // Nor can the gone member be replaced by another node: the change
    // cannot tell which member is gone (node 3: a new, empty node).
    await cluster.client(3).flushall();
    await assert.rejects(
      changeMembers(
        [0, 1, 2].map((i) => cluster.urls[i]!),
        { add: cluster.urls[3]!, remove: cluster.urls[2]! },
      ),
      /did not answer, and 2 members are unaccounted for: cannot tell which member to remove/,
    );
    // Step 1: an empty server answers at the gone member's address. Two of
    // three members have lost their memory now: the operator's case.
    await cluster.cluster.restart(2, { keepData: false });
    const refusal = await askFor(service, "r", 2_000);
    assert.match(refusal, /only the operator takes them back: `redquorum fencing-floor`/);
    // Step 2: the operator's floor, above every token the resources saw.
    const floor = issued + 10n;
    const operator = new Redlock(
      [0, 1, 2].map((i) => cluster.urls[i]!),
      fenced,
    );
    open.push(operator);
    const reports = await operator.raiseFencingFloor({ atLeast: floor });
    assert.deepEqual(
      reports.map((r) => r.action),
      ["raised", "raised", "raised"],
      JSON.stringify(reports),
    );
    // The service itself is granted once the quarantines end, above the floor.
    const lock = await untilGranted(service, "r");
    assert.ok(lock.fence! > floor, `token ${lock.fence} not above the floor ${floor}`);
    await lock.release();
  });

  it("two of three members restarted empty: the clients take neither back; a new client's raiseFencingFloor (as `redquorum fencing-floor`) does", async () => {
    const service = client([0, 1, 2]);
    await service.init();
    await service.release(await untilGranted(service, "r"));
    await cluster.cluster.restart(0, { keepData: false });
    await cluster.cluster.restart(1, { keepData: false });
    // Longer than a quarantine (1 s): waiting does not bring them back.
    const refusal = await askFor(service, "r", 3_000);
    assert.notEqual(refusal, "granted");
    assert.match(
      refusal,
      /lost its membership record; it is taken back once 2 of the other members holding the record .*: more than 1 of the 3 members lost their memory, and only the operator takes them back: `redquorum fencing-floor`/,
    );
    assert.equal(await cluster.client(0).get("redquorum:node"), null);
    // The operator's word, from a new client with no record of its own:
    // with fencing off, any bound.
    const operator = client([0, 1, 2]);
    const reports = await operator.raiseFencingFloor({ atLeast: 1 });
    assert.deepEqual(
      reports.map((r) => r.action),
      ["raised", "raised", "raised"],
      JSON.stringify(reports),
    );
    for (const i of [0, 1]) assert.ok(await cluster.client(i).get("redquorum:node"), `node ${i}`);
    // The service is granted once their quarantines are over.
    await (await untilGranted(service, "r")).release();
  });
});
