/**
 * One cluster, one membership (docs/membership.md): clients whose node
 * lists differ must never both win. Each safety test has its negative
 * control: the check switched off (membership/testing.ts) must show the
 * double grant the check prevents.
 */
import assert from "node:assert/strict";
import { after, afterEach, before, beforeEach, describe, it } from "node:test";
import { Redis } from "ioredis";
import { fenceScript } from "../../src/fencing/scripts.js";
import {
  changeMembers,
  defaults,
  MembershipError,
  membershipStatus,
  NextId,
  type NodeTransport,
  Redlock,
  ResourceLockedError,
} from "../../src/index.js";
import { acquireScript } from "../../src/lock/acquire-script.js";
import { applyMemberChange } from "../../src/membership/change.js";
import { acceptScript, prepareScript, writeRecordScript } from "../../src/membership/scripts.js";
import { membershipTesting } from "../../src/membership/testing.js";
import { createNodes } from "../../src/node/resolve.js";
import { markNode, startCluster, type TestCluster } from "../helpers/cluster.js";
import { leaveIdCounter } from "../helpers/take-back.js";
import { wrappedTransports } from "../helpers/wrapped-transport.js";

// Not about node timeouts: a loaded machine must not fail these on 50 ms.
const options = {
  nodeTimeoutMs: 500,
  maxTtlMs: 3_000,
  retry: { retries: 0, delayMs: 10, jitterMs: 0 },
};

