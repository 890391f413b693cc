/**
 * The runner's own tests: every FAULTS.md row is defined, a negative
 * control that is not flagged fails its row, a row that cannot run is
 * reported "not run", and the CLI's usage errors exit 2.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { rows } from "../rows/index.js";
import { runRow } from "./run-row.js";
import type { Row } from "./types.js";

const faultsMdRows = [
  ...Array.from({ length: 27 }, (_, i) => `L${i + 1}`),
  ...Array.from({ length: 16 }, (_, i) => `I${i + 1}`),
];

describe("fault runner", () => {
  const outDir = mkdtempSync(join(tmpdir(), "redquorum-runner-test-"));
  after(() => rmSync(outDir, { recursive: true, force: true }));

  it("defines every FAULTS.md row (43), each with checks or a reason it is not run", () => {
    const numbers = new Set(rows.map((row) => row.id.split("-")[0]));
    assert.deepEqual(
      faultsMdRows.filter((id) => !numbers.has(id)),
      [],
    );
    assert.equal(new Set(rows.map((row) => row.id)).size, rows.length, "row ids are unique");
    for (const row of rows) {
      assert.ok(row.notRun || row.run, `${row.id} has neither a schedule nor a reason`);
      if (row.expected === "documented-unsafe" && !row.notRun) {
        assert.ok(
          Object.values(row.checks).includes("flagged"),
          `${row.id} is a negative control: some checker must be expected to flag it`,
        );
      }
    }
  });

  it("fails a negative control whose checker finds nothing, and reports a row that cannot run", async () => {
    const quiet: Row = {
      id: "T1",
      title: "a negative control with no violation in it",
      expected: "documented-unsafe",
      setup: { nodeCount: 1 },
      checks: { MX: "flagged" },
      async run() {},
    };
    const outcome = await runRow(quiet, { seed: 1, durationMs: 0, ttlMs: 300, outDir });
    assert.equal(outcome.status, "fail");
    assert.equal(outcome.checks[0]?.asExpected, false);
    const skipped = await runRow(
      { id: "T2", title: "cannot run here", expected: "safe", notRun: "no way", checks: {} },
      { seed: 1, durationMs: 0, ttlMs: 300, outDir },
    );
    assert.equal(skipped.status, "not-run");
    assert.equal(skipped.reason, "no way");
  });

  it("exits 2 on a usage error, naming the problem", () => {
    const run = (...args: string[]) =>
      spawnSync(process.execPath, ["--import", "tsx", "test/faults/run.ts", ...args], {
        encoding: "utf8",
        timeout: 60_000,
      });
    const unknownRow = run("--row", "L99");
    assert.equal(unknownRow.status, 2);
    assert.match(unknownRow.stderr, /no row L99/);
    const badDuration = run("--row", "L1", "--duration", "soon");
    assert.equal(badDuration.status, 2);
    assert.match(badDuration.stderr, /--duration/);
    const list = run("--list");
    assert.equal(list.status, 0);
    assert.match(list.stdout, /^I16 /m);
  });
});
