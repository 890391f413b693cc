import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { quorumOf, repairReadsOf, roundState } from "./round.js";

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

describe("repairReadsOf", () => {
  it("is N - quorumOf(N) + 1: never more than a quorum, fewer on even N", () => {
    assert.deepEqual([1, 2, 3, 4, 5, 6, 7].map(repairReadsOf), [1, 1, 2, 2, 3, 3, 4]);
    for (let n = 1; n <= 15; n++) assert.ok(repairReadsOf(n) <= quorumOf(n), `N=${n}`);
  });

  it("a lone node has no other node to be repaired from", () => {
    assert.ok(repairReadsOf(1) > 0);
  });

  it("any that many other nodes meet every winning majority minus the lost node, and one fewer does not", () => {
    const bits = (mask: number) => {
      let count = 0;
      for (let m = mask; m !== 0; m &= m - 1) count++;
      return count;
    };
    for (let n = 2; n <= 9; n++) {
      const quorum = quorumOf(n);
      const reads = repairReadsOf(n);
      const all = (1 << n) - 1;
      const majorities: number[] = [];
      for (let mask = 0; mask <= all; mask++) if (bits(mask) === quorum) majorities.push(mask);
      for (let lost = 0; lost < n; lost++) {
        const others = all & ~(1 << lost);
        let tooFewMiss = false;
        for (let readSet = others; readSet > 0; readSet = (readSet - 1) & others) {
          const size = bits(readSet);
          if (size !== reads && size !== reads - 1) continue;
          const missed = majorities.some((m) => (readSet & m & ~(1 << lost)) === 0);
          if (size === reads)
            assert.ok(!missed, `N=${n} lost=${lost} reads=${readSet.toString(2)}`);
          else tooFewMiss ||= missed;
        }
        // One read fewer can miss a majority entirely (with 0 reads, trivially).
        assert.ok(reads === 1 || tooFewMiss, `N=${n}: ${reads - 1} reads would be enough`);
      }
    }
  });
});
