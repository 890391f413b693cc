import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { runInNewContext } from "node:vm";
import { callHook } from "./observe.js";

/** Runs `body`, then gives unhandled rejections a few turns to surface; returns those seen. */
async function unhandledDuring(body: () => void): Promise<unknown[]> {
  const seen: unknown[] = [];
  const onUnhandled = (reason: unknown) => seen.push(reason);
  process.on("unhandledRejection", onUnhandled);
  try {
    body();
    for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off("unhandledRejection", onUnhandled);
  }
  return seen;
}

describe("callHook: an application's hook cannot fail what calls it", () => {
  it("drops a hook's exception and passes its arguments and this", () => {
    const calls: unknown[][] = [];
    const owner = {
      log(this: unknown, ...args: unknown[]) {
        calls.push([this === owner, ...args]);
        throw new Error("the hook's own failure");
      },
    };
    callHook(owner.log, owner, "message", { a: 1 });
    assert.deepEqual(calls, [[true, "message", { a: 1 }]]);
  });

  it("handles the rejection of a promise the hook returns, of this realm or another", async () => {
    const seen = await unhandledDuring(() => {
      callHook(async () => {
        throw new Error("async hook");
      }, undefined);
      // A hook made in a vm context returns that realm's Promise.
      callHook(
        () => runInNewContext("Promise.reject(new Error('another realm'))") as unknown,
        undefined,
      );
    });
    assert.deepEqual(seen, []);
  });

  it("does not call then on a thenable that is not a promise: it may start what it describes", () => {
    // A query builder's thenable runs its query when then is called.
    let started = 0;
    const lazy = {
      // biome-ignore lint/suspicious/noThenProperty: the point of the test
      then(resolve: (value: unknown) => void) {
        started++;
        resolve(undefined);
      },
    };
    callHook(() => lazy, undefined);
    assert.equal(started, 0);
  });
});
