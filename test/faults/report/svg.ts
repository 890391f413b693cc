/** The small pieces every plot of the report needs: escaping, scales, axis ticks, colours. */

/** Escapes text for HTML and SVG, in element content and in quoted attributes alike. */
export function escapeHtml(text: string): string {
  return text
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;")
    .replaceAll("'", "&#39;");
}

/** A number for an SVG attribute: short, and never NaN or Infinity (a broken attribute hides the shape). */
export function num(value: number): string {
  return Number.isFinite(value) ? String(Math.round(value * 10) / 10) : "0";
}

/** Round tick values covering [from, to], about `count` of them (1, 2 or 5 × 10^k apart). */
export function ticks(from: number, to: number, count: number): number[] {
  const span = to - from;
  if (!(span > 0)) return [from];
  const raw = span / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw) ?? 10 * power;
  const out: number[] = [];
  for (let t = Math.ceil(from / step) * step; t <= to; t += step) out.push(t);
  return out;
}

/** Colour by outcome, as Jepsen's timeline does. */
export const outcomeColour = { ok: "#6db96d", fail: "#e06666", info: "#f0ad4e" } as const;

/** Colour by operation, for the latency plot. */
export const opColour: Record<string, string> = {
  acquire: "#1f77b4",
  release: "#2ca02c",
  extend: "#9467bd",
  use: "#8c564b",
  read: "#17becf",
  write: "#ff7f0e",
  ids: "#d62728",
};

/** Keeps at most `max` items, every one that `keep` marks and an even stride of the rest. */
export function capItems<T>(items: readonly T[], max: number, keep: (item: T) => boolean): T[] {
  if (items.length <= max) return [...items];
  const kept = items.filter(keep);
  const rest = items.filter((item) => !keep(item));
  const room = Math.max(0, max - kept.length);
  const stride = rest.length / Math.max(1, room);
  const sampled = Array.from(
    { length: Math.min(room, rest.length) },
    (_, i) => rest[Math.floor(i * stride)]!,
  );
  return [...kept, ...sampled];
}
