// ID benchmark: NextId's range strategy (one round trip, group commit,
// pipelined rounds) beside seed 2's strategy (read a majority, max + 1,
// write), on the same 5 local redis-server nodes with appendfsync always,
// interleaved (A B, B A, ...) and repeated; median with min-max.
//
//   npm run bench                   (runs the lock and the ID benchmark)
//   node bench/ids.mjs --seconds 2 --reps 3
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { parseArgs } from "node:util";
import { LocalCluster, NextId } from "../dist/index.js";

const { values: args } = parseArgs({
  options: {
    seconds: { type: "string", default: "2" },
    reps: { type: "string", default: "3" },
    json: { type: "string" },
  },
});
const cellMs = Number(args.seconds) * 1_000;
const reps = Number(args.reps);

const cluster = await LocalCluster.start({ nodeCount: 5, persistence: "aof-always" });
const init = new NextId(cluster.urls);
await init.init();
await init.close();

const workloads = [
  { name: "1 caller", instances: 1, callers: 1 },
  { name: "64 callers, 1 instance", instances: 1, callers: 64 },
  { name: "4 instances × 16 callers", instances: 4, callers: 16 },
];
const strategies = ["range", "seed"];

function percentile(sorted, p) {
  return sorted.length === 0
    ? Number.NaN
    : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function runCell(strategy, workload) {
  const generators = Array.from(
    { length: workload.instances },
    () => new NextId(cluster.urls, { strategy }),
  );
  for (const g of generators) await g.next(); // connect and check
  const latencies = [];
  let errors = 0;
  const start = performance.now();
  const end = start + cellMs;
  await Promise.all(
    generators.flatMap((ids) =>
      Array.from({ length: workload.callers }, async () => {
        while (performance.now() < end) {
          const t0 = performance.now();
          try {
            await ids.next();
            latencies.push(performance.now() - t0);
          } catch {
            errors++;
          }
        }
      }),
    ),
  );
  const elapsedMs = performance.now() - start;
  await Promise.all(generators.map((g) => g.close()));
  latencies.sort((a, b) => a - b);
  return {
    idsPerSecond: (latencies.length / elapsedMs) * 1_000,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    errors,
  };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const results = [];
try {
  for (const workload of workloads) {
    const runs = Object.fromEntries(strategies.map((s) => [s, []]));
    for (let rep = 0; rep < reps; rep++) {
      const order = rep % 2 === 0 ? strategies : [...strategies].reverse();
      for (const strategy of order) runs[strategy].push(await runCell(strategy, workload));
    }
    for (const strategy of strategies)
      results.push({ workload: workload.name, strategy, cells: runs[strategy] });
  }
} finally {
  await cluster.stop();
}

const fmt = (n, digits = 0) =>
  n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
const summary = results.map((r) => {
  const rates = r.cells.map((c) => c.idsPerSecond);
  const seed = results.find((o) => o.workload === r.workload && o.strategy === "seed");
  return {
    workload: r.workload,
    strategy: r.strategy,
    idsPerSecond: median(rates),
    min: Math.min(...rates),
    max: Math.max(...rates),
    p50Ms: median(r.cells.map((c) => c.p50Ms)),
    p99Ms: median(r.cells.map((c) => c.p99Ms)),
    errors: r.cells.reduce((n, c) => n + c.errors, 0),
    vsSeed: median(rates) / median(seed.cells.map((c) => c.idsPerSecond)),
  };
});

console.log(
  "\n| workload | strategy | IDs/s (median, min–max) | p50 ms | p99 ms | vs seed | errors |",
);
console.log("|---|---|---|---|---|---|---|");
for (const s of summary) {
  console.log(
    `| ${s.workload} | ${s.strategy} | ${fmt(s.idsPerSecond)} (${fmt(s.min)}–${fmt(s.max)}) | ` +
      `${fmt(s.p50Ms, 2)} | ${fmt(s.p99Ms, 2)} | ${fmt(s.vsSeed, 1)}× | ${s.errors} |`,
  );
}
const machine = `${cpus().length} cores (${cpus()[0]?.model ?? "unknown"}), Node ${process.version}`;
console.log(
  `\n5 local redis-server nodes (appendfsync always), ${reps} interleaved runs of ${cellMs / 1000} s per cell; ${machine}`,
);
mkdirSync("bench/results", { recursive: true });
const file =
  args.json ?? `bench/results/ids-${new Date().toISOString().replace(/[:.]/g, "-")}.json`;
writeFileSync(file, `${JSON.stringify({ machine, cellMs, reps, summary, results }, null, 2)}\n`);
console.log(`results: ${file}`);
