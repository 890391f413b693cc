import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { HistoryBuilder } from "./checkers/history-builder.js";
import {
  availabilityWindows,
  checkHygiene,
  checkIds,
  checkLiveness,
  checkMutualExclusion,
  checkResource,
  faultWindows,
  MalformedHistoryError,
  pairOperations,
} from "./checkers/index.js";
import type { HistoryEvent } from "./history.js";
import { validityViolations } from "./rows/history-queries.js";

const history = () => new HistoryBuilder();

describe("pairOperations", () => {
  it("names the event and process of a completion without an invocation", () => {
    const events: HistoryEvent[] = [
      { kind: "op", type: "ok", process: "lock-2", opId: 4, op: "acquire", timeMs: 5 },
    ];
    assert.throws(
      () => pairOperations(events),
      (error: Error) =>
        error instanceof MalformedHistoryError &&
        /event #1 \(lock-2 op 4 acquire ok at 5 ms\): completion without invocation/.test(
          error.message,
        ),
    );
  });

  it("refuses an opId invoked twice or completed twice", () => {
    const invoke = {
      kind: "op",
      type: "invoke",
      process: "a",
      opId: 0,
      op: "use",
      timeMs: 1,
    } as const;
    assert.throws(() => pairOperations([invoke, invoke]), /invoked twice/);
    const ok = { ...invoke, type: "ok", timeMs: 2 } as const;
    assert.throws(() => pairOperations([invoke, ok, ok]), /completed twice/);
    assert.throws(() => pairOperations([{ ...invoke, timeMs: 3 }, ok]), /before its invocation/);
  });

  it("treats an invocation without completion as info that never ends", () => {
    const [op] = pairOperations(history().use("a", "x", [1, 2], { type: "none" }).build());
    assert.equal(op!.type, "info");
    assert.equal(op!.completeMs, Number.POSITIVE_INFINITY);
  });
});

