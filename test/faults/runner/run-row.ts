/**
 * Runs one row: a fresh cluster, the row's schedule, then everything
 * stopped, the histories merged, the checkers run and compared with what
 * the row expects. Writes history.jsonl, faults.jsonl, outcome.json (and
 * report.html when the report module is there) into the row's directory.
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type CheckResult, type HistoryEvent, monotonicMs, readHistory } from "../history.js";
import { writeReport } from "../report.js";
import { runChecker } from "./checks.js";
import { RowContext, type RowParams } from "./context.js";
import type { CheckerName, Expectation, Row } from "./types.js";

export interface CheckOutcome {
  readonly name: CheckerName;
  readonly expected: Expectation;
  readonly result: CheckResult;
  readonly asExpected: boolean;
}

export interface RowOutcome {
  readonly id: string;
  readonly seed: number;
  /** pass: every checker as expected (clean, or flagged for a negative control). */
  readonly status: "pass" | "fail" | "not-run";
  readonly reason?: string;
  readonly checks: readonly CheckOutcome[];
  readonly failures: readonly string[];
  readonly notes: readonly string[];
  readonly operations: number;
  readonly faults: number;
  readonly violations: number;
  readonly elapsedMs: number;
  readonly outDir: string;
}

/** The contexts running now, for Ctrl-C. */
export const running = new Set<RowContext>();

export async function runRow(
  row: Row,
  params: Omit<RowParams, "outDir"> & { outDir: string },
): Promise<RowOutcome> {
  const started = monotonicMs();
  const outDir = join(params.outDir, `${row.id}-seed${params.seed}`);
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  const base = { id: row.id, seed: params.seed, outDir, notes: [] as string[] };
  if (row.notRun || !row.run) {
    const outcome: RowOutcome = {
      ...base,
      status: "not-run",
      reason: row.notRun ?? "no schedule",
      checks: [],
      failures: [],
      operations: 0,
      faults: 0,
      violations: 0,
      elapsedMs: 0,
    };
    writeFileSync(join(outDir, "outcome.json"), JSON.stringify(outcome, null, 2));
    return outcome;
  }
  const ctx = new RowContext({ ...params, outDir }, row.setup ?? {});
  running.add(ctx);
  try {
    await ctx.start();
    await row.run(ctx);
  } catch (error) {
    ctx.failures.push(`schedule: ${(error as Error).stack ?? String(error)}`);
  } finally {
    await ctx.dispose().catch((error) => ctx.failures.push(`cleanup: ${String(error)}`));
    running.delete(ctx);
  }
  const events: HistoryEvent[] = readdirSync(outDir)
    .filter((f) => f.endsWith(".jsonl") && f !== "history.jsonl")
    .flatMap((f) => readHistory(join(outDir, f)))
    .sort((a, b) => a.timeMs - b.timeMs);
  writeFileSync(
    join(outDir, "history.jsonl"),
    events.map((e) => JSON.stringify(e)).join("\n") + (events.length ? "\n" : ""),
  );
  try {
    row.verify?.(events, ctx);
  } catch (error) {
    ctx.failures.push(`verify: ${String(error)}`);
  }
  const checks: CheckOutcome[] = Object.entries(row.checks).map(([name, expected]) => {
    const result = runChecker(name as CheckerName, events, row.checkOptions);
    const flagged = result.verdict === "violation";
    return {
      name: name as CheckerName,
      expected,
      result,
      asExpected: expected === "flagged" ? flagged : result.verdict === "ok",
    };
  });
  const operations = events.filter((e) => e.kind === "op" && e.type === "invoke").length;
  const status = ctx.failures.length === 0 && checks.every((c) => c.asExpected) ? "pass" : "fail";
  const outcome: RowOutcome = {
    ...base,
    status,
    checks,
    failures: ctx.failures,
    notes: ctx.notes,
    operations,
    faults: ctx.faultCount,
    violations: checks.reduce((n, c) => n + c.result.violations.length, 0),
    elapsedMs: monotonicMs() - started,
  };
  writeFileSync(
    join(outDir, "outcome.json"),
    JSON.stringify(outcome, (_, v) => (typeof v === "bigint" ? v.toString() : v), 2),
  );
  try {
    writeReport(join(outDir, "report.html"), {
      title: `${row.id}: ${row.title}`,
      events,
      results: checks.map((c) => c.result),
      meta: {
        row: row.id,
        expected: row.expected,
        outcome: status,
        seed: params.seed,
        "ttl (ms)": params.ttlMs,
        "duration (ms)": params.durationMs,
        ...Object.fromEntries(checks.map((c) => [`${c.name} expected`, c.expected])),
        ...(ctx.failures.length ? { "row failures": ctx.failures.join(" | ") } : {}),
        ...(ctx.notes.length ? { notes: ctx.notes.join(" | ") } : {}),
      },
    });
  } catch (error) {
    process.stderr.write(`${row.id}: report not written: ${String(error)}\n`);
  }
  return outcome;
}

/** One line per checker, and the row's own failures. */
export function describeOutcome(row: Row, outcome: RowOutcome): string {
  if (outcome.status === "not-run") return `${row.id.padEnd(14)} not run: ${outcome.reason}`;
  const lines = [
    `${row.id.padEnd(14)} ${outcome.status === "pass" ? "PASS" : "FAIL"}  ${row.expected}  ${outcome.operations} ops, ${outcome.faults} faults, ${(outcome.elapsedMs / 1000).toFixed(1)} s  — ${row.title}`,
  ];
  for (const c of outcome.checks) {
    const verdict =
      c.result.verdict === "violation"
        ? `violation (${c.result.violations.length})`
        : c.result.verdict;
    const stats = Object.entries(c.result.stats)
      .map(([k, v]) => `${k}=${v}`)
      .join(" ");
    lines.push(
      `    ${c.name}: ${verdict}, expected ${c.expected} ${c.asExpected ? "✓" : "✗"}  ${stats}`,
    );
    if (!c.asExpected || c.expected === "flagged")
      for (const v of c.result.violations.slice(0, 3)) lines.push(`      ${v}`);
  }
  for (const f of outcome.failures)
    lines.push(`    ✗ ${f.split("\n").slice(0, 4).join("\n      ")}`);
  if (outcome.status === "fail") lines.push(`    history and report: ${outcome.outDir}`);
  return lines.join("\n");
}
