/**
 * The fault-matrix runner.
 *
 *   npm run faults -- --row L4 --seed 7 --duration 30s
 *   npm run faults -- --all --seeds 1,2,3 --out .faults/nightly
 *   npm run faults -- --list
 *
 * Per row: a progress line, a verdict per checker, and history.jsonl,
 * faults.jsonl, outcome.json and report.html under --out (default .faults/).
 * Exit code 0 when every row came out as expected (rows that cannot be
 * injected here are "not run" and do not fail the run), 1 when one did not,
 * 2 on a usage error.
 */
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { findRow, rows } from "./rows/index.js";
import { describeOutcome, type RowOutcome, running, runRow } from "./runner/run-row.js";
import type { Row } from "./runner/types.js";

const usage = `usage: npm run faults -- (--row ID[,ID…] | --all | --list) [--seed N | --seeds N,M…] [--duration 30s] [--ttl 300ms] [--out DIR] [--quick]`;

function duration(name: string, text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(text.trim());
  if (!match)
    throw new Error(
      `--${name}: expected a duration like 500ms, 30s or 2m, got ${JSON.stringify(text)}`,
    );
  const unit = match[2] ?? "ms";
  return Number(match[1]) * (unit === "m" ? 60_000 : unit === "s" ? 1_000 : 1);
}

async function main(): Promise<number> {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      strict: true,
      options: {
        row: { type: "string" },
        all: { type: "boolean" },
        list: { type: "boolean" },
        seed: { type: "string" },
        seeds: { type: "string" },
        duration: { type: "string" },
        ttl: { type: "string" },
        out: { type: "string" },
        quick: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    }));
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n${usage}\n`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(`${usage}\n`);
    return 0;
  }
  if (values.list) {
    for (const row of rows)
      process.stdout.write(
        `${row.id.padEnd(14)} ${row.expected.padEnd(18)} ${row.notRun ? `not run: ${row.notRun}` : row.title}\n`,
      );
    return 0;
  }
  let selected: Row[];
  let seeds: number[];
  let durationMs: number;
  let ttlMs: number;
  try {
    if (values.all) selected = [...rows];
    else if (typeof values.row === "string") {
      selected = values.row.split(",").map((id) => {
        const row =
          findRow(id) ?? rows.find((r) => r.id.split("-")[0]!.toLowerCase() === id.toLowerCase());
        if (!row) throw new Error(`--row: no row ${id} (see --list)`);
        return row;
      });
      // "--row L15" runs every variant of L15.
      selected = selected.flatMap((row) =>
        (values.row as string).split(",").some((id) => id.toLowerCase() === row.id.toLowerCase())
          ? [row]
          : rows.filter((r) => r.id.split("-")[0] === row.id.split("-")[0]),
      );
    } else throw new Error("choose --row ID or --all");
    seeds = String(values.seeds ?? values.seed ?? "1")
      .split(",")
      .map((s) => {
        const n = Number(s);
        if (!Number.isInteger(n) || n < 0)
          throw new Error(`--seed: expected a non-negative integer, got ${s}`);
        return n;
      });
    durationMs = duration("duration", String(values.duration ?? "5s"));
    ttlMs = duration("ttl", String(values.ttl ?? "300ms"));
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n${usage}\n`);
    return 2;
  }
  const outDir = resolve(String(values.out ?? ".faults"));
  const startedAt = new Date().toISOString(); // wall clock: for display only
  const outcomes: Array<{ row: Row; outcome: RowOutcome }> = [];
  let index = 0;
  const total = selected.length * seeds.length;
  for (const row of selected) {
    for (const seed of seeds) {
      index++;
      process.stdout.write(`[${index}/${total}] ${row.id} seed ${seed} …\n`);
      const outcome = await runRow(row, {
        seed,
        durationMs,
        ttlMs,
        outDir,
        quick: values.quick === true,
      });
      outcomes.push({ row, outcome });
      process.stdout.write(`${describeOutcome(row, outcome)}\n`);
    }
  }
  const ran = outcomes.filter((o) => o.outcome.status !== "not-run");
  const failed = outcomes.filter((o) => o.outcome.status === "fail");
  const summary = {
    // What ran, so that a quoted result can be traced to its code and flags.
    commit: commitOf(),
    arguments: process.argv.slice(2),
    startedAt,
    rows: new Set(outcomes.map((o) => o.row.id)).size,
    seeds: seeds.length,
    runs: ran.length,
    notRun: outcomes.length - ran.length,
    operations: ran.reduce((n, o) => n + o.outcome.operations, 0),
    faultsInjected: ran.reduce((n, o) => n + o.outcome.faults, 0),
    // Violations a checker expected clean found (0 is the goal), and negative controls a checker flagged.
    unexpectedViolations: ran.reduce(
      (n, o) =>
        n +
        o.outcome.checks
          .filter((c) => c.expected === "clean" && c.result.verdict === "violation")
          .reduce((m, c) => m + c.result.violations.length, 0),
      0,
    ),
    negativeControlsFlagged: ran.filter(
      (o) => o.row.expected === "documented-unsafe" && o.outcome.status === "pass",
    ).length,
    negativeControls: ran.filter((o) => o.row.expected === "documented-unsafe").length,
    failed: failed.map((o) => `${o.row.id} seed ${o.outcome.seed}`),
  };
  writeFileSync(join(outDir, "summary.json"), JSON.stringify(summary, null, 2));
  process.stdout.write(
    `\n${summary.rows} rows × ${summary.seeds} seeds: ${summary.runs} runs (${summary.notRun} not run), ` +
      `${summary.operations} operations, ${summary.faultsInjected} faults injected, ` +
      `${summary.unexpectedViolations} violations where a checker expected none, ` +
      `${summary.negativeControlsFlagged}/${summary.negativeControls} negative controls flagged; ` +
      `${failed.length === 0 ? "all as expected" : `NOT as expected: ${summary.failed.join(", ")}`}\n` +
      `commit ${summary.commit}, arguments: ${summary.arguments.join(" ")}, started ${startedAt}\n` +
      `output: ${outDir}\n`,
  );
  return failed.length === 0 ? 0 : 1;
}

/** The checkout's commit (short), "+ changes" if files differ from it; "unknown" without git. */
function commitOf(): string {
  const head = spawnSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" });
  if (head.status !== 0) return "unknown";
  const changes = spawnSync("git", ["status", "--porcelain", "--untracked-files=no"], {
    encoding: "utf8",
  });
  return `${head.stdout.trim()}${changes.stdout.trim() ? " + changes" : ""}`;
}

// Ctrl-C: stop every process this run started, then exit 130 (a second Ctrl-C kills at once).
let interrupted = false;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    if (interrupted) {
      for (const ctx of running) ctx.killNow();
      process.exit(130);
    }
    interrupted = true;
    process.stderr.write(`\n${signal}: stopping workloads and nodes…\n`);
    Promise.all([...running].map((ctx) => ctx.dispose())).finally(() => process.exit(130));
  });
}

process.exitCode = await main();
