import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { quorumOf, roundState } from "./round.js";

describe("quorumOf", () => {
  it("is floor(N/2)+1 for every N, odd and even", () => {
    assert.deepEqual([1, 2, 3, 4, 5, 6, 7].map(quorumOf), [1, 2, 2, 3, 3, 4, 4]);
  });
});

describe("roundState", () => {
  it("is won as soon as a quorum said yes", () => {
    assert.equal(roundState(3, 0, 5, 3), "won");
    assert.equal(roundState(3, 2, 5, 3), "won");
  });

  it("is lost once the nodes left cannot make a quorum", () => {
    assert.equal(roundState(0, 3, 5, 3), "lost");
    assert.equal(roundState(2, 3, 5, 3), "lost");
  });

  it("stays open while both outcomes are possible", () => {
    assert.equal(roundState(2, 2, 5, 3), "open");
    assert.equal(roundState(0, 0, 5, 3), "open");
  });

  it("decides every combination of 5 nodes the same way as counting all votes", () => {
    // Exhaustive over every split of answered nodes: early decisions must agree
    // with the decision after all 5 answered, whatever the rest say.
    for (let yes = 0; yes <= 5; yes++) {
      for (let no = 0; yes + no <= 5; no++) {
        const state = roundState(yes, no, 5, 3);
        const rest = 5 - yes - no;
        const bestCase = yes + rest >= 3;
        const worstCase = yes >= 3;
        if (state === "won") assert.ok(worstCase, `yes=${yes} no=${no}`);
        if (state === "lost") assert.ok(!bestCase, `yes=${yes} no=${no}`);
        if (state === "open") assert.ok(bestCase && !worstCase, `yes=${yes} no=${no}`);
      }
    }
  });
});
