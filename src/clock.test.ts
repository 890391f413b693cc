import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { describe, it } from "node:test";
import { onAbort, raceAbort } from "./clock.js";

describe("onAbort: one listener per signal", () => {
  it("calls every callback once on abort, through one listener on the signal", () => {
    const controller = new AbortController();
    const calls: number[] = [];
    for (let i = 0; i < 50; i++) onAbort(controller.signal, () => calls.push(i));
    assert.equal(getEventListeners(controller.signal, "abort").length, 1);
    controller.abort();
    controller.abort();
    assert.deepEqual(
      calls,
      Array.from({ length: 50 }, (_, i) => i),
    );
    assert.equal(getEventListeners(controller.signal, "abort").length, 0);
  });

  it("a removed callback is not called; the listener goes with the last callback", () => {
    const controller = new AbortController();
    const calls: string[] = [];
    const unwatchA = onAbort(controller.signal, () => calls.push("a"));
    const unwatchB = onAbort(controller.signal, () => calls.push("b"));
    unwatchA();
    unwatchA(); // twice is harmless
    assert.equal(getEventListeners(controller.signal, "abort").length, 1);
    unwatchB();
    assert.equal(getEventListeners(controller.signal, "abort").length, 0);
    onAbort(controller.signal, () => calls.push("c"));
    controller.abort();
    assert.deepEqual(calls, ["c"]);
  });

  it("a callback removed by another during the abort is not called (as with an EventTarget)", () => {
    const controller = new AbortController();
    const calls: string[] = [];
    let unwatchB = () => {};
    onAbort(controller.signal, () => {
      calls.push("a");
      unwatchB();
    });
    unwatchB = onAbort(controller.signal, () => calls.push("b"));
    controller.abort();
    assert.deepEqual(calls, ["a"]);
  });

  it("without a signal there is nothing to watch", () => {
    const unwatch = onAbort(undefined, () => assert.fail("called"));
    unwatch();
  });
});

describe("raceAbort", () => {
  it("with a signal aborted already, a later failure of the work it was given is no unhandled rejection", async () => {
    const unhandled: unknown[] = [];
    const seen = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", seen);
    try {
      const controller = new AbortController();
      controller.abort(new Error("stopped"));
      let fail = (_: Error) => {};
      const work = new Promise<never>((_, reject) => {
        fail = reject;
      });
      await assert.rejects(raceAbort(work, controller.signal, 1_000), /stopped/);
      fail(new Error("Connection is closed."));
      // Unhandled rejections are reported after the microtasks of a macrotask.
      await new Promise((resolve) => setTimeout(resolve, 10));
      assert.deepEqual(unhandled, []);
    } finally {
      process.off("unhandledRejection", seen);
    }
  });
});
