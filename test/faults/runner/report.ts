/**
 * The row's report. Interim: a plain HTML page with the verdicts and the
 * fault log, until faults-checkers' report.ts (timeline + latency) is merged.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { HistoryEvent } from "../history.js";
import type { RowOutcome } from "./run-row.js";
import type { Row } from "./types.js";

const escapeHtml = (s: string) => s.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);

export function writeReport(
  outDir: string,
  row: Row,
  outcome: RowOutcome,
  events: readonly HistoryEvent[],
): void {
  const faults = events.filter((e) => e.kind === "fault");
  const body = [
    `<h1>${escapeHtml(row.id)}: ${escapeHtml(row.title)}</h1>`,
    `<p>${outcome.status} · expected ${row.expected} · seed ${outcome.seed}</p>`,
    "<ul>",
    ...outcome.checks.map(
      (c) =>
        `<li>${c.name}: ${c.result.verdict} (expected ${c.expected})<ul>${c.result.violations.map((v) => `<li>${escapeHtml(v)}</li>`).join("")}</ul></li>`,
    ),
    ...outcome.failures.map((f) => `<li>${escapeHtml(f)}</li>`),
    "</ul><pre>",
    ...faults.map((f) => escapeHtml(JSON.stringify(f))),
    "</pre>",
  ];
  writeFileSync(
    join(outDir, "report.html"),
    `<!doctype html><meta charset="utf-8"><title>${escapeHtml(row.id)}</title>${body.join("\n")}`,
  );
}
