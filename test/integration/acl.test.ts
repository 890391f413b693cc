import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import {
  changeMembers,
  membershipStatus,
  NextId,
  Redlock,
  ResourceLockedError,
} from "../../src/index.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";
import { notAboutTimeouts } from "../helpers/timeouts.js";

/**
 * The ACL user docs/operations.md gives operators ("TLS and ACL") can do
 * everything redquorum does. The rule is read from the guide itself, so
 * the guide cannot drift from what is tested. Whatever a node refuses that
 * user, a client call or a call inside a script, is in its ACL LOG: the
 * test ends with every node's log empty.
 */
const guide = readFileSync("docs/operations.md", "utf8");
const ruleLine = guide.split("\n").find((line) => line.trim().startsWith("ACL SETUSER redquorum"));
const password = "acl-test-password";

/** The guide's `ACL SETUSER` arguments, with this test's password for its placeholder. */
function guideRule(): string[] {
  assert.ok(ruleLine, "docs/operations.md has an `ACL SETUSER redquorum …` line");
  const words = ruleLine.trim().split(/\s+/).slice(2);
  assert.ok(words.includes(">CHANGE-ME"), "the guide's rule has the password placeholder");
  return words.map((word) => (word === ">CHANGE-ME" ? `>${password}` : word));
}

describe("the ACL user of the operations guide", () => {
  let cluster: TestCluster;
  /** Node i's URL as the guide's user. */
  let urls: string[];

  before(async () => {
    cluster = await startCluster({ nodeCount: 4, persistence: "aof-always" });
    const rule = guideRule();
    await cluster.onAll(async (client) => {
      await client.call("ACL", "SETUSER", ...rule);
      await client.call("ACL", "LOG", "RESET");
    });
    urls = cluster.urls.map((url) => url.replace("redis://", `redis://redquorum:${password}@`));
  });
  after(() => cluster.stop());

  /** Every node's ACL LOG (what it refused the user), for the final check. */
  async function refusals(): Promise<string[]> {
    const logs = await cluster.onAll((client) => client.call("ACL", "LOG"));
    return logs.flatMap((log, index) =>
      (log as unknown[][]).map((entry) => `node ${index}: ${JSON.stringify(entry)}`),
    );
  }

  it("the premise: a user without the guide's rule is refused, and the log says so", async () => {
    await cluster.client(0).call("ACL", "SETUSER", "nobody", "on", `>${password}`, "~*");
    const redlock = new Redlock(
      [cluster.urls[0]!.replace("redis://", `redis://nobody:${password}@`)],
      {
        ...notAboutTimeouts,
        retry: { retries: 0 },
      },
    );
    try {
      await assert.rejects(redlock.acquire(["acl:premise"], 2_000));
    } finally {
      await redlock.close();
    }
    assert.ok((await refusals()).length > 0, "node 0 logged the refusal");
    await cluster.onAll((client) => client.call("ACL", "LOG", "RESET"));
  });

  it("locks, their queues and wake-ups, fencing, IDs, status and a member change: nothing refused", async () => {
    const three = urls.slice(0, 3);
    const options = { ...notAboutTimeouts, retry: { retries: 200, delayMs: 50, jitterMs: 10 } };
    const first = new Redlock(three, options);
    const second = new Redlock(three, options);
    const ids = new NextId(three, { ...notAboutTimeouts, key: "acl:id" });
    try {
      await first.init();
      assert.ok(
        (await first.status()).every((node) => node.reachable),
        "status reads every node",
      );
      // One key: the fast path, an extension, a waiter of another instance
      // queued on the nodes and told of the release, a try-lock refused.
      const held = await first.acquire(["acl:one"], 5_000);
      assert.ok(held.fence !== undefined && held.fence > 0n);
      const waiting = second.acquire(["acl:one"], 5_000);
      await assert.rejects(
        second.acquire(["acl:one"], 5_000, { retry: { retries: 0 } }),
        ResourceLockedError,
      );
      await first.extend(held, 5_000);
      await first.release(held);
      const heir = await waiting;
      assert.ok((heir.fence ?? 0n) > held.fence, "the waiter's token follows the holder's");
      // Several keys, one of them held: the waiter queues on both.
      const several = second.acquire(["acl:one", "acl:two"], 5_000);
      await second.release(heir);
      await second.release(await several);
      await first.raiseFencingFloor({ atLeast: 1_000n });
      // A lock key that holds another type: the nodes say what it holds.
      await cluster.onAll((client) => client.rpush("acl:list", "x"));
      await assert.rejects(
        first.acquire(["acl:list"], 5_000, { retry: { retries: 0 } }),
        /holds a list/,
      );
      await ids.init();
      const [a, b] = [await ids.next(), await ids.next()];
      assert.ok(b > a);
      assert.equal((await ids.nextBatch(3)).length, 3);
      // A node that lost its memory (flushed) sits out its quarantine while
      // the others grant; its quarantine is judged from their records.
      await cluster.client(2).flushall();
      await first.release(await first.acquire(["acl:after-flush"], 5_000));
      await cluster.quarantineJudged(2, 15_000, () =>
        first.acquire(["acl:meet"], 1_000).then((lock) => first.release(lock)),
      );
    } finally {
      await Promise.all([first.close(), second.close(), ids.close()]);
    }
    await cluster.client(3).flushall(); // a node joins empty (the list key above is on it)
    // But for what a service's first contact writes there (a copy of node
    // 0's): the change checks for it with the guide's commands.
    const horizon = await cluster.client(0).dumpBuffer("redquorum:horizon");
    assert.ok(horizon, "the premise: node 0 holds redquorum:horizon");
    await cluster.client(3).restore("redquorum:horizon", 0, horizon);
    await changeMembers(three, { add: urls[3]! });
    const status = await membershipStatus(urls);
    assert.equal(status.record?.members.length, 4);
    assert.deepEqual(await refusals(), []);
  });

  it("a node list naming another database (…/2): init and a lock, nothing refused", async () => {
    const inDb2 = new Redlock(
      urls.slice(0, 4).map((url) => `${url}/2`),
      { ...notAboutTimeouts, retry: { retries: 0 } },
    );
    try {
      await inDb2.init();
      await inDb2.release(await inDb2.acquire(["acl:db2"], 5_000));
    } finally {
      await inDb2.close();
    }
    assert.deepEqual(await refusals(), []);
  });
});
