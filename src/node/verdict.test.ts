import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { verdictOf } from "./verdict.js";

describe("status verdict", () => {
  const good = {
    endpoint: "a:1",
    reachable: true,
    role: "master",
    marker: true,
    quarantineRemainingMs: 0,
    appendonly: "yes",
    appendfsync: "always",
  };

  it("needs a majority of usable masters for locks, and durable ones for IDs", () => {
    const verdict = verdictOf([
      good,
      { ...good, endpoint: "b:1", appendfsync: "everysec" },
      { endpoint: "c:1", reachable: false, error: "ECONNREFUSED" },
    ]);
    assert.equal(verdict.locks.safe, true);
    assert.deepEqual(verdict.locks.reasons, ["c:1: unreachable (ECONNREFUSED)"]);
    assert.equal(verdict.ids.safe, false);
    assert.equal(verdict.ids.usable, 1);
    assert.match(verdict.ids.reasons.join("\n"), /b:1: appendfsync everysec, needs always/);
  });

  it("counts a node with no-appendfsync-on-rewrite yes out for IDs, as NextId does, and in for locks", () => {
    const verdict = verdictOf([good, { ...good, endpoint: "b:1", noAppendfsyncOnRewrite: "yes" }]);
    assert.equal(verdict.locks.usable, 2);
    assert.equal(verdict.ids.usable, 1);
    assert.deepEqual(verdict.ids.reasons, ["b:1: no-appendfsync-on-rewrite yes, needs no"]);
  });

  it("judges IDs from NextId's view of the nodes (the counter's marker), not the lock marker", () => {
    const verdict = verdictOf(
      [good, good, good],
      [
        { ...good, marker: false },
        { ...good, endpoint: "b:1", marker: false, markerValue: "suspect" },
        { ...good, endpoint: "c:1", quarantineRemainingMs: 5_000 },
      ],
    );
    assert.equal(verdict.locks.safe, true);
    assert.equal(verdict.ids.safe, false);
    assert.equal(verdict.ids.usable, 1, "a lock quarantine does not concern IDs");
    // Beside a node that holds the counter: it came back empty, not "run id init".
    assert.match(
      verdict.ids.reasons[0]!,
      /no ID counter marker, beside nodes that hold the counter: it came back empty \(do not run id init/,
    );
    assert.match(verdict.ids.reasons[1]!, /ID counter marker "suspect".*until repaired/);
  });

  it("says whether clients can repair a node that lost the ID counter: from N - Q + 1 nodes that kept it", () => {
    const empty = { ...good, marker: false, markerValue: undefined };
    const down = { endpoint: "e:1", reachable: false, error: "ECONNREFUSED" };
    const at = (endpoint: string) => ({ ...good, endpoint });
    // 5 nodes: a repair reads 3 others that hold the counter.
    const repairable = verdictOf([], [empty, at("b:1"), at("c:1"), at("d:1"), down]);
    assert.match(repairable.ids.reasons[0]!, /the next ID call repairs it from the others\)$/);
    const waiting = verdictOf(
      [],
      [empty, at("b:1"), at("c:1"), { ...down, endpoint: "d:1" }, down],
    );
    assert.match(
      waiting.ids.reasons[0]!,
      /it is repaired from the others once 3 nodes that kept the counter answer \(2 do now\)\)$/,
    );
    // Three of five lost it, the other two answer: no client repairs it.
    const lost = verdictOf(
      [],
      [
        empty,
        { ...empty, endpoint: "b:1" },
        { ...empty, endpoint: "c:1" },
        at("d:1"),
        { ...good, endpoint: "e:1", marker: false, markerValue: "suspect" },
      ],
    );
    assert.match(
      lost.ids.reasons[0]!,
      /and 1 of the 5 nodes kept the counter, too few to repair it from \(it needs 3, or every other node holding it\): no client can; see the operations guide, "A majority of nodes lost their disks"\)$/,
    );
    assert.doesNotMatch(lost.ids.reasons[0]!, /repairs it/);
  });

  it("counts a restarted node's counter toward a repair only when every other node answers holding one, as the repair does", () => {
    const empty = { ...good, marker: false, markerValue: undefined };
    const restarted = (endpoint: string) => ({
      ...good,
      endpoint,
      marker: false,
      markerValue: "suspect",
    });
    const down = { endpoint: "e:1", reachable: false, error: "ECONNREFUSED" };
    const at = (endpoint: string) => ({ ...good, endpoint });
    // 5 nodes, one down: two kept the counter and one restarted. The repair
    // reads 3 that kept it, or all 4 others: it waits for the down one.
    const beside = verdictOf([], [empty, at("b:1"), at("c:1"), restarted("d:1"), down]);
    assert.match(
      beside.ids.reasons[0]!,
      /it is repaired from the others once 3 nodes that kept the counter answer \(2 do now\)\)$/,
    );
    // 3 nodes: one kept it, one restarted, both answer: that is every other node.
    assert.match(
      verdictOf([], [empty, at("b:1"), restarted("c:1")]).ids.reasons[0]!,
      /the next ID call repairs it from the others\)$/,
    );
    // 5 nodes: one kept it, two restarted, one down: only all 4 others will do.
    assert.match(
      verdictOf([], [empty, at("b:1"), restarted("c:1"), restarted("d:1"), down]).ids.reasons[0]!,
      /it is repaired from the others once all 4 others answer holding the counter \(3 do now\)\)$/,
    );
  });

  it("says whether clients can take back a node that came back empty: from N - Q + 1 nodes that kept their data", () => {
    const empty = { ...good, marker: false, markerValue: undefined };
    const at = (endpoint: string) => ({ ...good, endpoint });
    const down = { endpoint: "c:1", reachable: false, error: "ECONNREFUSED" };
    // 3 nodes: a repair reads 2 others that kept their counters.
    assert.match(
      verdictOf([empty, at("b:1"), at("c:1")]).locks.reasons[0]!,
      /the next lock call starts its restart quarantine and fencing repair\)$/,
    );
    assert.match(
      verdictOf([empty, at("b:1"), down]).locks.reasons[0]!,
      /its fencing repair waits for 2 nodes that kept their data to answer \(1 do now\)\)$/,
    );
    const lost = verdictOf([empty, { ...empty, endpoint: "b:1" }, at("c:1")]).locks.reasons[0]!;
    assert.match(
      lost,
      /and 1 of the 3 nodes kept their data, too few to repair it from \(it needs 2\): no client can; see the operations guide, "A majority of nodes lost their disks" \(`redquorum fencing-floor`\)\)$/,
    );
    assert.doesNotMatch(lost, /the next lock call/);
  });

  it("advises init for a node without a marker only where no node has one (a new cluster, a new counter)", () => {
    const unmarked = { ...good, marker: false, markerValue: undefined };
    const fresh = verdictOf([unmarked, { ...unmarked, endpoint: "b:1" }]);
    assert.match(fresh.locks.reasons[0]!, /no marker: run `redquorum init` on a new cluster/);
    assert.match(fresh.ids.reasons[0]!, /no ID counter marker: run `redquorum id init`/);
    const inUse = verdictOf([unmarked, { ...good, endpoint: "b:1", markerValue: "1" }]);
    assert.match(
      inUse.locks.reasons[0]!,
      /no marker, beside nodes that have one: it came back empty \(do not run init/,
    );
    assert.doesNotMatch(inUse.locks.reasons[0]!, /run `redquorum init`/);
  });

  it("does not count replicas, quarantined or unmarked nodes", () => {
    const verdict = verdictOf([
      { ...good, role: "slave" },
      { ...good, endpoint: "b:1", quarantineRemainingMs: 5_000 },
      { ...good, endpoint: "c:1", marker: false },
    ]);
    assert.equal(verdict.locks.safe, false);
    assert.equal(verdict.locks.reasons.length, 3);
  });
});
