import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Timer } from "../clock.js";
import { HeirWatch } from "./heir-watch.js";

/** A timer whose callbacks run only when the test says so. */
function manualTimer() {
  const due: Array<{ ms: number; callback: () => void; cancelled: boolean }> = [];
  const timer: Timer = (ms, callback) => {
    const entry = { ms, callback, cancelled: false };
    due.push(entry);
    return () => {
      entry.cancelled = true;
    };
  };
  const fire = () => {
    for (const entry of due.splice(0)) if (!entry.cancelled) entry.callback();
  };
  return { timer, fire, due };
}

function watch(quorum: number) {
  const { timer, fire, due } = manualTimer();
  const woken: Array<[string, bigint | undefined]> = [];
  const clock = { nowMs: 0 };
  const heirWatch = new HeirWatch({
    nodes: [], // heard() uses no node: the notices are given by hand
    instanceId: "i",
    quorum,
    windowMs: 3,
    now: () => clock.nowMs,
    timer,
    onHeir: (waiterId, fence) => woken.push([waiterId, fence]),
  });
  return { heirWatch, woken, fire, due, clock };
}

describe("HeirWatch: an heir is woken by a majority's notices", () => {
  it("wakes at the quorum's notice, with the highest fence the notices carried; the window's end adds no wake", () => {
    const { heirWatch, woken, fire, due } = watch(3);
    heirWatch.heard("i:1 7", 0);
    heirWatch.heard("i:1 9", 1);
    assert.deepEqual(woken, [], "two of five nodes are not a majority");
    assert.deepEqual(
      due.map((d) => d.ms),
      [3],
      "one window, opened by the first notice",
    );
    heirWatch.heard("i:1 8", 2);
    assert.deepEqual(woken, [["i:1", 9n]]);
    fire();
    assert.deepEqual(woken, [["i:1", 9n]]);
  });

  it("after the wake, each further node that names the heir wakes it again", () => {
    // The wake's round may have been refused by nodes that had not released
    // yet (a late notice of an earlier release can make up the majority):
    // their notices, absorbed, left the heir waiting for its poll. A waiter
    // whose round was granted is gone, and the extra wake-ups are dropped.
    const { heirWatch, woken } = watch(3);
    heirWatch.heard("i:1", 0);
    heirWatch.heard("i:1", 1);
    heirWatch.heard("i:1", 2);
    assert.equal(woken.length, 1);
    heirWatch.heard("i:1", 3);
    heirWatch.heard("i:1", 4);
    assert.equal(woken.length, 3, "nodes 3 and 4 named it after the wake");
  });

  it("after the wake, a node heard before that names the heir again (a later release) wakes it again", () => {
    // The wake's round was refused: another waiter took the lock meanwhile
    // and released it within the window, and the nodes that named this
    // heir for the first release name it again. A node sends one notice
    // per heir and release (heir-queue.ts), so this is the later release:
    // absorbed as a repeat, it left the heir waiting for its poll (for
    // good, with no poll), and the key reserved for it unused.
    const { heirWatch, woken } = watch(3);
    for (const node of [0, 1, 2]) heirWatch.heard("i:1", node);
    assert.equal(woken.length, 1);
    for (const node of [0, 1, 2]) heirWatch.heard("i:1", node);
    assert.equal(woken.length, 4, "each of the later release's notices wakes it");
  });

  it("counts each node once before the wake: two nodes naming the heir twice each are not a majority", () => {
    const { heirWatch, woken } = watch(3);
    // Nodes 0 and 1 each name the heir twice (a release and a later one).
    heirWatch.heard("i:1", 0);
    heirWatch.heard("i:1", 0);
    heirWatch.heard("i:1", 1);
    heirWatch.heard("i:1", 1);
    assert.deepEqual(woken, [], "two of five nodes are not a majority");
    heirWatch.heard("i:1", 2);
    assert.deepEqual(woken, [["i:1", undefined]]);
  });

  it("wakes at the window's end when fewer nodes name the heir", () => {
    const { heirWatch, woken, fire } = watch(3);
    heirWatch.heard("i:2");
    heirWatch.heard("i:3 4");
    heirWatch.heard("i:3 6");
    heirWatch.heard("i:2");
    assert.deepEqual(woken, []);
    fire();
    assert.deepEqual(
      woken.sort(),
      [
        ["i:2", undefined],
        ["i:3", 6n],
      ],
      "each waiter once, after its window, with the highest fence heard",
    );
  });

  it("opens a new window for a later release once the last one ended", () => {
    const { heirWatch, woken, fire } = watch(2);
    heirWatch.heard("i:1 1");
    heirWatch.heard("i:1 1");
    fire();
    heirWatch.heard("i:1 2");
    heirWatch.heard("i:1 2");
    assert.deepEqual(woken, [
      ["i:1", 1n],
      ["i:1", 2n],
    ]);
  });

  it("ends a window by the clock when its timer has not run, at the next notice", () => {
    // An injected clock runs its timers when it says so: the window must
    // not absorb a later release's notices meanwhile.
    const { heirWatch, woken, clock } = watch(3);
    heirWatch.heard("i:1 1");
    clock.nowMs = 2;
    heirWatch.heard("i:1 1");
    assert.deepEqual(woken, [], "within the window");
    clock.nowMs = 3;
    heirWatch.heard("i:1 2");
    assert.deepEqual(woken, [["i:1", 1n]], "the first window ended unmet: its heir is woken");
    heirWatch.heard("i:1 2");
    heirWatch.heard("i:1 2");
    assert.deepEqual(
      woken,
      [
        ["i:1", 1n],
        ["i:1", 2n],
      ],
      "the next release's notices count in a window of their own",
    );
  });

  it("wakes at once when too many windows are open", () => {
    const { heirWatch, woken } = watch(3);
    for (let i = 0; i < 10_000; i++) heirWatch.heard(`i:${i}`);
    assert.equal(woken.length, 0);
    heirWatch.heard("i:extra");
    assert.deepEqual(woken, [["i:extra", undefined]]);
  });

  it("wakes at once with a quorum of one", () => {
    const { heirWatch, woken, due } = watch(1);
    heirWatch.heard("i:1 5");
    assert.deepEqual(woken, [["i:1", 5n]]);
    assert.equal(due.length, 0, "no window to wait for");
  });

  it("wakes nobody after close(), and cancels the windows open then", async () => {
    const { heirWatch, woken, fire, due } = watch(3);
    heirWatch.heard("i:1");
    await heirWatch.close();
    assert.ok(due.every((d) => d.cancelled));
    // A majority's notices after close(), then the windows' timers.
    for (let i = 0; i < 3; i++) heirWatch.heard("i:1");
    fire();
    assert.deepEqual(woken, []);
  });
});
