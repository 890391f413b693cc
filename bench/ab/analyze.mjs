// Summarises run-ab.sh's runs: per cell, medians before and after, paired ratios.
import { readdirSync, readFileSync } from "node:fs";

const dir = process.argv[2];
const runs = { before: {}, after: {} };
for (const f of readdirSync(dir)) {
  const [v, r] = f.replace(".json", "").split("-");
  runs[v][r] = JSON.parse(readFileSync(`${dir}/${f}`, "utf8"));
}
const reps = Object.keys(runs.before)
  .filter((r) => runs.after[r])
  .sort((a, b) => a - b);
const med = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
};
const f0 = (x) => Math.round(x).toString();
console.log(
  `pairs: ${reps.length}; loads before: ${reps.map((r) => runs.before[r].load.toFixed(1)).join(",")}; after: ${reps.map((r) => runs.after[r].load.toFixed(1)).join(",")}`,
);
console.log(
  "cell | before med (min–max) | after med (min–max) | ratio of medians | paired ratios med (min–max) | pairs after>before | p50 ms b/a | p99 ms b/a | errors b/a",
);
for (const cell of Object.keys(runs.before[reps[0]].cells)) {
  const b = reps.map((r) => runs.before[r].cells[cell]);
  const a = reps.map((r) => runs.after[r].cells[cell]);
  const br = b.map((c) => c.perSecond),
    ar = a.map((c) => c.perSecond);
  const pr = reps.map((_, i) => ar[i] / br[i]);
  const wins = pr.filter((x) => x > 1).length;
  console.log(
    `${cell} | ${f0(med(br))} (${f0(Math.min(...br))}–${f0(Math.max(...br))}) | ${f0(med(ar))} (${f0(Math.min(...ar))}–${f0(Math.max(...ar))}) | ${(med(ar) / med(br)).toFixed(2)} | ${med(pr).toFixed(2)} (${Math.min(...pr).toFixed(2)}–${Math.max(...pr).toFixed(2)}) | ${wins}/${pr.length} | ${med(b.map((c) => c.p50Ms)).toFixed(2)}/${med(a.map((c) => c.p50Ms)).toFixed(2)} | ${med(b.map((c) => c.p99Ms)).toFixed(1)}/${med(a.map((c) => c.p99Ms)).toFixed(1)} | ${b.reduce((s, c) => s + c.errors, 0)}/${a.reduce((s, c) => s + c.errors, 0)}`,
  );
}
