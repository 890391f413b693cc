import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { describeSeed, prng, testSeed } from "../../test/helpers/seed.js";
import type { Timer } from "../clock.js";
import type { HandoffOutcome } from "./handoff.js";
import { WaitQueues } from "./wait-queue.js";
import { Waiter, type Wake } from "./waiter.js";

/** A timer that never fires: wake-ups are the only way out of a park. */
const never: Timer = () => () => {};
const instant: Timer = (_ms, callback) => {
  queueMicrotask(callback);
  return () => {};
};

function queues() {
  const watched: string[] = [];
  const waits = new WaitQueues({ onWatch: (key) => watched.push(key) });
  return { waits, watched };
}

function waiter(waits: WaitQueues, ...keys: string[]): Waiter {
  const w = new Waiter(keys);
  waits.add(w);
  return w;
}

describe("WaitQueues", () => {
  it("keeps arrival order through removals anywhere in a long queue (seeded)", () => {
    const seed = testSeed();
    const random = prng(seed);
    const { waits } = queues();
    const all = Array.from({ length: 5_000 }, () => waiter(waits, "k"));
    const left = new Set(all);
    // Mostly from the front (grants), some from anywhere (callers giving
    // up): the front's empty slots are dropped again and again.
    while (left.size > 0) {
      const remaining = [...left];
      const gone =
        random() < 0.7 ? remaining[0]! : remaining[Math.floor(random() * remaining.length)]!;
      waits.remove(gone, false);
      left.delete(gone);
      const first = all.find((w) => left.has(w));
      if (first)
        assert.ok(waits.isFirst(first), `${describeSeed(seed)}: the earliest left is first`);
      assert.equal(waits.size, left.size);
    }
    assert.equal(waits.hasWaiters(["k"]), false);
  });

  it("wakes the waiter a node named heir, also when the notice came before it joined", async () => {
    const { waits } = queues();
    const early = new Waiter(["k"], "i:1");
    assert.equal(waits.wakeHeir("i:1"), undefined, "not queued yet");
    waits.add(early);
    assert.deepEqual(await early.park(1_000, never, undefined), { kind: "released" });
    const late = new Waiter(["k"], "i:2");
    waits.add(late);
    const parked = late.park(1_000, never, undefined);
    assert.equal(waits.wakeHeir("i:2"), late);
    assert.deepEqual(await parked, { kind: "released" });
    // A notice for a caller that is done is forgotten: the next one with that id is not woken by it.
    waits.wakeHeir("i:3");
    waits.forget("i:3");
    const fresh = new Waiter(["k"], "i:3");
    waits.add(fresh);
    const wake = await fresh.park(0, instant, undefined);
    assert.deepEqual(wake, { kind: "timer" });
  });

  it("serves one key first come first served, and is told when a key gets its first waiter", () => {
    const { waits, watched } = queues();
    const a = waiter(waits, "k");
    const b = waiter(waits, "k");
    assert.deepEqual(watched, ["k"]);
    assert.ok(waits.isFirst(a));
    assert.ok(!waits.isFirst(b));
    waits.remove(a, false);
    assert.ok(waits.isFirst(b));
    waits.remove(b, false);
    assert.ok(!waits.hasWaiters(["k"]));
    waiter(waits, "k");
    assert.deepEqual(watched, ["k", "k"], "a first waiter again after none");
  });

  it("a multi-key waiter goes first only when first on every key; queues never disagree", () => {
    const { waits } = queues();
    const ab = waiter(waits, "a", "b");
    const b = waiter(waits, "b");
    const ba = waiter(waits, "b", "a");
    assert.ok(waits.isFirst(ab));
    assert.ok(!waits.isFirst(b));
    assert.ok(!waits.isFirst(ba));
    waits.remove(ab, false);
    assert.ok(waits.isFirst(b));
    assert.ok(!waits.isFirst(ba), "ba is first on a but second on b");
    waits.remove(b, false);
    assert.ok(waits.isFirst(ba));
  });

  it("a park ends on wake(), on its timer, or on abort with the signal's or abort()'s reason", async () => {
    const { waits } = queues();
    const w = waiter(waits, "k");
    const parked = w.park(1_000, never, undefined);
    assert.ok(w.parked);
    w.wake();
    assert.deepEqual(await parked, { kind: "released" } satisfies Wake);
    assert.ok(!w.parked);
    assert.deepEqual(await w.park(5, instant, undefined), { kind: "timer" });
    const controller = new AbortController();
    const aborted = w.park(1_000, never, controller.signal);
    const reason = new Error("stop");
    controller.abort(reason);
    await assert.rejects(aborted, (error) => error === reason);
    await assert.rejects(w.park(1_000, never, controller.signal), (error) => error === reason);
    const closing = w.park(1_000, never, undefined);
    const closed = new Error("closed");
    w.abort(closed);
    await assert.rejects(closing, (error) => error === closed);
  });

  it("a wake-up during an attempt (not parked) is kept for the next park", async () => {
    const { waits } = queues();
    const w = waiter(waits, "k");
    w.wake();
    assert.deepEqual(await w.park(1_000, never, undefined), { kind: "released" });
  });

  it("released() wakes only the waiter whose turn it is", async () => {
    const { waits } = queues();
    const first = waiter(waits, "k");
    const second = waiter(waits, "k");
    let secondWoken = false;
    const p1 = first.park(1_000, never, undefined);
    const p2 = second.park(1_000, never, undefined).then((wake) => {
      secondWoken = true;
      return wake;
    });
    waits.released(["k"]);
    assert.deepEqual(await p1, { kind: "released" });
    await new Promise((r) => setImmediate(r));
    assert.equal(secondWoken, false);
    // The first got the lock: leaving does not wake the second (the lock is held).
    waits.remove(first, false);
    await new Promise((r) => setImmediate(r));
    assert.equal(secondWoken, false);
    // A waiter that gives up does wake the next one (the lock may be free).
    second.wake();
    assert.deepEqual(await p2, { kind: "released" });
    const third = waiter(waits, "k");
    const p3 = third.park(1_000, never, undefined);
    waits.remove(second, true);
    assert.deepEqual(await p3, { kind: "released" });
    waits.remove(third, true);
  });

  it("a run of handoffs ends after runMin also when every handoff empties the queue; a real release starts it again", () => {
    const { waits } = queues();
    // Two callers handing the lock back and forth: one parked waiter at a time.
    const nextRelease = () => {
      const w = waiter(waits, "k");
      void w.park(1_000, never, undefined);
      const heir = waits.heirFor(["k"], 3);
      w.wake();
      waits.remove(w, false);
      return heir === w ? "handoff" : heir;
    };
    const releases = Array.from({ length: 8 }, nextRelease);
    assert.deepEqual(releases, [
      ...["handoff", "handoff", "handoff", "yield"],
      ...["handoff", "handoff", "handoff", "yield"],
    ]);
    nextRelease();
    nextRelease();
    waits.reallyReleased("k"); // nobody of ours waiting: forgotten
    assert.deepEqual(Array.from({ length: 4 }, nextRelease), [
      ...["handoff", "handoff", "handoff", "yield"],
    ]);
  });

  it("hands a lock only to the first parked waiter with exactly the same keys", async () => {
    const { waits } = queues();
    const ab = waiter(waits, "a", "b");
    assert.equal(waits.heirFor(["b", "a"], 16), undefined, "not parked");
    const parked = ab.park(1_000, never, undefined);
    assert.equal(waits.heirFor(["a"], 16), undefined, "different keys");
    assert.equal(waits.heirFor(["b", "a"], 16), ab);
    let outcome: HandoffOutcome | undefined;
    assert.ok(
      ab.handOff({
        fromValue: "v",
        settle: (o) => {
          outcome = o;
        },
      }),
    );
    const wake = await parked;
    assert.equal(wake.kind, "handoff");
    if (wake.kind === "handoff") {
      assert.equal(wake.handoff.fromValue, "v");
      wake.handoff.settle({
        won: true,
        replaced: [true],
        notHeld: [false],
        sent: [true],
        othersWait: false,
      });
    }
    assert.deepEqual(outcome, {
      won: true,
      replaced: [true],
      notHeld: [false],
      sent: [true],
      othersWait: false,
    });
    assert.equal(ab.handOff({ fromValue: "v", settle: () => {} }), false, "not parked any more");
  });

  it("yields after runMin handoffs in a row; uncontested yields thin out, a listener resets them", () => {
    const { waits } = queues();
    const w = waiter(waits, "k");
    void w.park(1_000, never, undefined);
    const picks = (n: number) =>
      Array.from({ length: n }, () => (waits.heirFor(["k"], 2) === "yield" ? "Y" : "h")).join("");
    assert.equal(picks(6), "hhYhhY");
    waits.yielded("k", false, 2, 8); // nobody else listened: 4 before the next yield
    assert.equal(picks(5), "hhhhY");
    waits.yielded("k", false, 2, 8);
    waits.yielded("k", false, 2, 8); // capped at 8
    assert.equal(picks(9), "hhhhhhhhY");
    waits.yielded("k", true, 2, 8); // another instance listened: back to 2
    assert.equal(picks(3), "hhY");
    w.wake();
    waits.remove(w, false);
  });
});
