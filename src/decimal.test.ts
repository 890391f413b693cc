import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { maxId, maxOf, parseCounter } from "./decimal.js";

describe("counter values", () => {
  it("parse exactly, far beyond 2^53", () => {
    assert.equal(parseCounter("0"), 0n);
    assert.equal(parseCounter("9007199254740993"), 2n ** 53n + 1n);
    assert.equal(parseCounter("9223372036854775807"), maxId);
    assert.equal(parseCounter(Buffer.from("42")), 42n);
  });

  it("refuse what a counter cannot hold", () => {
    for (const bad of [
      "",
      "-1",
      "01",
      "1.5",
      "1e3",
      " 1",
      "9223372036854775808",
      "99999999999999999999",
      7,
      null,
    ]) {
      assert.throws(() => parseCounter(bad), /counter value/, String(bad));
    }
  });

  it("maxOf", () => {
    assert.equal(maxOf(3n, 5n), 5n);
    assert.equal(maxOf(5n, 3n), 5n);
  });
});
