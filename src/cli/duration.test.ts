import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { verdictOf } from "../node/verdict.js";
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
    assert.match(verdict.ids.reasons[0]!, /no ID counter marker: run `redquorum id init`/);
    assert.match(verdict.ids.reasons[1]!, /ID counter marker "suspect".*until repaired/);
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
