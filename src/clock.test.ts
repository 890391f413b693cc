import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { describe, it } from "node:test";
import { onAbort } from "./clock.js";

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
