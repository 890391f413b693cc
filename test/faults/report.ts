/**
 * The HTML report of one fault run: each checker's verdict with its
 * violations, the timeline (operations per process, holds, faults over all
 * lanes) and the latency plot. One self-contained file: inline CSS and SVG,
 * no script, no external asset, every text escaped, so it opens offline and
 * can be attached to a failing CI run.
 */

import { writeFileSync } from "node:fs";
import { extractHolds } from "./checkers/holds.js";
import { groupBy, type Operation, pairOperations } from "./checkers/operations.js";
import { faultWindows, historySpan } from "./checkers/windows.js";
import type { CheckResult, HistoryEvent } from "./history.js";
import { renderLatency } from "./report/latency.js";
import { escapeHtml } from "./report/svg.js";
import { renderTimeline } from "./report/timeline.js";

export interface ReportInput {
  readonly title: string;
  readonly events: readonly HistoryEvent[];
  readonly results: readonly CheckResult[];
  /** Shown as a table under the title: row, seed, duration, command line… */
  readonly meta?: Readonly<Record<string, string | number>>;
  /** Operations drawn on the timeline and points on the latency plot before sampling (default 20000). */
  readonly maxOps?: number;
  /** Violations listed per checker before "… and N more" (default 100). */
  readonly maxViolations?: number;
}

export function writeReport(path: string, input: ReportInput): void {
  writeFileSync(path, renderReport(input));
}

export function renderReport(input: ReportInput): string {
  const operations = pairOperations(input.events);
  const { fromMs, toMs } = historySpan(input.events);
  const faults = faultWindows(input.events);
  const maxOps = input.maxOps ?? 20000;
  const timeline = renderTimeline({
    operations,
    holds: extractHolds(operations).holds,
    faults,
    fromMs,
    toMs,
    flagged: flaggedOperations(input.results),
    maxOps,
  });
  const latency = renderLatency(operations, faults, fromMs, toMs, maxOps);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(input.title)}</title>
