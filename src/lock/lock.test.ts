import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Lock, type LockOwner } from "./lock.js";

const owner: LockOwner = {
  clock: { now: () => 0 } as LockOwner["clock"],
  extendLock: () => Promise.reject(new Error("not here")),
  releaseLock: () => Promise.resolve(),
};
const yes = { kind: "yes" };
const no = { kind: "no" };
const lockHeldOn = (holders: ReadonlyArray<{ kind: string } | undefined>) =>
  new Lock(owner, ["r"], ["r"], "v", 10_000, 3, new Map(), holders);
const nodes = ["a:1", "b:2", "c:3", "d:4", "e:5"];
/** A failed extension's answers, node by node ("-": none). */
const answers = (text: string) => (i: number) =>
  ({ y: "yes", n: "no", e: "error" })[text[i] as "y" | "n" | "e"];

describe("Lock.loseIfNotHeld (after a failed extension)", () => {
  it("keeps the validity while a majority holds the keys as far as anyone said", () => {
    const lock = lockHeldOn([yes, yes, yes, yes, yes]);
    assert.equal(lock.loseIfNotHeld(answers("nn---"), 3, nodes), false);
    assert.equal(lock.remainingMs(), 10_000);
  });

  it("leaves no validity once too few nodes hold them for a majority, for good", () => {
    const lock = lockHeldOn([yes, yes, yes, yes, yes]);
    assert.equal(lock.loseIfNotHeld(answers("nnn--"), 3, nodes), true);
    assert.equal(lock.remainingMs(), 0);
    // What the keep-alive says of it: how many still hold it, and who refused.
    assert.equal(
      lock.lostDetail,
      "at most 2 of 5 nodes still hold them, 3 needed; an extension was refused on a:1, b:2, c:3",
    );
    assert.equal(lock.validUntilMs, Number.NEGATIVE_INFINITY);
    assert.equal(lock.loseIfNotHeld(answers("yyyyy"), 3, nodes), true, "no validity comes back");
  });

  it("counts the holders of the grant, and the nodes that extended now", () => {
    // Granted by 0, 1, 2; node 3 refused, node 4 never answered.
    const grantedBy012 = () => lockHeldOn([yes, yes, yes, no, undefined]);
    assert.equal(grantedBy012().loseIfNotHeld(answers("---nn"), 3, nodes), false);
    assert.equal(grantedBy012().loseIfNotHeld(answers("n----"), 3, nodes), true);
    // Node 4's late SET did run: it extends now, so 1, 2 and 4 hold them.
    assert.equal(grantedBy012().loseIfNotHeld(answers("n-e-y"), 3, nodes), false);
    // A node that errs (a timeout, a quarantine) is not taken to have lost them.
    assert.equal(grantedBy012().loseIfNotHeld(answers("eee--"), 3, nodes), false);
  });

  it("tells the keep-alive that the validity changed", () => {
    const lock = lockHeldOn([yes, yes, yes]);
    let told = 0;
    lock.onValidityChange = () => told++;
    lock.loseIfNotHeld(answers("---"), 2, nodes);
    assert.equal(told, 0);
    lock.loseIfNotHeld(answers("-nn"), 2, nodes);
    assert.equal(told, 1);
  });
});
