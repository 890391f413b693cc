import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { HistoryBuilder } from "./checkers/history-builder.js";
import { checkIds, checkLinearizable, checkMutualExclusion } from "./checkers/index.js";
import { type Model, type SearchOp, searchLinearization } from "./checkers/wgl/search.js";

const history = () => new HistoryBuilder();
const lock = { model: "lock" } as const;

describe("searchLinearization (Wing & Gong with memoisation)", () => {
  /** A register: write(v) sets it, read(v) must see v. */
  type Input = { readonly write?: number; readonly read?: number };
  const register: Model<number, Input> = {
    init: 0,
    step: (value, input) =>
      input.write !== undefined ? input.write : input.read === value ? value : undefined,
    key: String,
  };
  const op = (
    callMs: number,
    returnMs: number,
    input: Input,
    optional = false,
  ): SearchOp<Input> => ({
    callMs,
    returnMs,
    input,
    optional,
  });
  const far = Number.POSITIVE_INFINITY;

  it("lets an indeterminate write take effect after its call when a later read needs it", () => {
    const ops = [op(0, 1, { write: 1 }), op(2, 3, { write: 2 }, true), op(10, 11, { read: 2 })];
    assert.deepEqual(searchLinearization(register, ops, far), { kind: "ok" });
  });

  it("lets an indeterminate write never take effect", () => {
    const ops = [op(0, 1, { write: 1 }), op(2, 3, { write: 2 }, true), op(10, 11, { read: 1 })];
    assert.deepEqual(searchLinearization(register, ops, far), { kind: "ok" });
  });

  it("never places an indeterminate write before its call", () => {
    const ops = [op(0, 1, { write: 1 }), op(5, 6, { read: 2 }), op(10, 11, { write: 2 }, true)];
    const outcome = searchLinearization(register, ops, far);
    assert.equal(outcome.kind, "violation");
    assert.equal(outcome.kind === "violation" && outcome.stuckAt, 1);
  });

  it("orders concurrent operations either way", () => {
    const ops = [op(0, 10, { write: 1 }), op(1, 9, { read: 0 }), op(2, 8, { read: 1 })];
    assert.deepEqual(searchLinearization(register, ops, far), { kind: "ok" });
  });

  it("says unknown when the time budget is spent", () => {
    const ops = Array.from({ length: 3000 }, (_, i) => op(0, 1, { write: i }));
    const outcome = searchLinearization(register, ops, performance.now() - 1);
    assert.equal(outcome.kind, "unknown");
  });
});

describe("checkLinearizable", () => {
  it("accepts serial holds and an info acquire, which may never have taken effect", () => {
    const events = history()
      .hold("a", "x", 0, 10)
      .acquire("c", "x", [1, 50], { type: "info" })
      .hold("b", "x", 10, 20)
      .build();
    const result = checkLinearizable(events, lock);
    assert.equal(result.verdict, "ok", result.violations.join("\n"));
  });

  it("flags overlapping holds and names the operation it could not place", () => {
    const result = checkLinearizable(
      history().hold("a", "x", 0, 10).hold("b", "x", 5, 15).build(),
      lock,
    );
    assert.equal(result.verdict, "violation");
    assert.match(result.violations[0]!, /^x: not linearizable; .* could not be placed/);
  });

  it("checks each resource on its own (P-compositionality)", () => {
    const events = history()
      .hold("a", "x", 0, 10)
      .hold("b", "y", 5, 15)
      .hold("c", "z", 3, 4)
      .build();
    const result = checkLinearizable(events, lock);
    assert.equal(result.verdict, "ok");
    assert.equal(result.stats.keys, 3);
  });

  it("flags fencing tokens that go back in hold order", () => {
    const events = history().hold("a", "x", 0, 10, 5).hold("b", "x", 11, 20, 4).build();
    assert.equal(checkLinearizable(events, lock).verdict, "violation");
  });

  it("flags IDs that break real-time order, and accepts concurrent ones in any order", () => {
    const ids = { model: "ids" } as const;
    const broken = history().ids("a", [0, 10], [5]).ids("b", [11, 20], [4]).build();
    assert.equal(checkLinearizable(broken, ids).verdict, "violation");
    const concurrent = history()
      .ids("a", [0, 10], [5, 6])
      .ids("b", [1, 9], [3])
      .ids("c", [2, 30], "info")
      .build();
    assert.equal(checkLinearizable(concurrent, ids).verdict, "ok");
  });

  it("says unknown, with the reason, for a key above the size bound", () => {
    const builder = history();
    for (let i = 0; i < 20; i++) builder.hold("a", "x", i * 10, i * 10 + 5);
    const result = checkLinearizable(builder.build(), { model: "lock", maxOps: 10 });
    assert.equal(result.verdict, "unknown");
    assert.match(result.violations[0]!, /unknown: x: 40 operations, above the bound of 10/);
  });

  it("decides a few hundred operations with many indeterminate acquires within its budget", () => {
    const builder = history();
    for (let i = 0; i < 150; i++) builder.hold(`p${i % 8}`, "x", i * 10, i * 10 + 8, i);
    for (let i = 0; i < 30; i++)
      builder.acquire(`info${i}`, "x", [i * 40, i * 40 + 5], { type: "info" });
    const result = checkLinearizable(builder.build(), {
      model: "lock",
      maxOps: 1000,
      timeBudgetMs: 5000,
    });
    assert.equal(result.verdict, "ok", result.violations.join("\n"));
  });
});