<style>${STYLE}</style></head><body>
<h1>${escapeHtml(input.title)}</h1>
${metaTable(input.meta, operations, faults.length, fromMs, toMs)}
<h2>Verdicts</h2>
${verdicts(input.results, input.maxViolations ?? 100)}
<h2>Timeline</h2>
<p class="legend"><span class="ok">ok</span> <span class="fail">fail</span> <span class="info">info</span> bars run from invocation to completion (dashed: never completed); blue under a bar: a hold; shaded: a fault; outlined: named by a violation. Times are ms from the first event; hover for details.</p>
${note(timeline.note)}<div class="scroll">${timeline.svg}</div>
<h2>Latency</h2>
${latencyTable(operations)}
<p class="legend">Each completed operation at its completion time against its latency (log scale); hollow: fail or info.</p>
${note(latency.note)}<div class="scroll">${latency.svg}</div>
<h2>Faults</h2>
${faultTable(faults, fromMs)}
</body></html>
`;
}

/** Operations a violation names ("lock-2 op 7"), to outline on the timeline. */
function flaggedOperations(results: readonly CheckResult[]): Set<string> {
  const flagged = new Set<string>();
  for (const result of results) {
    for (const line of result.violations) {
      for (const match of line.matchAll(/(\S+) op (\d+)/g))
        flagged.add(`${match[1]} op ${match[2]}`);
    }
  }
  return flagged;
}

function verdicts(results: readonly CheckResult[], maxViolations: number): string {
  if (results.length === 0) return "<p>No checker ran.</p>";
  return results
    .map((result) => {
      const stats = Object.entries(result.stats)
        .map(([k, v]) => `${escapeHtml(k)}: ${escapeHtml(String(v))}`)
        .join(", ");
      const shown = result.violations
        .slice(0, maxViolations)
        .map((v) => `<li>${escapeHtml(v)}</li>`);
      const more = result.violations.length - shown.length;
      if (more > 0) shown.push(`<li>… and ${more} more</li>`);
      const list = shown.length > 0 ? `<ul>${shown.join("")}</ul>` : "";
      return `<div class="result"><span class="verdict ${escapeHtml(result.verdict)}">${escapeHtml(result.checker)}: ${escapeHtml(result.verdict)}</span> <span class="stats">${stats}</span>${list}</div>`;
    })
    .join("\n");
}

function metaTable(
  meta: ReportInput["meta"],
  operations: readonly Operation[],
  faultCount: number,
  fromMs: number,
  toMs: number,
): string {
  const counts = { ok: 0, fail: 0, info: 0 };
  for (const op of operations) counts[op.type]++;
  const rows: Array<[string, string]> = [
    ...Object.entries(meta ?? {}).map(([k, v]): [string, string] => [k, String(v)]),
    [
      "operations",
      `${operations.length} (ok ${counts.ok}, fail ${counts.fail}, info ${counts.info})`,
    ],
    ["processes", String(new Set(operations.map((op) => op.process)).size)],
    ["faults", String(faultCount)],
    ["span", `${(toMs - fromMs).toFixed(1)} ms`],
  ];
  const body = rows.map(([k, v]) => `<tr><th>${escapeHtml(k)}</th><td>${escapeHtml(v)}</td></tr>`);
  return `<table class="meta">${body.join("")}</table>`;
}

function faultTable(faults: ReturnType<typeof faultWindows>, fromMs: number): string {
  if (faults.length === 0) return "<p>No faults injected.</p>";
  const rows = faults.map((f) => {
    const end = f.instant ? "(instant)" : (f.endMs - fromMs).toFixed(1);
    const cells = [String(f.faultId), f.label ?? f.fault, (f.startMs - fromMs).toFixed(1), end];
    return `<tr>${cells.map((c) => `<td>${escapeHtml(c)}</td>`).join("")}</tr>`;
  });
  return `<table class="faults"><tr><th>id</th><th>fault</th><th>start (ms)</th><th>end (ms)</th></tr>${rows.join("")}</table>`;
}

/** Per operation: how many ended each way, and latency percentiles of the completed ones. */
function latencyTable(operations: readonly Operation[]): string {
  const byOp = groupBy(operations, (op) => op.op);
  if (byOp.size === 0) return "";
  const rows = [...byOp.entries()].sort().map(([name, ops]) => {
    const done = ops
      .filter((op) => Number.isFinite(op.completeMs))
      .map((op) => op.completeMs - op.invokeMs)
      .sort((a, b) => a - b);
    const at = (q: number) =>
      done.length === 0
        ? "–"
        : done[Math.min(done.length - 1, Math.floor(q * done.length))]!.toFixed(2);
    const count = (type: Operation["type"]) => String(ops.filter((op) => op.type === type).length);
    const cells = [name, count("ok"), count("fail"), count("info"), at(0.5), at(0.99), at(1)];
    return `<tr>${cells.map((c) => `<td>${escapeHtml(c)}</td>`).join("")}</tr>`;
  });
  const head = ["op", "ok", "fail", "info", "p50 ms", "p99 ms", "max ms"];
  return `<table class="latency"><tr>${head.map((h) => `<th>${h}</th>`).join("")}</tr>${rows.join("")}</table>`;
}

const note = (text: string) => (text === "" ? "" : `<p class="note">${escapeHtml(text)}</p>`);

const STYLE = `
body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.5em; }
table { border-collapse: collapse; } th, td { text-align: left; padding: 2px 10px 2px 0; }
.result { margin: 0.4em 0; } .result ul { margin: 0.2em 0 0.6em; font-family: monospace; font-size: 12px; }
.verdict { font-weight: bold; padding: 1px 6px; border-radius: 3px; }
.verdict.ok { background: #d4edda; } .verdict.violation { background: #f8d7da; } .verdict.unknown { background: #fff3cd; }
.stats { color: #555; font-size: 12px; }
.legend span { padding: 0 6px; } .legend .ok { background: #6db96d; } .legend .fail { background: #e06666; } .legend .info { background: #f0ad4e; }
.note { color: #8a6d3b; }
.scroll { overflow-x: auto; border: 1px solid #ddd; }
svg text { font: 11px monospace; } svg .lane { font-size: 11px; } svg .tick { fill: #666; font-size: 10px; }
svg .grid { stroke: #ddd; stroke-width: 1; }
svg rect.fault { fill: #c33; fill-opacity: 0.08; stroke: #c33; stroke-opacity: 0.4; }
svg line.instant { stroke: #c33; stroke-width: 1.5; stroke-dasharray: 4,3; }
svg text.fault { fill: #a00; font-size: 10px; }
`;