describe("cluster membership on real redis-server nodes", () => {
  let cluster: TestCluster;
  const open: Redlock[] = [];
  const client = (urls: string[]) => {
    const redlock = new Redlock(urls, options);
    open.push(redlock);
    return redlock;
  };
  const urls = (...indexes: number[]) => indexes.map((i) => cluster.urls[i]!);
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  /** The mark of a member taken back after losing its memory, before a change works its epoch out. */
  const unknownMarked = `${Number.MAX_SAFE_INTEGER}\namnesiac\n\n\n`;
  /**
   * A client of nodes `indexes` whose check of node `last` answers 200 ms
   * late: the view is read from the others first (a node without a record,
   * or with an older one, is then taken back or brought up at once).
   */
  const clientCheckingLast = (indexes: number[], last: number) => {
    const transports = wrappedTransports(urls(...indexes), (real, i) => ({
      async send(args, timeoutMs) {
        if (indexes[i] === last && args[0] === "MGET") await sleep(200);
        return real.send(args, timeoutMs);
      },
    }));
    const redlock = new Redlock(transports, options);
    open.push(redlock);
    return redlock;
  };
  /** A client of `list` whose membership writes reach the nodes at indexes `late` 150 ms late. */
  function lateWriter(list: string[], late: number[]): Redlock {
    const transports = wrappedTransports(list, (real, i) => ({
      async send(args, timeoutMs) {
        if (late.includes(i) && args[0] === "EVAL" && args[1] === writeRecordScript.source) {
          await sleep(150);
        }
        return real.send(args, timeoutMs);
      },
    }));
    const redlock = new Redlock(transports, options);
    open.push(redlock);
    return redlock;
  }
  const initWithLateWrites = (list: string[], late: number[]) => lateWriter(list, late).init();
  /** The five nodes' URLs, node `index` spelled as localhost. */
  const respell = (index: number) =>
    urls(0, 1, 2, 3, 4).map((url, i) =>
      i === index ? url.replace("127.0.0.1", "localhost") : url,
    );
  /** The nodes' indexes in the order of their servers' run_ids: an init writes the first one first. */
  async function byServer(): Promise<number[]> {
    const runIds = await cluster.onAll(
      async (c) => /run_id:(\w+)/.exec(await c.info("server"))?.[1] ?? "",
    );
    return runIds
      .map((runId, index) => ({ runId, index }))
      .sort((a, b) => (a.runId < b.runId ? -1 : 1))
      .map((node) => node.index);
  }
  /** Node `index`, flushed, was taken back by a client's check (which may end after its acquire failed): within 2 s. */
  async function nodeRejoined(index: number) {
    const until = performance.now() + 2_000;
    while ((await cluster.client(index).get("redquorum:node")) === null) {
      assert.ok(performance.now() < until, `node ${index} not taken back within 2 s`);
      await sleep(20);
    }
  }

  before(async () => {
    cluster = await startCluster({ nodeCount: 5 });
  });
  after(() => cluster.stop());
  beforeEach(async () => {
    await cluster.flushAll();
    membershipTesting.mode = "enforce";
  });
  afterEach(async () => {
    membershipTesting.mode = "enforce";
    await Promise.all(open.splice(0).map((redlock) => redlock.close()));
  });

  /**
   * Lock `r` for `holder` on nodes A and C only: B holds a stranger's value
   * while it asks, for longer than a node timeout (the round ends once A
   * and C said yes, and B's call may land after), then it expires.
   */
  async function holdOnAandC(holder: Redlock, ttlMs: number) {
    await cluster.client(1).set("r", "stranger", "PX", 1_000);
    const lock = await holder.acquire(["r"], ttlMs);
    while ((await cluster.client(1).get("r")) === "stranger") {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.deepEqual(
      await cluster.onAll((c) => c.get("r")),
      [lock.value, null, lock.value, null, null],
      "the premise: r held on A and C only",
    );
    return lock;
  }

  it("init records one cluster on every node; the same members in another order or spelling are accepted", async () => {
    await client(urls(0, 1, 2)).init();
    const status = await membershipStatus(urls(0, 1, 2));
    assert.ok(status.record, "a record");
    assert.equal(status.record.epoch, 1);
    assert.equal(status.record.members.length, 3);
    const ids = status.nodes.map((node) => node.id);
    assert.equal(new Set(ids).size, 3, "a member id per node");
    const port = (i: number) => new URL(cluster.urls[i]!).port;
    const respelled = client([
      `redis://localhost:${port(2)}`,
      cluster.urls[0]!,
      `redis://localhost:${port(1)}`,
    ]);
    const lock = await respelled.acquire(["k"], 2_000);
    await respelled.release(lock);
  });

  it("two inits at once on a new cluster, each reaching some nodes first, leave one record on every node: both succeed", async () => {
    // The nodes by server: the first one is where the record goes first.
    const order = await byServer();
    // A's writes reach the first three nodes at once and the last two late;
    // B's the other way round: each wrote its own record first where it is
    // not delayed, and before, each kept those nodes (two clusters, every
    // client refused for good).
    const all = urls(0, 1, 2, 3, 4);
    await Promise.all([
      initWithLateWrites(all, order.slice(3)),
      initWithLateWrites(all, order.slice(0, 3)),
    ]);
    const clusters = await cluster.onAll((c) => c.get("redquorum:cluster"));
    assert.equal(new Set(clusters).size, 1, `one record on every node: ${clusters.join(", ")}`);
    const lock = await client(urls(0, 1, 2, 3, 4)).acquire(["after-inits"], 2_000);
    await lock.release();
  });

  it("two inits at once that spell the first node differently still leave one record on every node", async () => {
    const order = await byServer();
    // B names one node (the servers' first) as localhost: by address, the
    // two inits would start on different nodes.
    const respelled = respell(order[0]!);
    await Promise.all([
      initWithLateWrites(urls(0, 1, 2, 3, 4), order.slice(3)),
      initWithLateWrites(respelled, order.slice(0, 3)),
    ]);
    const clusters = await cluster.onAll((c) => c.get("redquorum:cluster"));
    assert.equal(new Set(clusters).size, 1, `one record on every node: ${clusters.join(", ")}`);
    const lock = await client(respelled).acquire(["after-spelled-inits"], 2_000);
    await lock.release();
  });

  it("clients whose checks meet a first record still being written (on the first node, not yet on the rest) wait for it, whatever their spelling: no node is taken for one that lost its memory", async () => {
    const order = await byServer();
    // A's writes to every node but the first arrive 150 ms late.
    const writing = initWithLateWrites(urls(0, 1, 2, 3, 4), order.slice(1));
    const first = cluster.client(order[0]!);
    while ((await first.get("redquorum:cluster")) === null) await sleep(5);
    // Checked now, the other nodes hold no record. Before, each was taken
    // back as a member that lost its memory ("lost:" marker, the restart
    // quarantine, fencing counters unknown: a majority, so fenced grants
    // needed fencing-floor); a node spelled otherwise than the record
    // refused its client for good ("not a member").
    const respelled = respell(order[2]!);
    const same = client(urls(0, 1, 2, 3, 4));
    const other = client(respelled);
    // A client whose first call is a lock (no retry), its check of the
    // first node 40 ms late: it reads the record after the others, and its
    // votes reach them before the record does. Each refuses, is checked
    // again (which waits for the record) and is asked again; before, the
    // vote was lost and the lock failed.
    let late = true;
    const direct = new Redlock(
      wrappedTransports(urls(0, 1, 2, 3, 4), (real, i) => ({
        async send(args, timeoutMs) {
          if (i === order[0] && args[0] === "MGET" && late) {
            late = false;
            await sleep(40);
          }
          return real.send(args, timeoutMs);
        },
      })),
      options,
    );
    open.push(direct);
    const locked = direct.acquire(["direct"], 2_000).then((lock) => lock.release());
    await Promise.all([same.init(), other.init(), writing, locked]);
    const markers = await cluster.onAll((c) => c.get("redquorum:marker"));
    assert.deepEqual(markers, Array(5).fill("1"), "no node taken for one that lost its memory");
    const clusters = await cluster.onAll((c) => c.get("redquorum:cluster"));
    assert.equal(new Set(clusters).size, 1, `one record on every node: ${clusters.join(", ")}`);
    for (const redlock of [same, other]) {
      const lock = await redlock.acquire(["after-half-written"], 2_000);
      await lock.release();
    }
  });

  it("an init that loses to another init spelling one node otherwise takes the winner's record, and its client works: the node is read again, not judged on its answer from before the record", async () => {
    const order = await byServer();
    const respelled = respell(order[2]!);
    // A's writes all arrive 150 ms late: B's record, which names one node
    // as localhost, wins. A checked every node before any record; before,
    // its client then refused that node for good ("holds no membership
    // record"), judged on that first answer once it read the record.
    const a = lateWriter(urls(0, 1, 2, 3, 4), [0, 1, 2, 3, 4]);
    await Promise.all([a.init(), client(respelled).init()]);
    const clusters = await cluster.onAll((c) => c.get("redquorum:cluster"));
    assert.equal(new Set(clusters).size, 1, `one record on every node: ${clusters.join(", ")}`);
    const lock = await a.acquire(["after-respelled-win"], 2_000);
    await lock.release();
  });

  it("an init that cannot read one node's run_id records nothing (another init, picking by run_id, could start on another node), and an init run again records it", async () => {
    const silent = wrappedTransports(urls(0, 1, 2, 3, 4), (real, i) => ({
      async send(args, timeoutMs) {
        if (i === 2 && args[0] === "INFO" && args[1] === "server") throw new Error("no answer");
        return real.send(args, timeoutMs);
      },
    }));
    const blind = new Redlock(silent, options);
    open.push(blind);
    await blind.init();
    assert.deepEqual(
      await cluster.onAll((c) => c.get("redquorum:cluster")),
      Array(5).fill(null),
      "no record written",
    );
    await client(urls(0, 1, 2, 3, 4)).init();
    const clusters = await cluster.onAll((c) => c.get("redquorum:cluster"));
    assert.equal(new Set(clusters).size, 1, `one record on every node: ${clusters.join(", ")}`);
    assert.ok(clusters[0], "a record");
  });

  it("an init whose write on the first node is applied but its answer lost still writes the rest: no majority is left without a record", async () => {
    const first = (await byServer())[0]!;
    const transports = wrappedTransports(urls(0, 1, 2, 3, 4), (real, i) => ({
      async send(args, timeoutMs) {
        const reply = await real.send(args, timeoutMs);
        if (i === first && args[0] === "EVAL" && args[1] === writeRecordScript.source) {
          throw new Error("the answer was lost");
        }
        return reply;
      },
    }));
    const interrupted = new Redlock(transports, options);
    open.push(interrupted);
    await assert.rejects(interrupted.init(), /could not record the membership/);
    const clusters = await cluster.onAll((c) => c.get("redquorum:cluster"));
    assert.equal(new Set(clusters).size, 1, `one record on every node: ${clusters.join(", ")}`);
    assert.ok(clusters[0], "a record");
    const lock = await client(urls(0, 1, 2, 3, 4)).acquire(["after-lost-answer"], 2_000);
    await lock.release();
    const markers = await cluster.onAll((c) => c.get("redquorum:marker"));
    assert.deepEqual(markers, Array(5).fill("1"), "no node taken for one that lost its memory");
  });

  it("an init whose first record's writes to a majority get no answer at first asks them again: the record ends on every node, none taken for one that lost its memory", async () => {
    const order = await byServer();
    const silentOnce = new Set(order.slice(2)); // three of the rest: a majority without the record
    const transports = wrappedTransports(urls(0, 1, 2, 3, 4), (real, i) => ({
      async send(args, timeoutMs) {
        if (silentOnce.has(i) && args[0] === "EVAL" && args[1] === writeRecordScript.source) {
          silentOnce.delete(i);
          throw new Error("connection reset");
        }
        return real.send(args, timeoutMs);
      },
    }));
    const init = new Redlock(transports, options);
    open.push(init);
    // Before, the init failed ("another init or change wrote a record there
    // first": a wrong reason), and the first client took the three for
    // members that lost their memory: fenced grants needed fencing-floor.
    await init.init();
    const clusters = await cluster.onAll((c) => c.get("redquorum:cluster"));
    assert.equal(new Set(clusters).size, 1, `one record on every node: ${clusters.join(", ")}`);
    assert.ok(clusters[0], "a record");
    const lock = await client(urls(0, 1, 2, 3, 4)).acquire(["after-retried-init"], 2_000);
    assert.equal(lock.fence, 1n);
    await lock.release();
    const markers = await cluster.onAll((c) => c.get("redquorum:marker"));
    assert.deepEqual(markers, Array(5).fill("1"), "no node taken for one that lost its memory");
  });

  it("an init whose write to a node got no answer until a client took that node back as a member that lost its memory says so, rather than succeed", async () => {
    const order = await byServer();
    const k = order[4]!;
    let silent = true;
    const transports = wrappedTransports(urls(0, 1, 2, 3, 4), (real, i) => ({
      async send(args, timeoutMs) {
        if (i === k && silent && args[0] === "EVAL" && args[1] === writeRecordScript.source) {
          throw new Error("connection reset");
        }
        return real.send(args, timeoutMs);
      },
    }));
    const init = new Redlock(transports, options);
    open.push(init);
    const initialising = init.init();
    // The record on every node but k: a client's first lock takes k back
    // (alone without the record, it is a member that lost its memory).
    for (const i of order.slice(0, 4)) {
      while ((await cluster.client(i).get("redquorum:cluster")) === null) await sleep(5);
    }
    const lock = await client(urls(0, 1, 2, 3, 4)).acquire(["meanwhile"], 2_000);
    await lock.release();
    // The take-back is k's check, which may end after the acquire's
    // majority of the other four answered (on a loaded machine it did):
    // waited for, within a bound far above a check's (not a timing test).
    const deadline = performance.now() + 10_000;
    let marker = "";
    while (!/^lost:/.test(marker)) {
      assert.ok(performance.now() < deadline, `k was not taken back: its marker is ${marker}`);
      marker = String(await cluster.client(k).get("redquorum:marker"));
      if (!/^lost:/.test(marker)) await sleep(20);
    }
    silent = false;
    // The init's next write to k finds the same record there: before, it
    // counted it as written and resolved, hiding the node's quarantine.
    await assert.rejects(initialising, /took it back as a member that lost its memory/);
  });

  it("refuses a second list that shares a majority's worth of nodes, before any grant", async () => {
    await markNode(cluster.client(3)); // D in service, as past its quarantine
    const first = client(urls(0, 1, 2));
    await first.init();
    await holdOnAandC(first, 3_000);
    const second = client(urls(0, 1, 3));
    await assert.rejects(second.acquire(["r"], 3_000), (error: unknown) => {
      assert.ok(error instanceof MembershipError, `got ${String(error)}`);
      assert.equal(error.code, "ERR_MEMBERSHIP");
      assert.match(error.message, new RegExp(`${new URL(cluster.urls[3]!).port}.*not a member`));
      return true;
    });
    assert.equal(await cluster.client(1).get("r"), null, "nothing written on B");
    assert.equal(await cluster.client(3).get("r"), null, "nothing written on D");
    // D checked first, before A's and B's record is read: D may then be a
    // node a first record is on its way to, and is read again, but it
    // still refuses the list at first contact.
    const dFirst = wrappedTransports(urls(0, 1, 3), (real, i) => ({
      async send(args, timeoutMs) {
        if (i < 2 && args[0] === "MGET") await sleep(200);
        return real.send(args, timeoutMs);
      },
    }));
    const third = new Redlock(dFirst, options);
    open.push(third);
    await assert.rejects(third.acquire(["r"], 3_000), (error: unknown) => {
      assert.ok(error instanceof MembershipError, `got ${String(error)}`);
      assert.match(error.message, new RegExp(`${new URL(cluster.urls[3]!).port}.*not a member`));
      return true;
    });
  });

  it("negative control: with the check off, the second list takes the lock the first holds", async () => {
    membershipTesting.mode = "off";
    await markNode(cluster.client(3));
    const first = client(urls(0, 1, 2));
    await first.init();
    const held = await holdOnAandC(first, 3_000);
    const second = client(urls(0, 1, 3));
    const stolen = await second.acquire(["r"], 3_000);
    assert.ok(held.remainingMs() > 0 && stolen.remainingMs() > 0, "both hold r: the double grant");
  });

  it("replaces a member while a lock it granted is held: the new member joins in quarantine, the old list is told to reload", async () => {
    const first = client(urls(0, 1, 2));
    await first.init();
    const held = await holdOnAandC(first, 2_500);
    const report = await changeMembers(urls(0, 1, 2), {
      remove: cluster.urls[2]!,
      add: cluster.urls[3]!,
    });
    assert.equal(report.to.epoch, report.from.epoch + 1);
    const replaced = client(urls(0, 1, 3));
    await assert.rejects(replaced.acquire(["r"], 2_000), ResourceLockedError);
    assert.ok(held.remainingMs() > 0, "the premise: the old lock was still valid");
    await assert.rejects(first.extend(held, 2_000), (error: unknown) => {
      assert.ok(error instanceof MembershipError, `got ${String(error)}`);
      assert.match(error.message, /Reload the node list|reload/i);
      return true;
    });
    // Once the old lock and the quarantine are over, the new list serves.
    const waiting = new Redlock(urls(0, 1, 3), {
      ...options,
      retry: { retries: 100, delayMs: 100, jitterMs: 0 },
    });
    open.push(waiting);
    const lock = await waiting.acquire(["r"], 2_000);
    assert.ok(lock.remainingMs() > 0);
  });

  it("negative control: a replacement that joins without the quarantine grants the old member's lock twice", async () => {
    const first = client(urls(0, 1, 2));
    await first.init();
    const held = await holdOnAandC(first, 3_000);
    const nodes = createNodes(urls(0, 1, 2, 3));
    try {
      await applyMemberChange(nodes.slice(0, 3), { removeIndex: 2, add: nodes[3]! }, 2_000, false);
    } finally {
      await Promise.all(nodes.map((node) => node.close()));
    }
    const stolen = await client(urls(0, 1, 3)).acquire(["r"], 3_000);
    assert.ok(held.remainingMs() > 0 && stolen.remainingMs() > 0, "both hold r: the double grant");
  });

  it("refuses to replace the only member (its successor's counters could not be repaired) and to add a member under another spelling", async () => {
    await client(urls(0)).init();
    await assert.rejects(
      changeMembers(urls(0), { add: cluster.urls[1]!, remove: 0 }),
      (error: unknown) =>
        error instanceof MembershipError && /cannot replace the only member/.test(error.message),
    );
    await client(urls(1, 2, 3)).init();
    const port = new URL(cluster.urls[2]!).port;
    await assert.rejects(
      changeMembers(urls(1, 2, 3), { add: `redis://localhost:${port}` }),
      (error: unknown) =>
        error instanceof MembershipError && /is a member already/.test(error.message),
    );
    // Neither changed anything.
    assert.equal((await membershipStatus(urls(0))).record?.members.length, 1);
    assert.equal((await membershipStatus(urls(1, 2, 3))).record?.epoch, 1);
  });

  it("the node to add must be a master of its own: another database of a member's server, or a replica, is refused before anything changes", async () => {
    await client(urls(0, 1, 2)).init();
    await assert.rejects(
      changeMembers(urls(0, 1, 2), { add: `${cluster.urls[0]!}/5` }),
      (error: unknown) =>
        error instanceof MembershipError && /is the same Redis server as/.test(error.message),
    );
    const replica = cluster.client(3);
    await replica.call("REPLICAOF", "127.0.0.1", new URL(cluster.urls[4]!).port);
    try {
      await assert.rejects(
        changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! }),
        (error: unknown) => error instanceof MembershipError && /is a slave/.test(error.message),
      );
    } finally {
      await replica.call("REPLICAOF", "NO", "ONE");
    }
    // Before, both landed, and every client of the new list was refused
    // at first contact (and of the old list, its epoch passed).
    assert.equal((await membershipStatus(urls(0, 1, 2))).record?.epoch, 1);
    const old = client(urls(0, 1, 2));
    await old.release(await old.acquire(["a"], 2_000));
  });

  it("a change run again after a member lost its memory leaves that member alone: the new list's clients take it back", async () => {
    await client(urls(0, 1, 2)).init();
    await changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! });
    await cluster.client(1).flushall();
    // Run again with the list it started from, as after a failure.
    const again = await changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! });
    assert.equal(again.to.epoch, 2);
    assert.match(again.nodes[1]!.result, /^left alone: holds nothing/);
    // Before, node 1 was given the record without its id, and every client
    // of the new list was refused ("not a member … holds no membership record").
    assert.equal(await cluster.client(1).get("redquorum:cluster"), null);
    // Node 1 and the node added sit out their quarantines meanwhile.
    const four = new Redlock(urls(0, 1, 2, 3), {
      ...options,
      retry: { retries: 100, delayMs: 100, jitterMs: 0 },
    });
    open.push(four);
    await four.release(await four.acquire(["a"], 2_000));
  });

  it("a change run again that reaches too few members because some lost their memory says they answer and what takes them back", async () => {
    await client(urls(0, 1, 2, 3)).init();
    await changeMembers(urls(0, 1, 2, 3), { add: cluster.urls[4]! });
    for (const i of [1, 2, 3]) await cluster.client(i).flushall();
    // Node 0 and the node added hold the record: 2 of the 5 members, 3
    // needed. Before, the error said only "run it
    // again once they answer", though they answered.
    await assert.rejects(
      changeMembers(urls(0, 1, 2, 3), { add: cluster.urls[4]! }),
      (error: unknown) => {
        assert.ok(error instanceof MembershipError, String(error));
        assert.match(error.message, /reached 2 of 5 members, 3 needed/);
        assert.match(error.message, /left alone: holds nothing/);
        assert.match(
          error.message,
          /answers already, but counts only once a client of the members has taken it back/,
        );
        return true;
      },
    );
  });

  it("a change run again with a list another change left behind is refused, naming the members", async () => {
    await client(urls(0, 1, 2)).init();
    await changeMembers(urls(0, 1, 2), { remove: cluster.urls[0]!, add: cluster.urls[3]! });
    // "add 3" from the first list: 3 is a member, but 0 was removed, not kept.
    await assert.rejects(
      changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! }),
      (error: unknown) =>
        error instanceof MembershipError &&
        /not as this change from this list would: the members are now .*\(epoch 2\)/.test(
          error.message,
        ),
    );
    const members = client(urls(1, 2, 3));
    await members.release(await members.acquire(["a"], 2_000));
  });

  it("replaces a member that lost its memory (as one that is down), and says so when a join fails after the epoch moved", async () => {
    await client(urls(0, 1, 2)).init();
    await cluster.client(2).flushall();
    // Not by its own keyspace under another spelling: the change would
    // write the new record on it as the member removed, and the join find
    // it taken (both lists refused after).
    const port = new URL(cluster.urls[2]!).port;
    await assert.rejects(
      changeMembers(urls(0, 1, 2), {
        remove: cluster.urls[2]!,
        add: `redis://localhost:${port}`,
      }),
      (error: unknown) =>
        error instanceof MembershipError &&
        /the member to remove, which lost its memory/.test(error.message),
    );
    assert.equal(await cluster.client(2).get("redquorum:cluster"), null, "nothing written on it");
    // Before: "… is not a member: nothing to remove".
    const report = await changeMembers(urls(0, 1, 2), {
      remove: cluster.urls[2]!,
      add: cluster.urls[3]!,
    });
    assert.equal(report.to.epoch, 2);
    const replaced = client(urls(0, 1, 3));
    const waiting = new Redlock(urls(0, 1, 3), {
      ...options,
      retry: { retries: 100, delayMs: 100, jitterMs: 0 },
    });
    open.push(waiting);
    await waiting.release(await waiting.acquire(["a"], 2_000));
    await replaced.close();
    // A node that refuses writes past the change's timeout: the epoch
    // moves, the join fails, and the error says what the members are now.
    await cluster.client(4).call("CLIENT", "PAUSE", "3000", "WRITE");
    await assert.rejects(
      changeMembers(urls(0, 1, 3), { add: cluster.urls[4]! }, { timeoutMs: 1_000 }),
      (error: unknown) =>
        error instanceof MembershipError &&
        /could not join .*The members are now .*\(epoch 3\): the old list is refused/.test(
          error.message,
        ),
    );
    await cluster.client(4).call("CLIENT", "UNPAUSE");
  });

  it("adds a member and removes one: each new list works, each old one is refused", async () => {
    await client(urls(0, 1, 2)).init();
    await changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! });
    const four = client(urls(0, 1, 2, 3));
    await four.release(await four.acquire(["a"], 2_000));
    await assert.rejects(client(urls(0, 1, 2)).acquire(["a"], 2_000), MembershipError);
    await changeMembers(urls(0, 1, 2, 3), { remove: cluster.urls[0]! });
    // Run again (as after a failure): what landed is not repeated, and it
    // does not fail on the list that still names the node removed.
    const again = await changeMembers(urls(0, 1, 2, 3), { remove: cluster.urls[0]! });
    assert.equal(again.to.epoch, 3);
    assert.equal(again.nodes[0]!.result, "removed already");
    const three = client(urls(1, 2, 3));
    await three.release(await three.acquire(["a"], 2_000));
    await assert.rejects(four.acquire(["a"], 2_000), MembershipError);
    const status = await membershipStatus(urls(1, 2, 3));
    assert.equal(status.record?.epoch, 3);
    assert.equal(status.record?.members.length, 3);
  });

  it("records the membership of a cluster in use without losing a lock: its holder extends it after", async () => {
    for (const i of [0, 1, 2]) await markNode(cluster.client(i));
    const user = client(urls(0, 1, 2));
    const lock = await user.acquire(["kept"], 3_000);
    assert.equal(
      (await membershipStatus(urls(0, 1, 2))).record,
      undefined,
      "the premise: no record yet",
    );
    await client(urls(0, 1, 2)).init();
    assert.ok((await membershipStatus(urls(0, 1, 2))).record);
    const extended = await user.extend(lock, 3_000);
    assert.ok(extended.remainingMs() > 2_000);
  });

  it("an extension refused by every node for a record read meanwhile is asked again on each: one node's check stamps them all", async () => {
    for (const i of [0, 1, 2]) await markNode(cluster.client(i));
    // Node 0's refusal is handled first: its check reads the new record,
    // which stamps every node's votes. Nodes 1 and 2 refused the same round
    // with the old stamp; their refusals come after that check (held here
    // until node 0's vote was asked again), and must be asked again too.
    let lockValue: string | undefined;
    let node0Votes = 0;
    let openGate = () => {};
    const gate = new Promise<void>((resolve) => {
      openGate = resolve;
    });
    const connections = [0, 1, 2].map((i) => new Redis(cluster.urls[i]!));
    const transports: NodeTransport[] = connections.map((connection, i) => ({
      endpoint: cluster.urls[i]!.replace("redis://", ""),
      async send(args: readonly string[]) {
        const [command, ...rest] = args as [string, ...string[]];
        const reply = connection.call(command, ...rest);
        if (lockValue === undefined || !args.includes(lockValue)) return reply;
        if (i === 0 && ++node0Votes === 2) openGate();
        if (i === 0) return reply;
        const settled = await reply.then(
          (value) => ({ value }),
          (error: unknown) => ({ error }),
        );
        // Bounded: without node 0's second vote the round still ends.
        await Promise.race([gate, new Promise((r) => setTimeout(r, 2_000))]);
        if ("error" in settled) throw settled.error;
        return settled.value;
      },
      close: async () => {
        connection.disconnect();
      },
    }));
    const user = new Redlock(transports, options);
    open.push(user);
    const lock = await user.acquire(["kept"], 3_000);
    await client(urls(0, 1, 2)).init();
    lockValue = lock.value;
    const extended = await user.extend(lock, 3_000);
    assert.ok(extended.remainingMs() > 2_000);
    assert.equal(node0Votes, 2, "the premise: node 0 refused once, then voted again");
  });

  it("a member flushed at its recorded address rejoins as itself; until then the status names it as lost, not as a problem of the list", async () => {
    const redlock = client(urls(0, 1, 2));
    await redlock.init();
    const before = await membershipStatus(urls(0, 1, 2));
    assert.equal(before.lostMemory, undefined);
    await cluster.client(1).flushall();
    // Clients of this list are not refused: the first call takes it back.
    const lost = await membershipStatus(urls(0, 1, 2));
    assert.equal(lost.problem, undefined);
    assert.deepEqual(lost.lostMemory, [before.nodes[1]!.endpoint]);
    assert.equal(lost.record?.epoch, before.record?.epoch);
    const fresh = client(urls(0, 1, 2));
    await fresh.release(await fresh.acquire(["x"], 2_000));
    // Read again until node 1 answers as itself: the lock needs a majority
    // only, so node 1's first contact (the checks that take it back) may
    // still run when it is released, and a status read of a node can time
    // out on a loaded machine (it failed once in CI, beside two busy cores,
    // reading no id). Both end within the check timeout.
    let after = await membershipStatus(urls(0, 1, 2));
    const deadline = performance.now() + 2 * defaults.checkTimeoutMs;
    while (after.nodes[1]!.id !== before.nodes[1]!.id && performance.now() < deadline) {
      await sleep(50);
      after = await membershipStatus(urls(0, 1, 2));
    }
    assert.equal(after.nodes[1]!.id, before.nodes[1]!.id, JSON.stringify(after.nodes[1]));
    assert.equal(after.record?.epoch, before.record?.epoch);
    assert.equal(after.lostMemory, undefined);
    assert.equal(after.problem, undefined);
  });

  it("more than N - Q members without a record: the status names them and says no majority is left in service", async () => {
    await client(urls(0, 1, 2, 3, 4)).init();
    for (const index of [1, 2, 3]) await cluster.client(index).flushall();
    const status = await membershipStatus(urls(0, 1, 2, 3, 4));
    assert.equal(status.lostMemory?.length, 3);
    assert.match(String(status.problem), /3 of 5 members hold no membership record/);
    assert.match(
      String(status.problem),
      /clients take none back .* `redquorum fencing-floor` takes them back/,
    );
  });

  it("a client whose view is an epoch behind does not take back a member that lost its memory at that epoch: it would make a majority of the old members beside the new members' majority", async () => {
    const old = client(urls(0, 1, 2));
    await old.init();
    await old.release(await old.acquire(["warm"], 1_000));
    // Node 2 is replaced by node 3 while it is out of reach: it keeps epoch
    // 1; nodes 0, 1 and 3 move to epoch 2.
    cluster.cluster.pause(2);
    try {
      await changeMembers(urls(0, 1, 2), { remove: cluster.urls[2]!, add: cluster.urls[3]! });
    } finally {
      cluster.cluster.resume(2);
    }
    const epoch2 = await cluster.client(1).get("redquorum:cluster");
    assert.match(String(epoch2), /:2:/);
    // Node 0 loses its memory; node 1 is out of reach of the old list's client.
    await cluster.client(0).flushall();
    cluster.cluster.pause(1);
    try {
      // Taken back at epoch 1, node 0 would make a majority of the old
      // members with node 2, while nodes 1 and 3 are one of the new members.
      await assert.rejects(old.acquire(["x"], 1_000));
      assert.equal(
        await cluster.client(0).get("redquorum:cluster"),
        null,
        "node 0 taken back at epoch 1",
      );
    } finally {
      cluster.cluster.resume(1);
    }
    // With node 1 answering, the old list's client reads epoch 2: told to reload.
    await assert.rejects(old.acquire(["x"], 1_000), MembershipError);
    assert.notEqual(
      await cluster.client(0).get("redquorum:cluster"),
      await cluster.client(2).get("redquorum:cluster"),
    );
    // The new list's client takes node 0 back at epoch 2.
    const fresh = client(urls(0, 1, 3));
    await fresh.acquire(["y"], 1_000).catch(() => {});
    await nodeRejoined(0);
    assert.equal(await cluster.client(0).get("redquorum:cluster"), epoch2);
  });

  it("a member's address answering with another memory (an ID counter, its marker and this memory's identity, no record) is taken back with that counter repaired: no ID is handed out again", async () => {
    await client(urls(0, 1, 2)).init();
    // No node restarts here: what is durable on disk is not what this tests.
    const idOptions = {
      nodeTimeoutMs: 500,
      key: "t:id",
      unsafeAllowNonDurableNodes: true,
      onWarning: () => {},
    };
    const first = new NextId(urls(0, 1, 2), idOptions);
    const handedOut = new Set<bigint>();
    try {
      await first.init();
      for (let i = 0; i < 10; i++) handedOut.add(await first.next());
    } finally {
      await first.close();
    }
    // Node 1 missed the rounds (a minority may lag behind).
    await cluster.client(1).set("t:id", "3");
    // Node 2's address now answers with another memory: no membership
    // record, but what NextId leaves on a node (another deployment's
    // counter, or one from before the membership was recorded): a counter
    // below what was handed out, its marker "1", this memory's identity.
    const node2 = cluster.client(2);
    await node2.flushall();
    await leaveIdCounter(node2, "t:id", "5");
    // Node 0 answers this client's reads of the members' records, but none
    // of its scripts: a round needs nodes 1 and 2, and trusted as it is,
    // node 2's counter (5) and node 1's (3) handed out IDs from 6 on again.
    const transports = wrappedTransports(urls(0, 1, 2), (real, i) => ({
      send(args, timeoutMs) {
        if (i === 0 && (args[0] === "EVAL" || args[0] === "EVALSHA")) {
          return Promise.reject(new Error("out of reach for rounds (the test's)"));
        }
        return real.send(args, timeoutMs);
      },
    }));
    // One round per call.
    const second = new NextId(transports, { ...idOptions, retry: { retries: 0 } });
    try {
      for (let i = 0; i < 3; i++) {
        const id = await second.next().catch(() => undefined);
        if (id !== undefined) {
          assert.ok(!handedOut.has(id), `ID ${id} handed out again`);
          handedOut.add(id);
        }
      }
      assert.ok(await node2.get("redquorum:node"), "node 2 was taken back");
    } finally {
      await second.close();
    }
    const third = new NextId(urls(0, 1, 2), idOptions);
    try {
      const next = await third.next();
      assert.ok(next > 10n, `ID ${next} after 10 were handed out`);
    } finally {
      await third.close();
    }
  });

  it('a member\'s address answering with another memory that says it is in service (marker "1", a fencing counter, no memory recorded) is taken back as a node that lost its memory: no token is given twice', async () => {
    const all = urls(0, 1, 2, 3, 4);
    const first = client(all);
    await first.init();
    let highest = 0n;
    for (let i = 0; i < 5; i++) {
      const lock = await first.acquire(["f"], 2_000);
      highest = lock.fence!;
      await first.release(lock);
    }
    // Nodes 3 and 4 missed the grants (a minority may lag behind).
    for (const i of [3, 4]) {
      await cluster.client(i).mset("redquorum:fence:f", "1", "redquorum:fence-max", "1");
    }
    // Node 2's address now answers with another memory that says it is in
    // service: the marker "1" and a fencing counter below the tokens given,
    // but no memory identity recorded (an older version's, or a hand-made
    // copy). Its server has been up longer than any lock, so a restart
    // quarantine judged from its start ends at once.
    const node2 = cluster.client(2);
    await node2.flushall();
    await node2.mset("redquorum:marker", "1", "redquorum:fence:f", "2", "redquorum:fence-max", "2");
    // Nodes 0 and 1 answer this client's checks, but none of its grants:
    // a grant needs nodes 2, 3 and 4, and trusted as they are, their
    // counters gave a token at or below one given already. Node 2 is
    // checked last, so it is taken back by its address before its certify.
    const grants = new Set([acquireScript.sha1, fenceScript.sha1]);
    const grantSources = new Set([acquireScript.source, fenceScript.source]);
    const transports = wrappedTransports(all, (real, i) => ({
      async send(args, timeoutMs) {
        if (i === 2 && args[0] === "MGET") await sleep(200);
        const grant =
          (args[0] === "EVALSHA" && grants.has(String(args[1]))) ||
          (args[0] === "EVAL" && grantSources.has(String(args[1])));
        if (i < 2 && grant) throw new Error("out of reach for grants");
        return real.send(args, timeoutMs);
      },
    }));
    const second = new Redlock(transports, options);
    open.push(second);
    try {
      // Past the quarantine a restart judged from the server's start gives.
      const until = performance.now() + options.maxTtlMs + 1_000;
      while (performance.now() < until) {
        const lock = await second.acquire(["f"], 2_000).catch(() => undefined);
        if (lock) {
          assert.ok(lock.fence! > highest, `token ${lock.fence} given after ${highest}`);
          highest = lock.fence!;
          await second.release(lock);
        }
        await sleep(200);
      }
      assert.ok(await node2.get("redquorum:node"), "node 2 was taken back");
    } finally {
      await second.close();
    }
  });

  describe("two changes of members at once", () => {
    /**
     * Nodes 0–3 are the members (epoch 2). Two changes read them at that
     * epoch, then write: one removing node 3 reaches nodes 0 and 1 only,
     * the other removing node 1 reaches nodes 2 and 3 only (each one's
     * writes to the other two fail). Neither reaches a majority of the 4.
     */
    async function splitRemovals() {
      await client(urls(0, 1, 2)).init();
      await changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! });
      // Node 3 as once its quarantine is over (what these tests are about is membership).
      await markNode(cluster.client(3));
      await cluster.client(3).del("redquorum:quarantine");
      let reads = 0;
      let bothRead = () => {};
      const gate = new Promise<void>((resolve) => {
        bothRead = resolve;
      });
      const racing = (reachable: number[]) =>
        wrappedTransports(urls(0, 1, 2, 3), (real, i) => ({
          async send(args, timeoutMs) {
            if (args[0] === "MGET") {
              const reply = await real.send(args, timeoutMs);
              if (++reads === 8) bothRead();
              return reply;
            }
            // Written only once both changes have read the members.
            await gate;
            if (!reachable.includes(i)) throw new Error("connection reset (the test's)");
            return real.send(args, timeoutMs);
          },
        }));
      const results = await Promise.allSettled([
        changeMembers(racing([0, 1]), { remove: 3 }, { timeoutMs: 1_000 }),
        changeMembers(racing([2, 3]), { remove: 1 }, { timeoutMs: 1_000 }),
      ]);
      for (const result of results) {
        assert.equal(result.status, "rejected", "the premise: neither change reached a majority");
      }
    }

    /**
     * A change of nodes 0–2's members whose ballots wait at a gate:
     * \`reachedBallot\` resolves once it has read the members, \`letGo()\`
     * sends its ballots on; \`outcome\` is its report or its error.
     */
    function heldAtBallots(change: { add: string }) {
      let atBallot = () => {};
      const reachedBallot = new Promise<void>((resolve) => {
        atBallot = resolve;
      });
      let letGo = () => {};
      const gate = new Promise<void>((resolve) => {
        letGo = resolve;
      });
      const held = wrappedTransports(urls(0, 1, 2), (real) => ({
        async send(args, timeoutMs) {
          if (args[0] === "EVAL" && args[1] === prepareScript.source) {
            atBallot();
            await gate;
          }
          return real.send(args, timeoutMs);
        },
      }));
      const outcome = changeMembers(held, change, { timeoutMs: 1_000 }).catch(
        (error: unknown) => error,
      );
      return { reachedBallot, letGo, outcome };
    }

    it("two changes that each reached half of the members: the lists of both cannot both take a lock", async () => {
      await splitRemovals();
      const unfenced = { ...options, fencing: false };
      // Each change's list, checked with the node holding the other
      // change's record last (its check answers 200 ms late): each client's
      // view is then its own change's record.
      const slowCheck = (indexes: number[], slow: number) =>
        wrappedTransports(urls(...indexes), (real, i) => ({
          async send(args, timeoutMs) {
            if (indexes[i] === slow && args[0] === "MGET") await sleep(200);
            return real.send(args, timeoutMs);
          },
        }));
      const first = new Redlock(slowCheck([0, 1, 2], 2), unfenced);
      const second = new Redlock(slowCheck([2, 3, 0], 0), unfenced);
      open.push(first, second);
      const outcomes = await Promise.allSettled([
        first.acquire(["r"], 2_000),
        second.acquire(["r"], 2_000),
      ]);
      const granted = outcomes.filter((outcome) => outcome.status === "fulfilled");
      assert.ok(granted.length <= 1, `both lists took r: ${granted.length} holders`);
    });

    it("a change whose record another change completed reports success: the other reports that it was not its own", async () => {
      await client(urls(0, 1, 2)).init();
      // Change A (node 3 added): its accepts land on every member, but it
      // never sees their replies until change B (node 4 added), started
      // then, has completed A's record (Paxos: B must choose what a
      // majority accepted) and written it.
      let accepted = 0;
      let aAccepted = () => {};
      const acceptsLanded = new Promise<void>((resolve) => {
        aAccepted = resolve;
      });
      let bDone = () => {};
      const bSettled = new Promise<void>((resolve) => {
        bDone = resolve;
      });
      const unseen = wrappedTransports(urls(0, 1, 2, 3), (real) => ({
        async send(args, timeoutMs) {
          const reply = await real.send(args, timeoutMs);
          if (args[0] === "EVAL" && args[1] === acceptScript.source && accepted < 3) {
            if (++accepted === 3) aAccepted();
            await bSettled;
            throw new Error("reply lost (the test's)");
          }
          return reply;
        },
      }));
      const a = changeMembers(unseen.slice(0, 3), { add: unseen[3]! }, { timeoutMs: 1_000 });
      await acceptsLanded;
      const b = await changeMembers(urls(0, 1, 2), { add: cluster.urls[4]! }, { timeoutMs: 1_000 })
        .catch((error: unknown) => error)
        .finally(bDone);
      assert.ok(b instanceof MembershipError, `B: ${String(b)}`);
      assert.match(
        b.message,
        /another change of members, run before or at the same time, was completed instead/,
      );
      // Before, A's next ballots all met members holding its record
      // ("moved") and it said it had not reached them: both changes
      // failed, and the operator was told to run both again.
      const report = await a;
      assert.equal(report.to.epoch, 2);
      const addresses = report.to.members.map((member) => member.address).sort();
      assert.deepEqual(
        addresses,
        urls(0, 1, 2, 3)
          .map((url) => new URL(url).host)
          .sort(),
      );
      const status = await membershipStatus(urls(0, 1, 2, 3));
      assert.equal(status.record?.epoch, 2, String(status.problem));
      assert.equal(status.nodes.filter((node) => node.id !== undefined).length, 4);
      assert.equal(await cluster.client(4).get("redquorum:node"), null, "B's node did not join");
    });

    it("a change whose members moved on to another change's record before its first ballot says that change was completed instead", async () => {
      await client(urls(0, 1, 2)).init();
      // Change B (node 4 added) has read the members at epoch 1; its
      // ballots wait until change A (node 3 added) has completed.
      const b = heldAtBallots({ add: cluster.urls[4]! });
      await b.reachedBallot;
      const a = await changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! }, { timeoutMs: 1_000 });
      assert.equal(a.to.epoch, 2);
      b.letGo();
      const error = await b.outcome;
      assert.ok(error instanceof MembershipError, `B: ${String(error)}`);
      // Before, B's six ballots met members holding A's record ("moved")
      // and it said it had not reached them: run it again once they answer.
      assert.match(
        error.message,
        /another change of members, run before or at the same time, was completed instead: the members are now .* \(epoch 2\)/,
      );
      assert.ok(error.message.includes(new URL(cluster.urls[3]!).host), error.message);
      assert.equal(await cluster.client(4).get("redquorum:node"), null, "B's node did not join");
    });

    it("one change run twice at once, the second run's ballots after the first run completed it: the second says its other run completed it", async () => {
      await client(urls(0, 1, 2)).init();
      const second = heldAtBallots({ add: cluster.urls[3]! });
      await second.reachedBallot;
      const first = await changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! });
      second.letGo();
      const error = await second.outcome;
      assert.ok(error instanceof MembershipError, `second run: ${String(error)}`);
      // Each run gives the node to add an id of its own: the first run's
      // record is this change's, not another's.
      assert.match(
        error.message,
        /this change, run twice at the same time, was completed by its other run/,
      );
      assert.doesNotMatch(error.message, /another change/);
      assert.equal(first.to.members.length, 4);
      const status = await membershipStatus(urls(0, 1, 2, 3));
      assert.equal(status.record?.epoch, 2, String(status.problem));
    });

    it("run again, a change completes one of the two: its list works, the other's is refused", async () => {
      await splitRemovals();
      const report = await changeMembers(urls(0, 1, 2, 3), { remove: 3 }).catch(
        (error: unknown) => error,
      );
      const status = await membershipStatus(urls(0, 1, 2, 3));
      assert.equal(status.record?.epoch, 3, String(report));
      // One of the two removals, whichever the run completed.
      const removed = status.nodes.findIndex(
        (node) => !status.record!.members.some((member) => member.id === node.id),
      );
      assert.ok(removed === 1 || removed === 3, `removed node ${removed}`);
      const unfenced = { ...options, fencing: false };
      const memberList = new Redlock(removed === 3 ? urls(0, 1, 2) : urls(0, 2, 3), unfenced);
      const otherList = new Redlock(removed === 3 ? urls(0, 2, 3) : urls(0, 1, 2), unfenced);
      open.push(memberList, otherList);
      const lock = await memberList.acquire(["r"], 2_000);
      assert.ok(lock.remainingMs() > 0);
      await assert.rejects(otherList.acquire(["s"], 2_000));
    });
  });

  it("a change stopped once the members accepted it: they refuse every vote, saying why, until the change run again writes it", async () => {
    await client(urls(0, 1, 2)).init();
    // Every record write fails: the change stops after its accept phase.
    const stopped = wrappedTransports(urls(0, 1, 2, 3), (real) => ({
      send(args, timeoutMs) {
        if (args[0] === "EVAL" && args[1] === writeRecordScript.source) {
          return Promise.reject(new Error("connection reset (the test's)"));
        }
        return real.send(args, timeoutMs);
      },
    }));
    await assert.rejects(changeMembers(stopped.slice(0, 3), { add: stopped[3]! }), MembershipError);
    for (const i of [0, 1, 2]) {
      assert.match(String(await cluster.client(i).get("redquorum:cluster")), /^changing:/);
    }
    assert.match(
      String((await membershipStatus(urls(0, 1, 2))).problem),
      /a change of members is under way on .*run the last one again/,
    );
    const waiting = client(urls(0, 1, 2));
    await assert.rejects(waiting.acquire(["r"], 1_000), /a change of members is under way/);
    // Run again, with a new id drawn for node 3: the record accepted before
    // (and its id for node 3) is the one written.
    const report = await changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! });
    assert.equal(report.to.epoch, 2);
    const joined = report.to.members.find(
      (member) => member.address === report.nodes.at(-1)!.endpoint,
    );
    assert.equal(await cluster.client(3).get("redquorum:node"), joined?.id);
    for (const i of [0, 1, 2, 3]) {
      assert.doesNotMatch(String(await cluster.client(i).get("redquorum:cluster")), /^changing:/);
    }
    await markNode(cluster.client(3));
    await cluster.client(3).del("redquorum:quarantine");
    const lock = await client(urls(0, 1, 2, 3)).acquire(["r"], 1_000);
    assert.ok(lock.remainingMs() > 0);
  });

  it("a member that lost its memory after accepting a change takes no part in the next, nor is taken back before it is written: with another member out of reach, that change fails", async () => {
    await client(urls(0, 1, 2)).init();
    // A change (node 3 added) accepted by nodes 0 and 1, and written nowhere.
    const stopped = wrappedTransports(urls(0, 1, 2, 3), (real, i) => ({
      send(args, timeoutMs) {
        const write = args[0] === "EVAL" && args[1] === writeRecordScript.source;
        if (write || (i === 2 && args[0] === "EVAL")) {
          return Promise.reject(new Error("connection reset (the test's)"));
        }
        return real.send(args, timeoutMs);
      },
    }));
    await assert.rejects(changeMembers(stopped.slice(0, 3), { add: stopped[3]! }), MembershipError);
    assert.match(String(await cluster.client(0).get("redquorum:cluster")), /^changing:/);
    assert.match(String(await cluster.client(1).get("redquorum:cluster")), /^changing:/);
    // Node 0 loses its memory. No client takes it back while node 1 holds
    // the change accepted and not written (node 0 may have known it chosen).
    await cluster.client(0).flushall();
    await clientCheckingLast([0, 1, 2], 0)
      .acquire(["r"], 1_000)
      .catch(() => {});
    assert.equal(await cluster.client(0).get("redquorum:node"), null);
    // Another change, with node 1 out of reach: nodes 0 and 2 would be a
    // majority, and neither remembers the change node 1 accepted.
    const withoutNode1 = wrappedTransports(urls(0, 1, 2), (real, i) => ({
      send(args, timeoutMs) {
        if (i === 1) return Promise.reject(new Error("connection reset (the test's)"));
        return real.send(args, timeoutMs);
      },
    }));
    await assert.rejects(
      changeMembers(withoutNode1, { remove: 2, add: cluster.urls[3]! }),
      /holds no record at a member's address: it lost its memory/,
    );
    // With node 1 answering (node 0 still left out), what node 1 accepted is the change written.
    await assert.rejects(
      changeMembers(urls(0, 1, 2), { remove: 2, add: cluster.urls[3]! }),
      /another change of members.*was completed instead/,
    );
    // Now written, a client of the members takes node 0 back under it, and
    // the change that was chosen, run again, joins its node.
    await clientCheckingLast([0, 1, 2, 3], 0)
      .acquire(["r"], 1_000)
      .catch(() => {});
    await nodeRejoined(0);
    assert.match(String(await cluster.client(0).get("redquorum:cluster")), /:2:/);
    await changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! });
    const status = await membershipStatus(urls(0, 1, 2, 3));
    assert.equal(status.problem, undefined, status.problem);
    assert.equal(status.record?.members.length, 4);
  });

  describe("members that lost their memory, and lists that name one twice", () => {
    /** Node 0 loses its memory and a client of `list` takes it back as the member. */
    async function rejoinNode0(list: number[]) {
      await cluster.client(0).flushall();
      await clientCheckingLast(list, 0)
        .acquire(["r"], 1_000)
        .catch(() => {});
      await nodeRejoined(0);
    }
    /** Transports for `list`, node `down` (an index into it) refusing every command. */
    const withDown = (list: string[], down: number) =>
      wrappedTransports(list, (real, i) => ({
        send(args, timeoutMs) {
          if (i === down) return Promise.reject(new Error("connection reset (the test's)"));
          return real.send(args, timeoutMs);
        },
      }));

    it("a list naming one member twice (another spelling) is refused before anything is written", async () => {
      await client(urls(0, 1, 2)).init();
      const twice = [
        cluster.urls[0]!,
        cluster.urls[0]!.replace("127.0.0.1", "localhost"),
        cluster.urls[2]!,
      ];
      await assert.rejects(
        changeMembers(twice, { remove: 2, add: cluster.urls[3]! }),
        /both answer as member .*one server named twice/,
      );
      const status = await membershipStatus(urls(0, 1, 2));
      assert.equal(status.record?.epoch, 1);
      assert.equal(status.problem, undefined, status.problem);
    });

    it("a member taken back after losing its memory stays marked through the records written on it, until the epochs it may have forgotten are", async () => {
      await client(urls(0, 1, 2)).init();
      await rejoinNode0([0, 1, 2]);
      assert.equal(await cluster.client(0).get("redquorum:members-next"), unknownMarked);
      // A change that does not reach node 0: nodes 1 and 2 choose it without it.
      const list = withDown(urls(0, 1, 2, 3), 0);
      await changeMembers(list.slice(0, 3), { add: list[3]! });
      // A client of the new list brings node 0 up to it: still marked.
      // (Node 0's check answers last: read first, its older record would
      // refuse this client before any catching up.)
      await clientCheckingLast([0, 1, 2, 3], 0)
        .acquire(["r"], 1_000)
        .catch(() => {});
      // (The check that writes it may end after the acquire failed.)
      const until = performance.now() + 2_000;
      while (!/:2:/.test(String(await cluster.client(0).get("redquorum:cluster")))) {
        assert.ok(performance.now() < until, "node 0 not brought up to epoch 2 within 2 s");
        await sleep(20);
      }
      assert.equal(await cluster.client(0).get("redquorum:members-next"), unknownMarked);
      // The next change reads the members (at epoch 2, none changing): node 0
      // may have forgotten up to epoch 4, and takes no part until it is written.
      await changeMembers(urls(0, 1, 2, 3), { remove: cluster.urls[3]! });
      assert.match(String(await cluster.client(0).get("redquorum:cluster")), /:3:/);
      assert.equal(await cluster.client(0).get("redquorum:members-next"), "4\namnesiac\n\n\n");
      await changeMembers(urls(0, 1, 2), { add: cluster.urls[4]! });
      assert.match(String(await cluster.client(0).get("redquorum:cluster")), /:4:/);
      assert.equal(await cluster.client(0).get("redquorum:members-next"), null);
    });

    it("with 4 members, one gone for good and one taken back after losing its memory: the one gone is replaced only once the mark is cleared by hand", async () => {
      await client(urls(0, 1, 2)).init();
      await changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! });
      await rejoinNode0([0, 1, 2, 3]);
      const list = withDown(urls(0, 1, 2, 3, 4), 3);
      // Nodes 1 and 2 alone are not a majority of 4.
      await assert.rejects(
        changeMembers(list.slice(0, 4), { remove: 3, add: list[4]! }),
        /did not reach 3 of 4 members.*lost its memory/,
      );
      // The way out docs/membership.md gives, when no change was running.
      await cluster.client(0).del("redquorum:members-next");
      const again = withDown(urls(0, 1, 2, 3, 4), 3);
      const report = await changeMembers(again.slice(0, 4), { remove: 3, add: again[4]! });
      assert.equal(report.to.epoch, 3);
    });

    it("a change run again once it is done leaves what the members accepted for the next one", async () => {
      await client(urls(0, 1, 2)).init();
      await changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! });
      // A removal accepted by every member, written nowhere.
      const stopped = wrappedTransports(urls(0, 1, 2, 3), (real) => ({
        send(args, timeoutMs) {
          if (args[0] === "EVAL" && args[1] === writeRecordScript.source) {
            return Promise.reject(new Error("connection reset (the test's)"));
          }
          return real.send(args, timeoutMs);
        },
      }));
      await assert.rejects(changeMembers(stopped, { remove: 3 }), MembershipError);
      // The add that is done, run again: nothing to write.
      await changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! });
      for (const i of [0, 1, 2, 3]) {
        assert.match(String(await cluster.client(i).get("redquorum:cluster")), /^changing:/);
        assert.match(String(await cluster.client(i).get("redquorum:members-next")), /^3\n/);
      }
    });

    it("a member taken back by a client is marked without an epoch, until a change that reads a majority of the members works it out", async () => {
      await client(urls(0, 1, 2)).init();
      await cluster.client(0).flushall();
      // Node 1 out of reach but for the reads of the members' records that
      // taking a node back makes, node 0 checked last.
      const transports = wrappedTransports(urls(0, 1, 2), (real, i) => ({
        async send(args, timeoutMs) {
          if (i === 1 && args[0] !== "MGET") throw new Error("connection reset (the test's)");
          if (i === 0 && args[0] === "MGET") await sleep(200);
          return real.send(args, timeoutMs);
        },
      }));
      const taking = new Redlock(transports, options);
      open.push(taking);
      await taking.acquire(["r"], 1_000).catch(() => {});
      await nodeRejoined(0);
      assert.equal(await cluster.client(0).get("redquorum:members-next"), unknownMarked);
      // A change that reads nodes 1 and 2 (a majority) works it out: marked up to epoch 3.
      await changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! });
      assert.equal(await cluster.client(0).get("redquorum:members-next"), "3\namnesiac\n\n\n");
    });

    it("a member that loses its memory while a change is being written is not taken back at the old epoch: the old list cannot hold a lock beside the new one", async () => {
      await client(urls(0, 1, 2)).init();
      // The change (node 3 added, node 2 removed) reaches nodes 0 and 1
      // only, and its write to node 1 waits for the gate.
      let letGo = () => {};
      const gate = new Promise<void>((resolve) => {
        letGo = resolve;
      });
      const changer = wrappedTransports(urls(0, 1, 2), (real, i) => ({
        async send(args, timeoutMs) {
          if (i === 2 && args[0] === "EVAL") throw new Error("connection reset (the test's)");
          if (i === 1 && args[0] === "EVAL" && args[1] === writeRecordScript.source) await gate;
          return real.send(args, timeoutMs);
        },
      }));
      const old = client(urls(0, 1, 2));
      try {
        await (await old.acquire(["warm"], 1_000)).release();
        const change = changeMembers(
          changer,
          { add: cluster.urls[3]!, remove: 2 },
          { timeoutMs: 30_000 },
        ).catch((error: unknown) => error);
        // Node 0 holds the new record (epoch 2), node 1 accepted it; then
        // node 0 loses its memory.
        const until = performance.now() + 5_000;
        while (!/:2:/.test(String(await cluster.client(0).get("redquorum:cluster")))) {
          assert.ok(performance.now() < until, "node 0 never held epoch 2");
          await sleep(5);
        }
        await cluster.client(0).flushall();
        // Before, the old list's client took node 0 back at epoch 1 (node 1
        // answered with the record it holds, node 2 with epoch 1) and,
        // once its quarantine was over, held r on nodes 0 and 2, while the
        // new list could win on nodes 1 and 3.
        const deadline = performance.now() + options.maxTtlMs + 2_000;
        while (performance.now() < deadline) {
          const lock = await old.acquire(["r"], 1_000).catch(() => undefined);
          if (lock) {
            await lock.release();
            assert.fail("the old list took r at epoch 1 after the new record was chosen");
          }
          assert.doesNotMatch(String(await cluster.client(0).get("redquorum:cluster")), /:1:/);
          await sleep(50);
        }
        letGo();
        const report = await change;
        assert.ok(!(report instanceof Error), String(report));
      } finally {
        letGo();
      }
    });

    it("a member that lost its memory is not taken back on the word of a member that lost its memory too: with the one that accepted a change out of reach, it waits", async () => {
      await client(urls(0, 1, 2, 3)).init();
      // A change (node 3 removed) accepted by nodes 0, 1 and 2 (a majority
      // of 4), written nowhere; node 3 never hears of it.
      const stopped = wrappedTransports(urls(0, 1, 2, 3), (real, i) => ({
        async send(args, timeoutMs) {
          const write = args[0] === "EVAL" && args[1] === writeRecordScript.source;
          if (write || (i === 3 && args[0] === "EVAL")) {
            throw new Error("connection reset (the test's)");
          }
          return real.send(args, timeoutMs);
        },
      }));
      await assert.rejects(changeMembers(stopped, { remove: 3 }, { timeoutMs: 1_000 }));
      assert.match(String(await cluster.client(2).get("redquorum:cluster")), /^changing:/);
      // Nodes 0 and 1 lose their memory; node 2 is out of this client's reach.
      await cluster.client(0).flushall();
      await cluster.client(1).flushall();
      const unreachable2 = wrappedTransports(urls(0, 1, 2, 3), (real, i) => ({
        async send(args, timeoutMs) {
          if (i === 2) throw new Error("connection reset (the test's)");
          return real.send(args, timeoutMs);
        },
      }));
      const old = new Redlock(unreachable2, options);
      open.push(old);
      for (let tries = 0; tries < 5; tries++) {
        await old.acquire(["r"], 1_000).then(
          (lock) => old.release(lock),
          () => {},
        );
      }
      // Before, node 1's empty answer and node 3's counted as two
      // confirmations: node 0 (and then node 1) were taken back at epoch 1.
      assert.equal(await cluster.client(0).get("redquorum:node"), null);
      assert.equal(await cluster.client(1).get("redquorum:node"), null);
    });

    it("a client still on a list whose nodes were all replaced and emptied does not take them back as a cluster of their own", async () => {
      await client(urls(0, 1)).init();
      // A client running since: it holds epoch 1 of {0, 1} in its view.
      const stale = client(urls(0, 1));
      await stale.release(await stale.acquire(["warm"], 1_000));
      await changeMembers(urls(0, 1), { add: cluster.urls[2]!, remove: cluster.urls[0]! });
      await changeMembers(urls(2, 1), { add: cluster.urls[3]!, remove: cluster.urls[1]! });
      await cluster.client(0).flushall();
      await cluster.client(1).flushall();
      // Before, each empty node confirmed the other (every other node
      // answered): the stale client took both back at epoch 1, a second
      // cluster beside {2, 3}, and once their quarantine ended won r there
      // while {2, 3} granted it too.
      // Its checks of the emptied nodes run beside its calls: 3 s of them.
      const until = performance.now() + 3_000;
      let refusal = "";
      while (performance.now() < until) {
        refusal = await stale.acquire(["r"], 1_000).then(
          async (lock) => {
            await stale.release(lock);
            return "granted";
          },
          (error: Error) => error.message,
        );
        await sleep(100);
      }
      assert.equal(await cluster.client(0).get("redquorum:node"), null);
      assert.equal(await cluster.client(1).get("redquorum:node"), null);
      // Not waited for as an init's first record on its way (no node of
      // the list holds one): it says why at once.
      assert.match(refusal, /so did every other node of the list/);
    });

    it("…and says why, whatever the epoch its list was left at", async () => {
      await client(urls(0, 1)).init();
      await changeMembers(urls(0, 1), { add: cluster.urls[2]!, remove: cluster.urls[1]! });
      // A client running since epoch 2 of {0, 2} (at epoch 1, a node
      // without a record is waited for as an init's write on its way).
      // Its checks read the record; node 2's quarantine refuses the lock.
      const stale = client(urls(0, 2));
      await assert.rejects(stale.acquire(["warm"], 1_000), /quarantined/);
      await changeMembers(urls(0, 2), { add: cluster.urls[3]!, remove: cluster.urls[0]! });
      await changeMembers(urls(3, 2), { add: cluster.urls[4]!, remove: cluster.urls[2]! });
      await cluster.client(0).flushall();
      await cluster.client(2).flushall();
      const refusal = await stale.acquire(["r"], 1_000).then(
        () => "granted",
        (error: Error) => error.message,
      );
      assert.match(
        refusal,
        /lost its membership record, and so did every other node of the list: no node holds cluster \w+'s record/,
      );
      assert.match(refusal, /give it the cluster's members/);
      assert.match(refusal, /every node of the cluster lost its memory/);
      assert.equal(await cluster.client(0).get("redquorum:node"), null);
      assert.equal(await cluster.client(2).get("redquorum:node"), null);
    });

    it("the only member of a one-node cluster that lost its memory is not taken back: no other member can confirm its record is still the cluster's", async () => {
      await client(urls(4)).init();
      // A client running since: it holds the record in its view.
      const running = client(urls(4));
      await running.release(await running.acquire(["warm"], 1_000));
      await cluster.client(4).flushall();
      await assert.rejects(running.acquire(["r"], 1_000));
      // A list of one may be one a change left behind ({A} → {A, D} →
      // {A, D, E}): taken back at its epoch, it would win alone.
      assert.equal(await cluster.client(4).get("redquorum:node"), null);
    });

    it("a change stopped after its accepts, run again while a member that lost its memory meanwhile is not taken back, completes without it; a client then takes it back under the new record", async () => {
      await client(urls(0, 1, 2)).init();
      // The first run's accepts land, none of its writes does.
      const stopped = wrappedTransports(urls(0, 1, 2), (real) => ({
        async send(args, timeoutMs) {
          if (args[0] === "EVAL" && args[1] === writeRecordScript.source) {
            throw new Error("connection reset (the test's)");
          }
          return real.send(args, timeoutMs);
        },
      }));
      await assert.rejects(
        changeMembers(stopped, { add: cluster.urls[3]! }, { timeoutMs: 1_000 }),
        MembershipError,
      );
      await cluster.client(0).flushall();
      // No client takes node 0 back while nodes 1 and 2 hold the change
      // accepted and not written: the run again goes on without node 0.
      // Before, it was refused until a client took node 0 back (at epoch 1).
      await client(urls(0, 1, 2))
        .acquire(["r"], 1_000)
        .catch(() => {});
      assert.equal(await cluster.client(0).get("redquorum:node"), null);
      const report = await changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! });
      assert.equal(report.to.epoch, 2);
      assert.match(report.nodes[0]!.result, /^left alone: holds nothing/);
      await clientCheckingLast([0, 1, 2, 3], 0)
        .acquire(["r"], 1_000)
        .catch(() => {});
      await nodeRejoined(0);
      assert.match(String(await cluster.client(0).get("redquorum:cluster")), /:2:/);
    });

    it("a change meeting a member that lost its memory, before any client has, says so; once a client took it back, the change runs", async () => {
      await client(urls(0, 1, 2)).init();
      await cluster.client(2).flushall();
      await assert.rejects(
        changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! }),
        /holds no record at a member's address: it lost its memory, and a client of this list takes it back/,
      );
      await clientCheckingLast([0, 1, 2], 2)
        .acquire(["r"], 1_000)
        .catch(() => {});
      await nodeRejoined(2);
      const report = await changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! });
      assert.equal(report.to.members.length, 4);
    });

    it("a replacement whose node to add is a member already, and whose member to remove still is, is refused", async () => {
      await client(urls(0, 1, 2)).init();
      await changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! });
      await assert.rejects(
        changeMembers(urls(0, 1, 2), { remove: cluster.urls[1]!, add: cluster.urls[3]! }),
        /is a member already and .* still is: nothing was replaced/,
      );
    });
  });

  describe("changes that must not let a node in unchecked", () => {
    /**
     * Node 3's join (step 3 of replacing node 2 by it) fails: its write
     * never reaches the node (the connection fails as it goes out). (A
     * write paused on the node instead, by CLIENT PAUSE, still lands when
     * the pause ends: the join then happened, and nothing was tested.)
     */
    async function replaceWithFailedJoin({ neverUsed = false } = {}) {
      const maxTtlMs = 3_000;
      if (neverUsed) {
        // A server redquorum never used, started longer ago than maxTtlMs
        // and never flushed: a quarantine judged from its start (as for a
        // node without a marker) is over at once, and only the join's own
        // quarantine keeps it out. (A flushed one is quarantined from the
        // flush on whatever joins it.)
        await cluster.cluster.restart(3, { keepData: false });
        const uptimeS = async () =>
          Number(/uptime_in_seconds:(\d+)/.exec(await cluster.client(3).info("server"))?.[1]);
        while ((await uptimeS()) < maxTtlMs / 1_000 + 1) await sleep(200);
      } else {
        await cluster.client(3).flushall(); // no marker
      }
      // A longer hold than the suite's: the asking below ends well within it.
      // Without fencing: the new node's unknown fencing counters would
      // refuse a fenced vote whatever its quarantine, and hide it.
      const first = new Redlock(urls(0, 1, 2), { ...options, maxTtlMs, fencing: false });
      open.push(first);
      await first.init();
      const held = await holdOnAandC(first, maxTtlMs - 200);
      const [joining] = wrappedTransports(urls(3), (real) => ({
        send(args, timeoutMs) {
          if (args[0] === "EVAL" && args[1] === writeRecordScript.source) {
            return Promise.reject(new Error("connection reset (the test's)"));
          }
          return real.send(args, timeoutMs);
        },
      }));
      await assert.rejects(
        changeMembers(urls(0, 1, 2), { remove: cluster.urls[2]!, add: joining! }),
        /could not join/,
      );
      assert.equal(await cluster.client(3).get("redquorum:node"), null, "the premise: not joined");
      return held;
    }

    it("a replacement whose join failed: the new list cannot take a lock the old member held, and the new node is out as a lost node", async () => {
      const held = await replaceWithFailedJoin({ neverUsed: true });
      // Asked again and again while the old lock lasts: a client of the new
      // list takes node 3 back itself, and must join it as the change would
      // have (in the quarantine, counted from now).
      const asking = new Redlock(urls(0, 1, 3), {
        ...options,
        fencing: false,
        retry: { retries: 10, delayMs: 100, jitterMs: 0 },
      });
      open.push(asking);
      await assert.rejects(asking.acquire(["r"], 2_000), ResourceLockedError);
      assert.ok(held.remainingMs() > 0, "the premise: the old lock was still valid");
      assert.match(String(await cluster.client(3).get("redquorum:marker")), /^lost:/);
      assert.match(String(await cluster.client(3).get("redquorum:quarantine")), /./);
    });

    it("a replacement whose join failed, run again, joins the node under the id the record gave it", async () => {
      await replaceWithFailedJoin();
      const report = await changeMembers(urls(0, 1, 2), {
        remove: cluster.urls[2]!,
        add: cluster.urls[3]!,
      });
      const named = report.to.members.find(
        (member) => member.address === report.nodes.at(-1)!.endpoint,
      );
      assert.equal(await cluster.client(3).get("redquorum:node"), named?.id);
      assert.match(String(await cluster.client(3).get("redquorum:marker")), /^lost:/);
      // It may be a member that joined and lost its memory since: it takes no part in changes yet.
      assert.match(
        String(await cluster.client(3).get("redquorum:members-next")),
        /^\d+\namnesiac\n/,
      );
      const status = await membershipStatus(urls(0, 1, 3));
      assert.equal(status.problem, undefined, status.problem);
    });

    it("a node to add that holds any key is refused: an ID counter left on it, with its marker and its memory, would vote unrepaired", async () => {
      await client(urls(0, 1, 2)).init();
      // What NextId leaves on a node (another deployment's counter, or one
      // from before the membership was recorded): a counter, its marker
      // "1" and the identity of the memory it was kept on. Trusted as it
      // is, it voted at once with its old value: IDs handed out again.
      const node3 = cluster.client(3);
      await node3.flushall();
      await leaveIdCounter(node3, "redquorum:id", "5");
      await assert.rejects(
        changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! }),
        (error: unknown) => {
          assert.ok(error instanceof MembershipError, String(error));
          assert.match(error.message, /holds 3 keys: a node joins empty/);
          return true;
        },
      );
      assert.equal(await node3.get("redquorum:node"), null, "not joined");
      assert.equal((await membershipStatus(urls(0, 1, 2))).record?.members.length, 3);
      await node3.flushall();
      const report = await changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! });
      assert.equal(report.to.members.length, 4);
    });

    it("a member removed is added again only empty: with its old record and counters it is refused", async () => {
      await client(urls(0, 1, 2)).init();
      await changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! });
      await changeMembers(urls(0, 1, 2, 3), { remove: cluster.urls[3]! });
      await assert.rejects(
        changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! }),
        (error: unknown) => {
          assert.ok(error instanceof MembershipError, String(error));
          assert.match(error.message, /not a member now.*only empty/);
          return true;
        },
      );
      await cluster.client(3).flushall();
      const report = await changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! });
      assert.equal(report.to.members.length, 4);
    });

    it("a member removed and emptied joins again though services on the old list keep meeting it (what their first contact writes is no counter); an ID counter left on it is still refused", async () => {
      await client(urls(0, 1, 2)).init();
      const ids = new NextId(urls(0, 1, 2), {
        nodeTimeoutMs: 500,
        unsafeAllowNonDurableNodes: true,
      });
      await ids.init();
      await ids.close();
      await changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! });
      await changeMembers(urls(0, 1, 2, 3), { remove: cluster.urls[3]! });
      await cluster.client(3).flushall();
      // What the first contact of a lock and an ID service still on the old
      // list leaves on it before they are refused (copied from a member's):
      // its maxTtlMs records and an ID counter's certified run_id.
      for (const key of ["redquorum:horizon", "redquorum:id:run"]) {
        const dump = await cluster.client(0).dumpBuffer(key);
        assert.ok(dump, `the premise: node 0 holds ${key}`);
        await cluster.client(3).restore(key, 0, dump);
      }
      // Before: "holds 2 keys: a node joins empty … Empty it (FLUSHALL)", as
      // long as such a service ran.
      const report = await changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! });
      assert.equal(report.to.members.length, 4);
      // A counter beside its run_id is still a node that is not empty.
      await changeMembers(urls(0, 1, 2, 3), { remove: cluster.urls[3]! });
      await cluster.client(3).flushall();
      await cluster.client(3).mset("orders:id", "41", "orders:id:run", "x");
      await assert.rejects(
        changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! }),
        /holds 2 keys: a node joins empty/,
      );
    });

    it("a member is not removed from an odd number of members (a later repair would have too few witnesses); from an even number it is", async () => {
      await client(urls(0, 1, 2)).init();
      const before = await membershipStatus(urls(0, 1, 2));
      await assert.rejects(
        changeMembers(urls(0, 1, 2), { remove: cluster.urls[2]! }),
        (error: unknown) => {
          assert.ok(error instanceof MembershipError, String(error));
          assert.match(error.message, /cannot remove a member from 3 members/);
          assert.match(error.message, /never gets smaller: from 3, never below 3/);
          return true;
        },
      );
      assert.equal((await membershipStatus(urls(0, 1, 2))).record?.epoch, before.record?.epoch);
      await changeMembers(urls(0, 1, 2), { add: cluster.urls[3]! });
      const report = await changeMembers(urls(0, 1, 2, 3), { remove: cluster.urls[2]! });
      assert.equal(report.to.members.length, 3);
    });
  });
});
