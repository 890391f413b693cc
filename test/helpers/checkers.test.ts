import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { findIdViolations, findOverlaps, type Hold, type IdCall } from "./checkers.js";

const hold = (client: string, startMs: number, endMs: number): Hold => ({ client, startMs, endMs });

describe("findOverlaps (MX checker)", () => {
  it("accepts back-to-back and disjoint holds", () => {
    assert.deepEqual(findOverlaps([hold("a", 0, 10), hold("b", 10, 20), hold("a", 25, 30)]), []);
  });

  it("accepts an empty history", () => {
    assert.deepEqual(findOverlaps([]), []);
  });

  it("flags two holds that overlap, whatever order they are recorded in", () => {
    const overlaps = findOverlaps([hold("b", 5, 15), hold("a", 0, 10)]);
    assert.equal(overlaps.length, 1);
    assert.equal(overlaps[0]!.first.client, "a");
    assert.equal(overlaps[0]!.second.client, "b");
  });

  it("flags a hold nested inside a long one after a short one", () => {
    // a: 0–100 contains c: 50–60 even though b (10–20) ended in between.
    const overlaps = findOverlaps([hold("a", 0, 100), hold("b", 10, 20), hold("c", 50, 60)]);
    assert.equal(overlaps.length, 2);
    assert.deepEqual(
      overlaps.map((o) => [o.first.client, o.second.client]),
      [
        ["a", "b"],
        ["a", "c"],
      ],
    );
  });

  it("refuses a malformed hold", () => {
    assert.throws(() => findOverlaps([hold("a", 10, 5)]), /ends before it starts/);
  });
});

describe("findIdViolations (ID checker)", () => {
  const call = (client: string, startMs: number, endMs: number, ...ids: number[]): IdCall => ({
    client,
    startMs,
    endMs,
    ids: ids.map(BigInt),
  });

  it("accepts increasing IDs, holes, and concurrent calls in any order", () => {
    assert.deepEqual(
      findIdViolations([
        call("a", 0, 10, 1, 2),
        call("b", 11, 20, 7),
        // c and d overlap in time: either may get the lower ID.
        call("c", 21, 30, 9),
        call("d", 22, 29, 8),
      ]),
      [],
    );
  });

  it("flags an ID returned twice", () => {
    const found = findIdViolations([call("a", 0, 10, 5), call("b", 5, 15, 5)]);
    assert.deepEqual(
      found.map((v) => v.kind),
      ["duplicate"],
    );
  });

  it("flags a later call that got a lower ID than one returned before it started", () => {
    const found = findIdViolations([call("a", 0, 10, 5), call("b", 11, 20, 4)]);
    assert.deepEqual(
      found.map((v) => v.kind),
      ["order"],
    );
  });

  it("flags an equal ID in a later call as both duplicate and order violation", () => {
    const found = findIdViolations([call("a", 0, 10, 5), call("b", 11, 20, 5)]);
    assert.deepEqual(found.map((v) => v.kind).sort(), ["duplicate", "order"]);
  });

  it("compares against the highest ID of all earlier calls, not just the last", () => {
    const found = findIdViolations([
      call("a", 0, 10, 100),
      call("b", 1, 12, 50),
      call("c", 13, 20, 60),
    ]);
    assert.deepEqual(
      found.map((v) => v.kind),
      ["order"],
    );
  });

  it("flags a batch whose IDs do not increase", () => {
    const found = findIdViolations([call("a", 0, 10, 3, 2)]);
    assert.deepEqual(
      found.map((v) => v.kind),
      ["batch-order"],
    );
  });

  it("is exact beyond 2^53", () => {
    const big = 2n ** 53n;
    const found = findIdViolations([
      { client: "a", startMs: 0, endMs: 1, ids: [big + 1n] },
      { client: "b", startMs: 2, endMs: 3, ids: [big] },
    ]);
    assert.deepEqual(
      found.map((v) => v.kind),
      ["order"],
    );
  });
});
