import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { findOverlaps, type Hold } from "./checkers.js";

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