/** Serial holds with jitter: each starts at or after the previous one ends. */
const safeLockHistory = fc
  .record({
    holds: fc.array(
      fc.record({
        process: fc.integer({ min: 0, max: 3 }),
        waitMs: fc.integer({ min: 0, max: 5 }),
        invokeMs: fc.integer({ min: 0, max: 20 }),
        lengthMs: fc.integer({ min: 1, max: 20 }),
        byValidity: fc.boolean(),
      }),
      { minLength: 2, maxLength: 12 },
    ),
    infos: fc.array(fc.integer({ min: 0, max: 200 }), { maxLength: 4 }),
  })
  .map(({ holds, infos }) => {
    let t = 0;
    const spans = holds.map((h) => {
      const startMs = t + h.waitMs;
      t = startMs + h.lengthMs;
      return { ...h, startMs, endMs: t };
    });
    return { spans, infos };
  });

type Span = {
  process: number;
  invokeMs: number;
  startMs: number;
  endMs: number;
  byValidity: boolean;
};

function lockHistory(spans: readonly Span[], infos: readonly number[]) {
  const builder = history();
  spans.forEach((s, i) => {
    const process = `p${s.process}-${i}`; // one process per hold keeps each process's ops serial
    if (s.byValidity) {
      builder
        .acquire(process, "x", [s.startMs - s.invokeMs, s.startMs], {
          validUntilMs: s.endMs,
          fence: i,
        })
        .release(process, "x", [s.endMs + 30, s.endMs + 31]);
    } else {
      builder
        .acquire(process, "x", [s.startMs - s.invokeMs, s.startMs], { fence: i })
        .release(process, "x", [s.endMs, s.endMs + 1]);
    }
  });
  for (const [i, t] of infos.entries()) {
    builder.acquire(`info-${i}`, "x", [t, t + 3], { type: "info" });
  }
  return builder.build();
}

describe("MX sweep and WGL agree (property)", () => {
  it("safe lock histories pass both", () => {
    fc.assert(
      fc.property(safeLockHistory, ({ spans, infos }) => {
        const events = lockHistory(spans, infos);
        assert.equal(checkMutualExclusion(events, { fencing: true }).verdict, "ok");
        assert.equal(checkLinearizable(events, lock).verdict, "ok");
      }),
    );
  });

  it("one hold moved to overlap the one before is flagged by both", () => {
    fc.assert(
      fc.property(safeLockHistory, fc.nat(), fc.integer({ min: 1, max: 5 }), (h, pick, intoMs) => {
        const k = 1 + (pick % (h.spans.length - 1));
        const previous = h.spans[k - 1]!;
        const into = Math.min(intoMs, previous.endMs - previous.startMs);
        const shift = h.spans[k]!.startMs - (previous.endMs - into);
        const spans = h.spans.map((s, i) =>
          i === k ? { ...s, startMs: s.startMs - shift, endMs: s.endMs - shift } : s,
        );
        const events = lockHistory(spans, h.infos);
        assert.equal(checkMutualExclusion(events).verdict, "violation");
        assert.equal(checkLinearizable(events, lock).verdict, "violation");
      }),
    );
  });

  it("random small lock histories (overlapping or not, tokens in any order) get one verdict", () => {
    const span = fc.record({
      process: fc.constant(0),
      invokeMs: fc.integer({ min: 0, max: 5 }),
      startMs: fc.integer({ min: 5, max: 40 }),
      endMs: fc.integer({ min: 0, max: 15 }),
      byValidity: fc.boolean(),
    });
    fc.assert(
      fc.property(
        fc.array(span, { minLength: 1, maxLength: 6 }),
        fc.array(fc.integer({ min: 0, max: 40 }), { maxLength: 2 }),
        (raw, infos) => {
          const spans = raw.map((s) => ({ ...s, endMs: s.startMs + 1 + s.endMs }));
          const events = lockHistory(spans, infos);
          const sweep = checkMutualExclusion(events, { fencing: true }).verdict;
          assert.equal(checkLinearizable(events, lock).verdict, sweep);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("random small single-ID histories get one verdict from the ID sweep and WGL", () => {
    const call = fc.record({
      invokeMs: fc.integer({ min: 0, max: 30 }),
      lengthMs: fc.integer({ min: 0, max: 10 }),
      id: fc.integer({ min: 0, max: 8 }),
      info: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(call, { minLength: 1, maxLength: 7 }), (calls) => {
        const builder = history();
        for (const [i, c] of calls.entries()) {
          builder.ids(`c${i}`, [c.invokeMs, c.invokeMs + c.lengthMs], c.info ? "info" : [c.id]);
        }
        const events = builder.build();
        assert.equal(checkLinearizable(events, { model: "ids" }).verdict, checkIds(events).verdict);
      }),
      { numRuns: 300 },
    );
  });
});
