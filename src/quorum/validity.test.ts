import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { driftAllowanceMs, validityMs, validUntilMs } from "./validity.js";

describe("validity maths", () => {
  it("drift is ttl * driftFactor + the fixed allowance", () => {
    assert.equal(driftAllowanceMs(10_000, 0.01, 2), 102);
    assert.equal(driftAllowanceMs(1, 0, 2), 2);
  });

  it("validity = ttl - elapsed - drift (seed 1, step 4)", () => {
    // started at 1000, now 1050: 50 ms elapsed of a 10 s TTL, 102 ms drift.
    assert.equal(validityMs(1000, 1050, 10_000, 0.01, 2), 10_000 - 50 - 102);
  });

  it("the lock is valid until start + ttl - drift, whenever the replies came", () => {
    assert.equal(validUntilMs(500, 2_000, 0.01, 2), 500 + 2_000 - 22);
  });

  it("is not positive once elapsed reaches ttl - drift", () => {
    assert.ok(validityMs(0, 988, 1_000, 0.01, 2) <= 0);
    assert.ok(validityMs(0, 987, 1_000, 0.01, 2) > 0);
  });
});
