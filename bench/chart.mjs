// Draws the lock table of a benchmark run as an SVG bar chart: one group of
// bars per workload, one bar per contender, the rate relative to redquorum.
//
//   node bench/chart.mjs bench/results/locks-readme.json bench/results/locks-readme.svg
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [input = "bench/results/locks-readme.json", output] = process.argv.slice(2);
  drawChart(input, output);
}

export function drawChart(input, output = input.replace(/\.json$/, ".svg")) {
  const { summary } = JSON.parse(readFileSync(input, "utf8"));
  const workloads = [...new Set(summary.map((s) => s.workload))];
  const contenders = [...new Set(summary.map((s) => s.contender))];
  const colors = [
    "#d62728",
    "#ff9896",
    "#1f77b4",
    "#aec7e8",
    "#2ca02c",
    "#9467bd",
    "#7f7f7f",
    "#c7c7c7",
  ];

  const barHeight = 14;
  const groupGap = 28;
  const left = 250;
  const width = 900;
  const plotWidth = width - left - 90;
  const escapeXml = (text) => String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;");
  let y = 40;
  const parts = [];
  for (const workload of workloads) {
    const rows = summary.filter((s) => s.workload === workload);
    const top = Math.max(...rows.map((r) => r.perSecond), 1);
    parts.push(`<text x="10" y="${y}" font-weight="bold">${escapeXml(workload)}</text>`);
    y += 8;
    for (const row of rows) {
      const color = colors[contenders.indexOf(row.contender) % colors.length];
      const w = (row.perSecond / top) * plotWidth;
      parts.push(
        `<text x="${left - 8}" y="${y + barHeight - 3}" text-anchor="end">${escapeXml(row.contender)}</text>`,
        `<rect x="${left}" y="${y}" width="${w.toFixed(1)}" height="${barHeight}" fill="${color}"/>`,
        `<text x="${(left + w + 6).toFixed(1)}" y="${y + barHeight - 3}">${Math.round(row.perSecond).toLocaleString("en-US")}/s</text>`,
      );
      y += barHeight + 4;
    }
    y += groupGap;
  }
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${y}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="20" font-size="14">Lock throughput, median of interleaved runs (${escapeXml(input)})</text>
${parts.join("\n")}
</svg>
`;
  writeFileSync(output, svg);
  console.log(`chart: ${output}`);
}
