// Lock benchmark: acquire + release cycles of redquorum (fencing on and
// off) beside node-redlock
// v5 on the same 5 local redis-server nodes, in the same run, interleaved
// (A B, B A, ...) and repeated, reporting the median with min-max.
//
//   npm run bench                  (builds first)
//   node bench/locks.mjs --seconds 2 --reps 3
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { parseArgs } from "node:util";
import { Redis } from "ioredis";
import NodeRedlock from "redlock";
import { LocalCluster, Redlock } from "../dist/index.js";

const { values: args } = parseArgs({
  options: {
    seconds: { type: "string", default: "2" },
    reps: { type: "string", default: "3" },
    json: { type: "string" },
  },
});
const cellMs = Number(args.seconds) * 1_000;
const reps = Number(args.reps);
const ttlMs = 10_000;

const cluster = await LocalCluster.start({ nodeCount: 5, persistence: "none" });
{
  // Mark the new nodes, so redquorum's first acquire is not quarantined.
  const redlock = new Redlock(cluster.urls);
  await redlock.init();
  await redlock.close();
}

/** Each contender: setup returns { cycle(resource), close() }. */
const contenders = {
  redquorum: async () => {
    const redlock = new Redlock(cluster.urls, { retry: { retries: 0 } });
    return {
      cycle: async (resource) => {
        const lock = await redlock.acquire([resource], ttlMs);
        await lock.release();
      },
      close: () => redlock.close(),
    };
  },
  "redquorum, fencing off": async () => {
    const redlock = new Redlock(cluster.urls, { retry: { retries: 0 }, fencing: false });
    return {
      cycle: async (resource) => {
        const lock = await redlock.acquire([resource], ttlMs);
        await lock.release();
      },
      close: () => redlock.close(),
    };
  },
  "node-redlock 5.0.0-beta.2": async () => {
    const clients = cluster.urls.map((url) => new Redis(url));
    const redlock = new NodeRedlock(clients, { retryCount: 0, driftFactor: 0.01 });
    redlock.on("error", () => {});
    return {
      cycle: async (resource) => {
        const lock = await redlock.acquire([resource], ttlMs);
        await lock.release();
      },
      close: async () => {
        for (const client of clients) client.disconnect();
      },
    };
  },
};

const workloads = [
  { name: "uncontended, 1 worker", workers: 1 },
  { name: "uncontended, 64 workers", workers: 64 },
];

function percentile(sorted, p) {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function runCell(setup, workers, label) {
  const contender = await setup();
  // Warm up: connections, script cache, JIT.
  for (let i = 0; i < 20; i++) await contender.cycle(`warm:${label}`);
  const latencies = [];
  let errors = 0;
  const start = performance.now();
  const end = start + cellMs;
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      const resource = `bench:${label}:${w}`;
      while (performance.now() < end) {
        const t0 = performance.now();
        try {
          await contender.cycle(resource);
          latencies.push(performance.now() - t0);
        } catch {
          errors++;
        }
      }
    }),
  );
  const elapsedMs = performance.now() - start;
  await contender.close();
  latencies.sort((a, b) => a - b);
  return {
    cyclesPerSecond: (latencies.length / elapsedMs) * 1_000,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    errors,
  };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const results = [];
try {
  for (const workload of workloads) {
    const runs = Object.fromEntries(Object.keys(contenders).map((name) => [name, []]));
    for (let rep = 0; rep < reps; rep++) {
      // A B C, C B A, ...: none always runs first.
      const order = Object.entries(contenders);
      if (rep % 2 === 1) order.reverse();
      for (const [name, setup] of order) {
        runs[name].push(await runCell(setup, workload.workers, `${rep}:${name.split(" ")[0]}`));
      }
    }
    for (const [name, cells] of Object.entries(runs)) {
      results.push({ workload: workload.name, contender: name, cells });
    }
  }
} finally {
  await cluster.stop();
}

const fmt = (n, digits = 0) =>
  n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
const summary = results.map((r) => {
  const cps = r.cells.map((c) => c.cyclesPerSecond);
  const ours = results.find((o) => o.workload === r.workload && o.contender === "redquorum");
  return {
    workload: r.workload,
    contender: r.contender,
    cyclesPerSecond: median(cps),
    min: Math.min(...cps),
    max: Math.max(...cps),
    p50Ms: median(r.cells.map((c) => c.p50Ms)),
    p99Ms: median(r.cells.map((c) => c.p99Ms)),
    errors: r.cells.reduce((n, c) => n + c.errors, 0),
    vsRedquorum: median(cps) / median(ours.cells.map((c) => c.cyclesPerSecond)),
  };
});

const header =
  "| workload | contender | cycles/s (median, min–max) | p50 ms | p99 ms | vs redquorum | errors |";
console.log(`\n${header}\n|---|---|---|---|---|---|---|`);
for (const s of summary) {
  console.log(
    `| ${s.workload} | ${s.contender} | ${fmt(s.cyclesPerSecond)} (${fmt(s.min)}–${fmt(s.max)}) | ` +
      `${fmt(s.p50Ms, 2)} | ${fmt(s.p99Ms, 2)} | ${fmt(s.vsRedquorum, 2)}× | ${s.errors} |`,
  );
}
const machine = `${cpus().length} cores (${cpus()[0]?.model ?? "unknown"}), Node ${process.version}`;
console.log(
  `\n5 local redis-server nodes, ${reps} interleaved runs of ${cellMs / 1000} s per cell; ${machine}`,
);

mkdirSync("bench/results", { recursive: true });
const file =
  args.json ?? `bench/results/locks-${new Date().toISOString().replace(/[:.]/g, "-")}.json`;
writeFileSync(file, `${JSON.stringify({ machine, cellMs, reps, summary, results }, null, 2)}\n`);
console.log(`results: ${file}`);
