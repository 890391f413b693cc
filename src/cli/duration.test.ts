import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { durationOption, formatDuration, parseDuration } from "./duration.js";
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

describe("durationOption", () => {
  const parse = (range: { minMs: number; maxMs: number } | undefined, text: string) =>
    durationOption("--max-ttl <duration>", "the longest TTL", "5m", range).parseArg!(
      text,
      undefined,
    );
  const refusal = (range: { minMs: number; maxMs: number } | undefined, text: string) => {
    try {
      parse(range, text);
    } catch (error) {
      return error instanceof UsageError ? error.message : String(error);
    }
    return "accepted";
  };

  it("refuses a value out of range naming the option and the range: no upper end when there is none but the timers'", () => {
    const open = { minMs: 100, maxMs: 2 ** 31 - 1 };
    assert.equal(refusal(open, "0ms"), 'invalid --max-ttl: "0ms": expected at least 100ms');
    assert.equal(refusal(open, "99ms"), 'invalid --max-ttl: "99ms": expected at least 100ms');
    assert.equal(parse(open, "100ms"), 100);
    const bounded = { minMs: 1, maxMs: 60_000 };
    assert.equal(refusal(bounded, "2m"), 'invalid --max-ttl: "2m": expected 1ms to 1m');
    assert.equal(parse(bounded, "1m"), 60_000);
  });
});
