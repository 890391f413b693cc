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

describe("Lock.loseIfNotHeld (after a failed extension)", () => {
  it("keeps the validity while the holders not saying otherwise are a majority", () => {
    const lock = lockHeldOn([yes, yes, yes, yes, yes]);
    assert.equal(
      lock.loseIfNotHeld((i) => i < 2, 3),
      false,
    );
    assert.equal(lock.remainingMs(), 10_000);
  });

  it("leaves no validity once too few holders are left for a majority", () => {
    const lock = lockHeldOn([yes, yes, yes, yes, yes]);
    assert.equal(
      lock.loseIfNotHeld((i) => i < 3, 3),
      true,
    );
    assert.equal(lock.remainingMs(), 0);
    assert.equal(lock.validUntilMs, Number.NEGATIVE_INFINITY);
  });

  it("counts only the nodes that held the keys (a refusal or silence at the grant is no holder)", () => {
    // Granted by 0, 1, 2; node 3 refused, node 4 never answered.
    const lock = lockHeldOn([yes, yes, yes, no, undefined]);
    assert.equal(
      lock.loseIfNotHeld((i) => i === 3 || i === 4, 3),
      false,
    );
    assert.equal(
      lock.loseIfNotHeld((i) => i === 0, 3),
      true,
    );
  });

  it("tells the keep-alive that the validity changed", () => {
    const lock = lockHeldOn([yes, yes, yes]);
    let told = 0;
    lock.onValidityChange = () => told++;
    lock.loseIfNotHeld(() => false, 2);
    assert.equal(told, 0);
    lock.loseIfNotHeld((i) => i > 0, 2);
    assert.equal(told, 1);
  });
});
