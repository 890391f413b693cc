import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { InvalidArgumentError } from "../errors.js";
import { graceSchedule, usingSchedule } from "./keep-alive-schedule.js";

const defaults = { nodeTimeoutMs: 50, driftMs: 2, driftFactor: 0.01 };

describe("usingSchedule (when using() extends and when it gives up)", () => {
  it("extends at half the TTL by default and gives up with two node timeouts and the drift left", () => {
    const schedule = usingSchedule(10_000, defaults, undefined);
    assert.deepEqual(schedule, {
      ttlMs: 10_000,
      extendThresholdMs: 5_000,
      marginMs: 2 * 50 + 2,
      retryDelayMs: 50,
    });
  });

  it("keeps the margin below the threshold, and an extension's time between them, for every TTL", () => {
    for (const nodeTimeoutMs of [1, 50, 200, 1_000]) {
      for (const ttlMs of [40, 100, 333, 1_000, 10_000, 3_600_000]) {
        const options = { ...defaults, nodeTimeoutMs };
        const { marginMs, extendThresholdMs } = usingSchedule(ttlMs, options, undefined);
        const context = `ttl ${ttlMs}, node timeout ${nodeTimeoutMs}`;
        assert.ok(marginMs < extendThresholdMs, context);
        assert.ok(marginMs <= ttlMs / 4, context);
        assert.ok(extendThresholdMs < ttlMs, context);
      }
    }
  });

  it("takes a threshold within its range and refuses one outside it, naming the range", () => {
    assert.equal(usingSchedule(10_000, defaults, 3_000).extendThresholdMs, 3_000);
    for (const bad of [10, 9_000, 1.5, Number.NaN]) {
      assert.throws(
        () => usingSchedule(10_000, defaults, bad),
        (error: unknown) =>
          error instanceof InvalidArgumentError && /extendThresholdMs/.test(error.message),
        String(bad),
      );
    }
  });
});

describe("graceSchedule (redquorum lock: --kill-after's grace inside the validity)", () => {
  it("tells the routine the grace earlier than using() would, and leaves using()'s margin at the end", () => {
    const { schedule, graceMs, endMarginMs } = graceSchedule(30_000, defaults, 5_000);
    assert.equal(graceMs, 5_000);
    assert.equal(endMarginMs, usingSchedule(30_000, defaults, undefined).marginMs);
    assert.equal(schedule.marginMs, endMarginMs + 5_000);
    assert.equal(schedule.extendThresholdMs, 15_000);
  });

  it("gives what the TTL leaves room for, never more than asked, with an extension's time before the routine is told", () => {
    for (const nodeTimeoutMs of [1, 50, 500, 1_000]) {
      for (const ttlMs of [100, 1_000, 3_000, 30_000]) {
        for (const wantedMs of [0, 300, 5_000, 60_000]) {
          const options = { ...defaults, nodeTimeoutMs };
          const { schedule, graceMs, endMarginMs } = graceSchedule(ttlMs, options, wantedMs);
          const context = `ttl ${ttlMs}, node timeout ${nodeTimeoutMs}, grace asked ${wantedMs}`;
          assert.ok(graceMs >= 0 && graceMs <= wantedMs, context);
          assert.equal(schedule.marginMs, endMarginMs + graceMs, context);
          assert.ok(schedule.marginMs < schedule.extendThresholdMs, context);
          assert.ok(schedule.extendThresholdMs < ttlMs, context);
          if (graceMs > 0) {
            assert.ok(schedule.extendThresholdMs > schedule.marginMs + nodeTimeoutMs, context);
          }
        }
      }
    }
    assert.equal(graceSchedule(1_000, defaults, 5_000).graceMs, 585);
  });

  it("with no grace, is using()'s schedule", () => {
    assert.deepEqual(
      graceSchedule(10_000, defaults, 0).schedule,
      usingSchedule(10_000, defaults, undefined),
    );
  });
});
