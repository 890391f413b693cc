/**
 * The timeline: one lane per process, a bar per operation from invocation
 * to completion coloured by outcome, the process's holds drawn under its
 * bars, and the faults drawn over every lane — what Jepsen's timeline.html
 * shows, as one SVG.
 */

import type { LockHold } from "../checkers/holds.js";
import type { Operation } from "../checkers/operations.js";
import type { FaultWindow } from "../checkers/windows.js";
import { capItems, escapeHtml, num, outcomeColour, ticks } from "./svg.js";

export interface TimelineInput {
  readonly operations: readonly Operation[];
  readonly holds: readonly LockHold[];
  readonly faults: readonly FaultWindow[];
  readonly fromMs: number;
  readonly toMs: number;
  /** "process op N" keys of operations a violation names: outlined. */
  readonly flagged: ReadonlySet<string>;
  readonly maxOps: number;
}

const LANE = 20;
const LEFT = 110;
const TOP = 50; // room for two rows of fault labels above the time ticks

export function renderTimeline(input: TimelineInput): { svg: string; note: string } {
  const processes = [...new Set(input.operations.map((op) => op.process))].sort(naturalOrder);
  const lane = new Map(processes.map((p, i) => [p, i]));
  const spanMs = Math.max(1, input.toMs - input.fromMs);
  const widthPx = Math.min(12000, Math.max(1200, spanMs * 0.5));
  const x = (t: number) => LEFT + ((Math.min(t, input.toMs) - input.fromMs) / spanMs) * widthPx;
  const heightPx = TOP + processes.length * LANE + 10;
  const drawn = capItems(
    input.operations,
    input.maxOps,
    (op) => op.type !== "ok" || input.flagged.has(`${op.process} op ${op.opId}`),
  );
  const parts: string[] = [];
  processes.forEach((p, i) => {
    const y = TOP + i * LANE;
    if (i % 2 === 0)
      parts.push(
        `<rect x="0" y="${y}" width="${num(LEFT + widthPx)}" height="${LANE}" fill="#f6f6f6"/>`,
      );
    parts.push(`<text x="4" y="${y + 14}" class="lane">${escapeHtml(p)}</text>`);
  });
  for (const t of ticks(0, spanMs, 12)) {
    const px = x(input.fromMs + t);
    parts.push(
      `<line x1="${num(px)}" y1="${TOP - 4}" x2="${num(px)}" y2="${heightPx}" class="grid"/>`,
    );
    parts.push(
      `<text x="${num(px)}" y="${TOP - 8}" class="tick" text-anchor="middle">${escapeHtml(`${t} ms`)}</text>`,
    );
  }
  for (const hold of input.holds) {
    const y = TOP + (lane.get(hold.client) ?? 0) * LANE + 14;
    const tip = `hold of ${hold.resource} by ${hold.client}: ${hold.startMs.toFixed(3)}–${hold.endMs.toFixed(3)} ms, ended by ${hold.endedBy}`;
    parts.push(
      `<rect x="${num(x(hold.startMs))}" y="${y}" width="${num(Math.max(1, x(hold.endMs) - x(hold.startMs)))}" height="4" fill="#3b6fb6"><title>${escapeHtml(tip)}</title></rect>`,
    );
  }
  for (const op of drawn)
    parts.push(operationBar(op, TOP + (lane.get(op.process) ?? 0) * LANE, x, input.flagged));
  parts.push(...faultMarks(input.faults, x, heightPx));
  const note =
    drawn.length < input.operations.length
      ? `Showing ${drawn.length} of ${input.operations.length} operations: every fail, info and flagged one, and an even sample of the ok ones.`
      : "";
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${num(LEFT + widthPx + 20)}" height="${heightPx}">${parts.join("")}</svg>`;
  return { svg, note };
}

function operationBar(
  op: Operation,
  y: number,
  x: (t: number) => number,
  flagged: ReadonlySet<string>,
): string {
  const x0 = x(op.invokeMs);
  const x1 = x(op.completeMs);
  const open = !Number.isFinite(op.completeMs);
  const on = op.resource === undefined ? "" : ` ${op.resource}`;
  const detail = [
    JSON.stringify(op.args),
    JSON.stringify(op.result),
    op.error ? `${op.error.code}: ${op.error.message}` : "",
  ]
    .filter((s) => s !== "" && s !== "{}")
    .join(" ");
  const end = open
    ? "never completed"
    : `${op.completeMs.toFixed(3)} ms (${(op.completeMs - op.invokeMs).toFixed(3)} ms)`;
  const tip =
    `${op.process} op ${op.opId}: ${op.op}${on} ${op.type}, ${op.invokeMs.toFixed(3)} → ${end} ${detail}`.trim();
  const mark = flagged.has(`${op.process} op ${op.opId}`)
    ? ' stroke="#000" stroke-width="1.5"'
    : "";
  const dash = open ? ' stroke="#b36b00" stroke-dasharray="3,2"' : "";
  return `<rect x="${num(x0)}" y="${y + 3}" width="${num(Math.max(1.5, x1 - x0))}" height="10" fill="${outcomeColour[op.type]}"${mark}${dash}><title>${escapeHtml(tip)}</title></rect>`;
}

function faultMarks(
  faults: readonly FaultWindow[],
  x: (t: number) => number,
  heightPx: number,
): string[] {
  return faults.map((fault, i) => {
    const label = escapeHtml(fault.label ?? fault.fault);
    const tip = escapeHtml(
      `${fault.label}: ${fault.startMs.toFixed(3)}${fault.instant ? "" : `–${fault.endMs.toFixed(3)}`} ms`,
    );
    const x0 = x(fault.startMs);
    const labelY = 12 + (i % 2) * 10; // alternate rows so neighbouring labels do not collide
    const text = `<text x="${num(x0 + 2)}" y="${labelY}" class="fault">${label}</text>`;
    if (fault.instant) {
      return `<g><line x1="${num(x0)}" y1="0" x2="${num(x0)}" y2="${heightPx}" class="instant"/>${text}<title>${tip}</title></g>`;
    }
    const w = Math.max(1, x(fault.endMs) - x0);
    return `<g><rect x="${num(x0)}" y="0" width="${num(w)}" height="${heightPx}" class="fault"/>${text}<title>${tip}</title></g>`;
  });
}

/** "lock-2" before "lock-10". */
export function naturalOrder(a: string, b: string): number {
  return a.localeCompare(b, "en", { numeric: true });
}