describe("checkMutualExclusion (MX)", () => {
  it("accepts serial holds, back to back, on several resources", () => {
    const events = history()
      .hold("a", "x", 0, 10)
      .hold("b", "x", 10, 20)
      .hold("c", "y", 5, 15)
      .hold("a", "x", 25, 30)
      .build();
    const result = checkMutualExclusion(events);
    assert.equal(result.verdict, "ok", result.violations.join("\n"));
    assert.equal(result.stats.holds, 4);
    assert.equal(result.stats.resources, 2);
  });

  it("flags overlapping holds, naming both processes and times", () => {
    const result = checkMutualExclusion(
      history().hold("a", "x", 0, 10).hold("b", "x", 5, 15).build(),
    );
    assert.equal(result.verdict, "violation");
    assert.equal(result.stats.overlaps, 1);
    assert.match(
      result.violations[0]!,
      /overlap on x: a op 0 held x 0\.000–10\.000 ms .* b op 0 held x 5\.000/,
    );
  });

  it("ends a hold at the validity deadline when release comes later", () => {
    const events = history()
      .acquire("a", "x", [0, 1], { validUntilMs: 10 })
      .release("a", "x", [50, 51])
      .hold("b", "x", 12, 20)
      .build();
    assert.equal(checkMutualExclusion(events).verdict, "ok");
  });

  it("moves the deadline with an extend that completed ok, not with one that failed", () => {
    const extended = history()
      .acquire("a", "x", [0, 1], { validUntilMs: 10 })
      .op("a", "extend", "x", [5, 6], {}, { value: { validUntilMs: 30 } })
      .release("a", "x", [50, 51])
      .hold("b", "x", 12, 20)
      .build();
    assert.equal(checkMutualExclusion(extended).verdict, "violation");
    const failed = history()
      .acquire("a", "x", [0, 1], { validUntilMs: 10 })
      .op("a", "extend", "x", [5, 6], {}, { type: "fail", code: "ERR_LOCK_LOST" })
      .release("a", "x", [50, 51])
      .hold("b", "x", 12, 20)
      .build();
    assert.equal(checkMutualExclusion(failed).verdict, "ok");
  });

  it("does not count an info acquire as a hold", () => {
    const events = history()
      .acquire("a", "x", [0, 5], { type: "info" })
      .hold("b", "x", 3, 20)
      .build();
    const result = checkMutualExclusion(events);
    assert.equal(result.verdict, "ok");
    assert.equal(result.stats.infoAcquires, 1);
  });

  it("makes no hold of a lock returned already expired, and counts it", () => {
    const events = history()
      .acquire("a", "x", [0, 10], { validUntilMs: 9 })
      .hold("b", "x", 10, 20)
      .build();
    const result = checkMutualExclusion(events);
    assert.equal(result.verdict, "ok");
    assert.equal(result.stats.expiredOnReturn, 1);
  });

  it("flags a use after validity that overlaps another hold (L15 without fencing)", () => {
    const events = history()
      .acquire("a", "x", [0, 1], { validUntilMs: 10 })
      .hold("b", "x", 12, 40)
      // a was paused past its validity; it wakes up and uses the resource.
      .use("a", "x", [30, 31])
      .release("a", "x", [32, 33])
      .build();
    const result = checkMutualExclusion(events);
    assert.equal(result.verdict, "violation");
    assert.equal(result.stats.staleUses, 1);
    assert.equal(result.stats.overlaps, 0);
    assert.match(
      result.violations[0]!,
      /stale use: a op 1 \(use x, ok\) .* after its hold ended at 10\.000 ms, while b op 0 held x/,
    );
  });

  it("takes a use that never completed (its process died) to happen at its invocation", () => {
    const events = history()
      .acquire("a", "x", [0, 1], { validUntilMs: 10 })
      .use("a", "x", [5, 6], { type: "none" })
      .use("c", "x", [11, 12], { type: "none" })
      .hold("b", "x", 12, 40)
      .use("d", "x", [20, 21], { type: "none" })
      .build();
    const result = checkMutualExclusion(events);
    assert.equal(result.stats.staleUses, 1, result.violations.join("\n"));
    assert.match(result.violations[0]!, /stale use: d op 0 .* without a hold, while b op 0 held x/);
  });

  it("accepts a stale use that overlaps no hold, a refused fenced write, and uses inside the hold", () => {
    const events = history()
      .acquire("a", "x", [0, 1], { validUntilMs: 10, fence: 1 })
      .use("a", "x", [2, 3])
      .hold("b", "x", 12, 20, 2)
      .use("a", "x", [25, 26])
      .write("a", "x", [15, 16], 1, { fence: 1, type: "fail", code: "STALE_FENCE" })
      .build();
    const result = checkMutualExclusion(events, { fencing: true });
    assert.equal(result.verdict, "ok", result.violations.join("\n"));
  });

  it("flags an accepted fenced write after validity while another process holds", () => {
    const events = history()
      .acquire("a", "x", [0, 1], { validUntilMs: 10, fence: 1 })
      .hold("b", "x", 12, 20, 2)
      .write("a", "x", [15, 16], 1, { fence: 1 })
      .build();
    assert.equal(checkMutualExclusion(events).verdict, "violation");
  });

  it("flags fencing tokens that do not increase in hold order", () => {
    const events = history().hold("a", "x", 0, 10, 5).hold("b", "x", 11, 20, 5).build();
    assert.equal(checkMutualExclusion(events).verdict, "ok");
    const result = checkMutualExclusion(events, { fencing: true });
    assert.equal(result.verdict, "violation");
    assert.match(
      result.violations[0]!,
      /fence order: b op 0 held x .*fence 5.* not above a op 0 held x/,
    );
  });

  it("requires a token on every hold when fencing", () => {
    const events = history().hold("a", "x", 0, 10).build();
    assert.match(
      checkMutualExclusion(events, { fencing: true }).violations[0]!,
      /no fencing token/,
    );
  });
});

