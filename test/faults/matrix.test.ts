/**
 * The fault matrix in CI: every row of FAULTS.md in its short scripted
 * form (TTL 300 ms, loops of 1 s, a fixed seed, rolling restarts over a majority). Safe rows must come out
 * clean; negative controls must be flagged. A failing row leaves its
 * history, fault log and report under .faults/ci/ and names the path.
 * Long randomized runs: `npm run faults -- --all --seeds 1,2,3 --duration 30s`.
 */
import assert from "node:assert/strict";
import { resolve } from "node:path";
import { describe, it } from "node:test";
import { rows } from "./rows/index.js";
import { describeOutcome, runRow } from "./runner/run-row.js";

const seed = Number(process.env.REDQUORUM_SEED ?? 1);
const outDir = resolve(".faults/ci");

// Two rows at a time: most of a row is waiting (TTLs, quarantines, repair
// delays, process start-up), and every row has its own cluster and ports.
describe("fault matrix (FAULTS.md, short scripted runs)", { concurrency: 2 }, () => {
  for (const row of rows) {
    const skip = row.notRun ? `not run: ${row.notRun}` : false;
    it(`${row.id} (${row.expected}): ${row.title}`, { skip }, async () => {
      const outcome = await runRow(row, {
        seed,
        durationMs: 1_000,
        ttlMs: 300,
        outDir,
        quick: true,
      });
      assert.equal(outcome.status, "pass", describeOutcome(row, outcome));
    });
  }
});
