import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { InitReport } from "../lock/init.js";
import { notReadyReason } from "./init.js";

const report = (
  found: InitReport["found"],
  action: InitReport["action"],
  serves: InitReport["serves"],
): InitReport => ({ endpoint: "redis://127.0.0.1:1", found, action, serves, detail: "" });
const inService = report("in service", "none", "locks");
const marked = report("not marked", "marked", "locks");
const recovering = report("not marked", "left to recover", "none yet");
const unreachable = report("unreachable", "none", "none yet");
const waiting = report("not marked", "none", "unfenced locks");
const quarantined = report("in quarantine", "none", "none yet");

describe("notReadyReason (redquorum init's exit code)", () => {
  it("is ready when a quorum is in service or marked now", () => {
    assert.equal(notReadyReason([inService, inService, recovering]), undefined);
    assert.equal(notReadyReason([marked, marked, marked, unreachable, unreachable]), undefined);
    assert.equal(notReadyReason([inService, marked, recovering, recovering, inService]), undefined);
  });

  it("is not ready below a quorum, and says how many nodes serve, how many are needed and why", () => {
    assert.equal(
      notReadyReason([inService, inService, recovering, recovering, unreachable]),
      "not ready for locks: 2 of 5 nodes in service, 3 needed (2 left to recover, 1 unreachable); " +
        "see each node's DETAIL for what to do",
    );
    assert.equal(
      notReadyReason([quarantined, quarantined, inService]),
      "not ready for locks: 1 of 3 nodes in service, 2 needed (2 in quarantine); " +
        "see each node's DETAIL for what to do",
    );
    assert.equal(
      notReadyReason([waiting, waiting, recovering]),
      "not ready for locks: 0 of 3 nodes in service, 2 needed (1 left to recover); " +
        "see each node's DETAIL for what to do",
    );
  });
});