describe("checkIds (ID)", () => {
  it("accepts increasing IDs with holes, concurrent calls in any order, and info calls", () => {
    const events = history()
      .ids("a", [0, 10], [1, 2])
      .ids("b", [11, 20], [7])
      .ids("c", [21, 30], [9])
      .ids("d", [22, 29], [8])
      .ids("e", [31, 40], "info")
      .ids("f", [31, 40], "none")
      .ids("g", [41, 50], [10])
      .build();
    const result = checkIds(events);
    assert.equal(result.verdict, "ok", result.violations.join("\n"));
    assert.equal(result.stats.infoCalls, 2);
    assert.equal(result.stats.ids, 6);
  });

  it("flags a duplicate", () => {
    const result = checkIds(history().ids("a", [0, 10], [5]).ids("b", [5, 15], [5]).build());
    assert.equal(result.stats.duplicates, 1);
    assert.match(result.violations[0]!, /^duplicate: ID 5/);
  });

  it("flags broken real-time order", () => {
    const result = checkIds(history().ids("a", [0, 10], [5]).ids("b", [11, 20], [4]).build());
    assert.equal(result.stats.orderViolations, 1);
    assert.match(result.violations[0]!, /b op 0 got 4 after a op 0 had returned 5/);
  });

  it("flags a call whose IDs do not increase, exactly beyond 2^53", () => {
    const big = 2n ** 53n;
    const result = checkIds(
      history()
        .ids("a", [0, 10], [big + 1n, big])
        .build(),
    );
    assert.equal(result.stats.batchOrderViolations, 1);
  });

  it("checks the IDs of each generator (resource) on their own", () => {
    const ids = (id: string) => ({ value: { ids: [id] } });
    const events = history()
      .op("a", "ids", "orders", [0, 1], { count: 1 }, ids("5"))
      .op("b", "ids", "users", [2, 3], { count: 1 }, ids("5"))
      .build();
    assert.equal(checkIds(events).verdict, "ok");
  });

  it("refuses an ID that is not a decimal string", () => {
    const events = history()
      .op("a", "ids", undefined, [0, 1], { count: 1 }, { value: { ids: [5] } })
      .build();
    assert.throws(() => checkIds(events), /a op 0 .*ids\[0\] is 5, not a decimal string/);
  });
});

describe("checkResource (RS)", () => {
  /** a, b, c each read-modify-write once under the lock, in turn. */
  const serial = () =>
    history()
      .read("a", "v", [0, 1], 0)
      .write("a", "v", [2, 3], 1, { fence: 1 })
      .read("b", "v", [10, 11], 1)
      .write("b", "v", [12, 13], 2, { fence: 2 })
      .read("c", "v", [20, 21], 2)
      .write("c", "v", [22, 23], 3, { fence: 3 });

  it("accepts serial read-modify-writes", () => {
    const result = checkResource(serial().build(), { fenced: true });
    assert.equal(result.verdict, "ok", result.violations.join("\n"));
    assert.equal(result.stats.updates, 3);
  });

  it("flags a lost update: a write from a value already overwritten", () => {
    const events = serial().read("d", "v", [5, 6], 1).write("d", "v", [30, 31], 2).build();
    const result = checkResource(events);
    assert.equal(result.verdict, "violation");
    assert.match(
      result.violations.join("\n"),
      /lost update on v: d op 1 .* from value 1 .* c op 1 .* stored 3/,
    );
  });

  it("flags two acknowledged writes computed from the same value, even concurrent ones", () => {
    const events = history()
      .read("a", "v", [0, 1], 0)
      .read("b", "v", [0, 1], 0)
      .write("a", "v", [2, 5], 1)
      .write("b", "v", [3, 6], 1)
      .build();
    assert.match(checkResource(events).violations.join("\n"), /both wrote from value 0/);
  });

  it("accepts a read of a value an indeterminate write may have stored", () => {
    const events = history()
      .read("a", "v", [0, 1], 0)
      .write("a", "v", [2, 3], 1)
      .read("b", "v", [4, 5], 1)
      .write("b", "v", [6, 100], 2, { type: "info" })
      .read("c", "v", [10, 11], 2)
      .write("c", "v", [12, 13], 3)
      .build();
    assert.equal(checkResource(events).verdict, "ok");
  });

  it("leaves writes without a token out of the fence check", () => {
    const events = serial().read("d", "v", [30, 31], 3).write("d", "v", [32, 33], 4).build();
    assert.equal(checkResource(events, { fenced: true }).verdict, "ok");
  });

  it("flags a stale-token write the fenced store accepted, and counts refused ones", () => {
    const events = serial()
      .write("z", "v", [30, 31], 9, { fence: 1, type: "fail", code: "STALE_FENCE" })
      .write("y", "v", [32, 33], 9, { fence: 2 })
      .build();
    const result = checkResource(events, { fenced: true });
    assert.equal(result.stats.staleRefused, 1);
    assert.equal(result.stats.staleAccepted, 1);
    assert.match(
      result.violations.join("\n"),
      /stale fence accepted on v: y op 0 .* fence 2 after c op 1 .* fence 3/,
    );
  });
});

