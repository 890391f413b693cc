import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { initState } from "../node/node-state.js";
import { initPlan } from "./init.js";

const { healthy, unmarked, servesLocks, quarantined } = initState;
const unreachable = undefined;

describe("initPlan: what init does from what each node is", () => {
  it("changes nothing on a cluster with a node in service, lifting or not", () => {
    for (const lift of [false, true]) {
      assert.equal(initPlan([healthy, quarantined, unmarked], lift), "in use");
      assert.equal(initPlan([unreachable, healthy, servesLocks], lift), "in use");
    }
  });

  it("marks nodes that none marked", () => {
    assert.equal(initPlan([unmarked, unmarked, unmarked], false), "mark");
    // An unreachable node is left to the write round, which needs every node.
    assert.equal(initPlan([unmarked, unreachable, unmarked], false), "mark");
  });

  it("leaves nodes that all serve from lost: markers as they are unless told they are new: their fencing counters are lost everywhere", () => {
    assert.equal(initPlan([servesLocks, servesLocks, servesLocks], false), "lost");
    assert.equal(initPlan([servesLocks, unreachable, servesLocks], false), "lost");
    assert.equal(initPlan([servesLocks, servesLocks, servesLocks], true), "lift");
  });

  it("waits while a quarantine runs, or unmarked nodes stand beside serving ones, unless told to lift", () => {
    const waiting = [
      [quarantined, quarantined, quarantined],
      [servesLocks, servesLocks, quarantined],
      [unmarked, unmarked, quarantined],
      [servesLocks, unmarked, servesLocks],
    ];
    for (const states of waiting) {
      assert.equal(initPlan(states, false), "wait", JSON.stringify(states));
      assert.equal(initPlan(states, true), "lift", JSON.stringify(states));
    }
  });
});
