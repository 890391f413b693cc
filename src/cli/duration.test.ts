import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { formatDuration, parseDuration } from "./duration.js";
import { UsageError } from "./errors.js";

describe("parseDuration", () => {
  it("reads an integer followed by ms, s, m or h", () => {
    assert.equal(parseDuration("500ms", "--wait"), 500);
    assert.equal(parseDuration("30s", "--ttl"), 30_000);
    assert.equal(parseDuration("5m", "--ttl"), 300_000);
    assert.equal(parseDuration("1h", "--ttl"), 3_600_000);
    assert.equal(parseDuration("0s", "--wait"), 0);
  });

  it("refuses anything else with one line naming the argument and what is allowed", () => {
    for (const bad of ["", "30", "1.5s", "-1s", "5x", "s", "10 s", "1e3ms"]) {
      assert.throws(
        () => parseDuration(bad, "--ttl"),
        (error: unknown) =>
          error instanceof UsageError &&
          error.argument === "--ttl" &&
          !error.message.includes("\n") &&
          /^invalid --ttl: .* expected an integer followed by ms, s, m or h/.test(error.message),
        bad,
      );
    }
  });

  it('calls a duration written right but longer than a timer takes too long, not "not a duration"', () => {
    for (const long of ["9999999h", "600h", "2147483648ms"]) {
      assert.throws(
        () => parseDuration(long, "--wait"),
        (error: unknown) =>
          error instanceof UsageError &&
          error.message ===
            `invalid --wait: "${long}" is too long: at most 2147483647ms (about 24 days)`,
        long,
      );
    }
    assert.equal(parseDuration("596h", "--wait"), 596 * 3_600_000);
  });

  it("formats back the way durations are written, in the largest exact unit", () => {
    assert.equal(formatDuration(200), "200ms");
    assert.equal(formatDuration(10_000), "10s");
    assert.equal(formatDuration(300_000), "5m");
    assert.equal(formatDuration(1_500), "1500ms");
    assert.equal(formatDuration(3_600_000), "1h");
    assert.equal(formatDuration(5_400_000), "90m");
  });
});