describe("checkLiveness (LV)", () => {
  const acquires = (times: number[]) => {
    const builder = history();
    for (const t of times) builder.hold("a", "x", t, t + 1);
    return builder;
  };

  it("accepts an operation that succeeds at least once per window", () => {
    const events = acquires([0, 40, 80, 120]).build();
    assert.equal(checkLiveness(events, { maxGapMs: 50 }).verdict, "ok");
  });

  it("flags a gap while a majority was healthy", () => {
    const result = checkLiveness(acquires([0, 40, 150, 160]).build(), { maxGapMs: 50 });
    assert.equal(result.verdict, "violation");
    assert.match(result.violations[0]!, /no ok acquire for 110\.0 ms \(40\.000–150\.000 ms\)/);
  });

  it("derives windows from node faults: no gap counted while a majority is down", () => {
    const events = acquires([0, 40, 150, 160])
      .fault("kill", "nodes 1,2,3", 45)
      .fault("restart", "nodes 1,2,3", 140)
      .build();
    const result = checkLiveness(events, { maxGapMs: 50, nodeCount: 5 });
    assert.equal(result.verdict, "ok", result.violations.join("\n"));
    assert.equal(result.stats.unavailableWindows, 1);
  });

  it("does not count a minority down as unavailable", () => {
    const events = acquires([0, 40, 150, 160]).fault("pause", "nodes 1,2", 45, 140).build();
    assert.equal(checkLiveness(events, { maxGapMs: 50, nodeCount: 5 }).verdict, "violation");
  });

  it("flags an ok acquire while unavailable by design (L3 with 3 down, L9)", () => {
    const events = acquires([0, 100]).fault("blackhole", "nodes 3,4,5", 50, 200).build();
    const result = checkLiveness(events, { nodeCount: 5 });
    assert.match(result.violations[0]!, /acquire succeeded while unavailable by design/);
    const explicit = checkLiveness(events, { unavailableWindows: [{ startMs: 90, endMs: 110 }] });
    assert.equal(explicit.verdict, "violation");
  });

  it("counts only the named processes, e.g. the client a partition cut off (L9)", () => {
    const events = history()
      .hold("cut-off", "x", 0, 10)
      .hold("other", "x", 60, 70)
      .fault("blackhole", "client cut-off", 50, 100)
      .build();
    const unavailableWindows = faultWindows(events).filter((f) => f.fault === "blackhole");
    const only = (processes: string[]) =>
      checkLiveness(events, { processes, unavailableWindows }).verdict;
    assert.equal(only(["cut-off"]), "ok");
    assert.equal(only(["cut-off", "other"]), "violation");
  });

  it("gives the recovery time at the start of a window after a fault", () => {
    const events = acquires([0, 40, 200, 240]).fault("pause", "nodes 1,2,3", 45, 100).build();
    assert.equal(checkLiveness(events, { maxGapMs: 50, nodeCount: 5 }).verdict, "violation");
    const result = checkLiveness(events, { maxGapMs: 50, nodeCount: 5, recoveryMs: 100 });
    assert.equal(result.verdict, "ok", result.violations.join("\n"));
  });
});

