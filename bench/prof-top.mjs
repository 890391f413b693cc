// Summarises the newest .cpuprofile in a folder: self time of the top
// functions and per file (`node bench/prof-top.mjs prof`).
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const dir = process.argv[2] ?? "prof";
const newest = readdirSync(dir)
  .filter((f) => f.endsWith(".cpuprofile"))
  .sort()
  .pop();
if (!newest) throw new Error(`no .cpuprofile in ${dir}`);
const profile = JSON.parse(readFileSync(join(dir, newest), "utf8"));
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const self = new Map();
let total = 0;
profile.samples.forEach((id, i) => {
  const { functionName, url, lineNumber } = byId.get(id).callFrame;
  const file = url.split("/").slice(-2).join("/");
  const key = `${functionName || "(anonymous)"} ${file}:${lineNumber}`;
  self.set(key, (self.get(key) ?? 0) + profile.timeDeltas[i]);
  total += profile.timeDeltas[i];
});
const byFile = new Map();
for (const [key, us] of self) {
  const file = key.split(" ")[1]?.split(":")[0] || "(native)";
  byFile.set(file, (byFile.get(file) ?? 0) + us);
}
const show = (entries, n) =>
  [...entries]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, us]) => `${((us / total) * 100).toFixed(1).padStart(5)}%  ${k}`)
    .join("\n");
console.log(
  `${newest}: ${(total / 1000).toFixed(0)} ms sampled\n${show(self, 20)}\n--- by file\n${show(byFile, 10)}`,
);
