/**
 * The latency plot: each completed operation at (completion time, latency),
 * coloured by operation, hollow when it did not complete ok, on a log scale
 * so a 1 ms acquire and a 2 s timeout fit one chart; faults shaded behind.
 */

import type { Operation } from "../checkers/operations.js";
import type { FaultWindow } from "../checkers/windows.js";
import { capItems, escapeHtml, num, opColour, ticks } from "./svg.js";

const LEFT = 60;
const TOP = 10;
const HEIGHT = 320;
const WIDTH = 1100;

export function renderLatency(
  operations: readonly Operation[],
  faults: readonly FaultWindow[],
  fromMs: number,
  toMs: number,
  maxPoints: number,
): { svg: string; note: string } {
  const completed = operations.filter((op) => Number.isFinite(op.completeMs));
  const points = capItems(completed, maxPoints, (op) => op.type !== "ok");
  const spanMs = Math.max(1, toMs - fromMs);
  const latencies = completed.map((op) => Math.max(0.01, op.completeMs - op.invokeMs));
  const top = Math.ceil(Math.log10(latencies.reduce((a, b) => Math.max(a, b), 1)));
  const bottom = Math.floor(Math.log10(latencies.reduce((a, b) => Math.min(a, b), 1)));
  const decades = Math.max(1, top - bottom);
  const x = (t: number) => LEFT + ((t - fromMs) / spanMs) * WIDTH;
  const y = (ms: number) =>
    TOP + HEIGHT - ((Math.log10(Math.max(0.01, ms)) - bottom) / decades) * HEIGHT;
  const parts: string[] = [];
  for (const fault of faults) {
    if (fault.instant) continue;
    parts.push(
      `<rect x="${num(x(fault.startMs))}" y="${TOP}" width="${num(Math.max(1, x(fault.endMs) - x(fault.startMs)))}" height="${HEIGHT}" class="fault"><title>${escapeHtml(fault.label ?? fault.fault)}</title></rect>`,
    );
  }
  for (let d = bottom; d <= top; d++) {
    const py = y(10 ** d);
    parts.push(
      `<line x1="${LEFT}" y1="${num(py)}" x2="${LEFT + WIDTH}" y2="${num(py)}" class="grid"/>`,
    );
    parts.push(
      `<text x="${LEFT - 6}" y="${num(py + 4)}" class="tick" text-anchor="end">${escapeHtml(`${10 ** d} ms`)}</text>`,
    );
  }
  for (const t of ticks(0, spanMs, 10)) {
    parts.push(
      `<text x="${num(x(fromMs + t))}" y="${TOP + HEIGHT + 16}" class="tick" text-anchor="middle">${escapeHtml(`${t} ms`)}</text>`,
    );
  }
  for (const op of points) {
    const colour = opColour[op.op] ?? "#333";
    const fill = op.type === "ok" ? `fill="${colour}"` : `fill="none" stroke="${colour}"`;
    const tip = `${op.process} op ${op.opId}: ${op.op} ${op.type} ${(op.completeMs - op.invokeMs).toFixed(3)} ms at ${op.completeMs.toFixed(3)} ms`;
    parts.push(
      `<circle cx="${num(x(op.completeMs))}" cy="${num(y(op.completeMs - op.invokeMs))}" r="2.5" ${fill}><title>${escapeHtml(tip)}</title></circle>`,
    );
  }
  parts.push(...legend([...new Set(completed.map((op) => op.op))].sort()));
  const note =
    points.length < completed.length
      ? `Showing ${points.length} of ${completed.length} completed operations: every fail and info one, and an even sample of the ok ones.`
      : "";
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${LEFT + WIDTH + 20}" height="${TOP + HEIGHT + 48}">${parts.join("")}</svg>`;
  return { svg, note };
}

/** One coloured dot and name per operation present, under the plot. */
function legend(names: readonly string[]): string[] {
  return names.flatMap((name, i) => {
    const lx = LEFT + i * 90;
    return [
      `<circle cx="${lx}" cy="${TOP + HEIGHT + 32}" r="4" fill="${opColour[name] ?? "#333"}"/>`,
      `<text x="${lx + 8}" y="${TOP + HEIGHT + 36}" class="tick">${escapeHtml(name)}</text>`,
    ];
  });
}