describe("availabilityWindows", () => {
  it("keeps a killed node down until it restarts, and ignores latency", () => {
    const events = history()
      .fault("kill", "node-1", 10)
      .fault("latency", "nodes 2,3", 15, 50)
      .fault("pause", "node-2", 20, 30)
      .fault("restart", "node-1", 25)
      .build();
    const { healthy, majorityDown } = availabilityWindows(events, 0, 100, { nodeCount: 3 });
    assert.deepEqual(majorityDown, [{ startMs: 20, endMs: 25 }]);
    assert.deepEqual(healthy, [
      { startMs: 0, endMs: 20 },
      { startMs: 25, endMs: 100 },
    ]);
  });
});

describe("checkHygiene (HY)", () => {
  const clean = { unhandledRejections: 0, activeTimers: 0, activeSockets: 0, heapUsedBytes: 100 };

  it("accepts clean samples and documented error codes", () => {
    const events = history()
      .sample("a", 0, { ...clean, activeTimers: 3, activeSockets: 5 })
      .sample("a", 10, clean)
      .acquire("a", "x", [1, 2], { type: "fail" })
      .build();
    const result = checkHygiene(events, { allowedErrorCodes: ["ERR_QUORUM"] });
    assert.equal(result.verdict, "ok", result.violations.join("\n"));
  });

  it("flags a leaked handle at exit and an unhandled rejection", () => {
    const events = history()
      .sample("a", 0, { ...clean, unhandledRejections: 1 })
      .sample("a", 10, { ...clean, unhandledRejections: 1, activeSockets: 1 })
      .build();
    const violations = checkHygiene(events).violations.join("\n");
    assert.match(violations, /a: 1 unhandled rejection/);
    assert.match(violations, /a: 1 activeSockets left at exit/);
  });

  it("does not look for a clean exit from a client the runner killed", () => {
    const leaky = { ...clean, activeSockets: 2 };
    const events = history()
      .sample("lock-1", 0, leaky)
      .sample("lock-2", 0, leaky)
      .fault("kill", "client lock-1", 5)
      .build();
    const violations = checkHygiene(events).violations;
    assert.equal(violations.length, 1);
    assert.match(violations[0]!, /^lock-2: 2 activeSockets left at exit/);
    assert.equal(checkHygiene(events, { killed: ["lock-2"] }).verdict, "ok");
  });

  it("flags an undocumented error code", () => {
    const events = history().acquire("a", "x", [1, 2], { type: "info" }).build();
    const result = checkHygiene(events, { allowedErrorCodes: ["ERR_QUORUM"] });
    assert.match(result.violations[0]!, /undocumented error ERR_TIMEOUT/);
  });

  it("flags memory that grows over the window, not a sawtooth", () => {
    const sawtooth = history();
    const growing = history();
    for (let i = 0; i < 30; i++) {
      sawtooth.sample("a", i, { ...clean, heapUsedBytes: 100 + (i % 5) * 50 });
      growing.sample("a", i, { ...clean, heapUsedBytes: 100 + i * 10 });
    }
    const bounded = [{ key: "heapUsedBytes", growthMax: 50 }];
    assert.equal(checkHygiene(sawtooth.build(), { bounded }).verdict, "ok");
    assert.match(
      checkHygiene(growing.build(), { bounded }).violations[0]!,
      /heapUsedBytes grew by 200/,
    );
    const capped = checkHygiene(growing.build(), { bounded: [{ key: "heapUsedBytes", max: 300 }] });
    assert.match(capped.violations[0]!, /reached 390, above 300/);
  });
});

describe("validityViolations (rows' validity accounting)", () => {
  const acquireAt = (validUntilMs: number, timerTurnMs?: number) =>
    validityViolations(
      new HistoryBuilder()
        .acquire("lock-0", "r", [100, 400], { validUntilMs, timerTurnMs })
        .build(),
    );

  it("flags a lock whose validity ended before the completion's last timer turn: the library returned it expired", () => {
    assert.match(acquireAt(350, 390).join(), /lock-0: acquire returned an expired lock/);
  });

  it("does not blame the library for a validity that ended while the process was stopped after its last timer turn", () => {
    assert.deepEqual(acquireAt(350, 120), []);
  });

  it("judges a completion without a timer turn (an older history) at its record", () => {
    assert.match(acquireAt(350).join(), /expired lock/);
    assert.deepEqual(acquireAt(450), []);
  });
});
