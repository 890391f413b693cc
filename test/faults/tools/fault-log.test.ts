import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { HistoryWriter, readHistory } from "../history.js";
import { FaultLog } from "./fault-log.js";

describe("FaultLog", () => {
  it("writes numbered start/end events a history reader reads back, ends once", () => {
    const dir = mkdtempSync(join(tmpdir(), "fault-log-"));
    try {
      const path = join(dir, "history.jsonl");
      const log = new FaultLog(new HistoryWriter(path));
      const end = log.start({ fault: "blackhole", target: "lock-1→node-2" });
      log.instant({ fault: "kill", target: "node-3", detail: "acquire in flight" });
      end();
      end();
      const events = readHistory(path);
      assert.deepEqual(
        events.map((e) => e.kind === "fault" && [e.faultId, e.phase, e.fault, e.target]),
        [
          [1, "start", "blackhole", "lock-1→node-2"],
          [2, "start", "kill", "node-3"],
          [1, "end", "blackhole", "lock-1→node-2"],
        ],
      );
      assert.deepEqual(log.events, events);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
