/**
 * A failed acquire attempt undoes its keys on every node that may hold one
 * (granted, failed, timed out) and sends nothing to a node that answered
 * with a refusal: that node's script checked every key before writing, so
 * it set nothing of the attempt (issue 13: 5 release calls per failed
 * attempt on a resource held everywhere doubled the commands of contention)
 * — unless that node queued the waiter under another ticket than the one
 * the nodes agree on: then the call requeues it there.
 *
 * `nodeTimeoutMs` is raised in these tests: a refusal read late (a loaded
 * machine) counts as a timeout, and a timed-out node gets the undo.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Redlock, ResourceLockedError } from "../../src/index.js";
import { useCluster } from "../helpers/cluster.js";
import { until } from "../helpers/no-timers.js";
import { notAboutTimeouts } from "../helpers/timeouts.js";

/** Script calls (EVALSHA + EVAL) node `index` has run so far. */
async function scriptCalls(client: { info(section: string): Promise<string> }): Promise<number> {
  const text = await client.info("commandstats");
  let calls = 0;
  for (const match of text.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g))
    calls += Number(match[1]);
  return calls;
}

describe("a failed acquire attempt undoes only where it may have written", () => {
  const cluster = useCluster({ nodeCount: 5 });

  it("held on every node: the nodes known to have refused get no undo", async () => {
    const t = cluster();
    const holder = new Redlock(t.urls, notAboutTimeouts);
    const rival = new Redlock(t.urls, { ...notAboutTimeouts, retry: { retries: 0 } });
    try {
      const lock = await holder.acquire(["undo:all"], 10_000);
      await assert.rejects(rival.acquire(["undo:all"], 10_000), ResourceLockedError);
      const before = await Promise.all(t.urls.map((_, i) => scriptCalls(t.client(i))));
      await assert.rejects(rival.acquire(["undo:all"], 10_000), ResourceLockedError);
      const after = await Promise.all(t.urls.map((_, i) => scriptCalls(t.client(i))));
      // A lost round waits for every answer (up to nodeTimeoutMs): all 5
      // refused, so none gets an undo (before issue 13: all 5 did; until
      // 2026-12-02 the 2 still unheard when 3 had refused did).
      const calls = after.map((n, i) => n - before[i]!);
      assert.deepEqual(calls, [1, 1, 1, 1, 1], `each node: the acquire only (${calls})`);
      await lock.release();
    } finally {
      await holder.close();
      await rival.close();
    }
  });

  it("held on 3 of 5: the 2 nodes that granted are undone, the 3 that refused are left alone", async () => {
    const t = cluster();
    const rival = new Redlock(t.urls, { ...notAboutTimeouts, retry: { retries: 0 } });
    try {
      // Another holder's value on nodes 0-2 (what a competing client would
      // leave). The lost round hears every node, so which nodes get the
      // undo is certain: 3 and 4, which granted.
      await Promise.all([0, 1, 2].map((i) => t.client(i).set("undo:some", "theirs", "PX", 10_000)));
      // First contact (checks, script loads, certification) before counting.
      await (await rival.acquire(["undo:warm"], 10_000)).release();
      const before = await Promise.all(t.urls.map((_, i) => scriptCalls(t.client(i))));
      await assert.rejects(rival.acquire(["undo:some"], 10_000), ResourceLockedError);
      const after = await Promise.all(t.urls.map((_, i) => scriptCalls(t.client(i))));
      assert.deepEqual(
        after.map((n, i) => n - before[i]!),
        [1, 1, 1, 2, 2],
        "acquire everywhere, release only on the nodes that granted",
      );
      // Nothing of the attempt is left; the other holder's keys are untouched.
      const values = await Promise.all(t.urls.map((_, i) => t.client(i).get("undo:some")));
      assert.deepEqual(values, ["theirs", "theirs", "theirs", null, null]);
    } finally {
      await rival.close();
    }
  });

  it("a refusing node that queued the waiter under another ticket gets it requeued under the agreed one", async () => {
    const t = cluster();
    const key = "undo:ticket";
    const holder = new Redlock(t.urls, notAboutTimeouts);
    // Its next attempt is 10 s away: within this test only the failed
    // attempt itself can bring the nodes' tickets together.
    const waiter = new Redlock(t.urls, {
      retry: { retries: 3, delayMs: 10_000, jitterMs: 0 },
      nodeTimeoutMs: 1_000,
    });
    const abort = new AbortController();
    try {
      const lock = await holder.acquire([key], 30_000);
      // Node 0 has another waiter at ticket 5: a first registration there
      // takes ticket 6, on the other nodes ticket 1; the agreed one is 6.
      await t.client(0).zadd(`redquorum:queue:${key}`, 5, "other:1");
      await t.client(0).zadd(`redquorum:queue-expiry:${key}`, Date.now() + 60_000, "other:1");
      const waiting = waiter.acquire([key], 10_000, { signal: abort.signal });
      waiting.catch(() => {});
      const scores = () =>
        Promise.all(
          t.urls.map(async (_, i) => {
            const members = await t.client(i).zrange(`redquorum:queue:${key}`, 0, -1, "WITHSCORES");
            const at = members.findIndex((m, j) => j % 2 === 0 && m !== "other:1");
            return at < 0 ? undefined : members[at + 1];
          }),
        );
      await until("the waiter queued on every node under one ticket", async () => {
        const now = await scores();
        return now.every((score) => score === "6");
      });
      abort.abort();
      await assert.rejects(waiting);
      await lock.release();
    } finally {
      abort.abort();
      await holder.close();
      await waiter.close();
    }
  });
});
