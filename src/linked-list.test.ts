import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { InFlight } from "./in-flight.js";
import { LinkedList, type ListEntry } from "./linked-list.js";

describe("LinkedList", () => {
  it("keeps insertion order through any pushes and removals, like an array model", () => {
    // Each step: push a new value, or remove the entry at some index of the model.
    const step = fc.oneof(
      fc.record({ push: fc.constant(true) }),
      fc.record({ remove: fc.nat(40), twice: fc.boolean() }),
    );
    fc.assert(
      fc.property(fc.array(step, { maxLength: 200 }), (steps) => {
        const list = new LinkedList<number>();
        const model: ListEntry<number>[] = [];
        let next = 0;
        for (const s of steps) {
          if ("push" in s) {
            model.push(list.push(next++));
          } else if (model.length > 0) {
            const [entry] = model.splice(s.remove % model.length, 1);
            assert.equal(list.remove(entry!), true);
            // Removing again changes nothing and says so.
            if (s.twice) assert.equal(list.remove(entry!), false);
            assert.equal(entry!.linked, false);
            assert.equal(entry!.previous, undefined);
            assert.equal(entry!.next, undefined);
          }
          assert.equal(list.size, model.length);
          assert.deepEqual(
            list.values(),
            model.map((e) => e.value),
          );
          assert.deepEqual(list.entries(), model);
          assert.equal(list.first(), model[0]?.value);
          assert.deepEqual(
            list.entries((v) => v % 2 === 0),
            model.filter((e) => e.value % 2 === 0),
          );
        }
      }),
    );
  });

  it("finds the newest match first", () => {
    const list = new LinkedList<{ key: string; n: number }>();
    list.push({ key: "a", n: 1 });
    const second = list.push({ key: "a", n: 2 });
    list.push({ key: "b", n: 3 });
    assert.equal(
      list.findLast((v) => v.key === "a"),
      second,
    );
    list.remove(second);
    assert.equal(list.findLast((v) => v.key === "a")?.value.n, 1);
    assert.equal(
      list.findLast((v) => v.key === "c"),
      undefined,
    );
  });

  it("hands out snapshots: removing while iterating one skips nothing", () => {
    const list = new LinkedList<number>();
    const entries = [1, 2, 3, 4].map((n) => list.push(n));
    const seen: number[] = [];
    for (const entry of list.entries()) {
      seen.push(entry.value);
      list.remove(entry);
      if (entry.value === 1) list.remove(entries[1]!); // the next one, gone meanwhile
    }
    assert.deepEqual(seen, [1, 2, 3, 4]);
    assert.equal(list.size, 0);
  });
});

describe("InFlight", () => {
  it("tracks a promise until it settles, rejected ones too", async () => {
    const inFlight = new InFlight();
    let resolve = (_: unknown) => {};
    let reject = (_: unknown) => {};
    const ok = inFlight.add(new Promise((r) => (resolve = r)));
    const bad = inFlight.add(new Promise((_, r) => (reject = r)));
    bad.catch(() => {});
    assert.equal(inFlight.size, 2);
    resolve(1);
    await ok;
    await Promise.resolve();
    assert.equal(inFlight.size, 1);
    reject(new Error("x"));
    await bad.catch(() => {});
    await Promise.resolve();
    assert.equal(inFlight.size, 0);
  });

  it("settled() waits for those added while it waits", async () => {
    const inFlight = new InFlight();
    const order: string[] = [];
    let finishFirst = () => {};
    inFlight.add(
      new Promise<void>((r) => {
        finishFirst = r;
      }).then(() => {
        order.push("first");
        // Started by the first as it ends, as a pass run at close is.
        inFlight.add(
          new Promise<void>((r) => setTimeout(r, 5)).then(() => {
            order.push("second");
          }),
        );
      }),
    );
    const settled = inFlight.settled().then(() => order.push("settled"));
    finishFirst();
    await settled;
    assert.deepEqual(order, ["first", "second", "settled"]);
    assert.equal(inFlight.size, 0);
  });
});
