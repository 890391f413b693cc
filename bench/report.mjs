// What both benchmarks share: latency percentiles, medians over repeated
// cells, the markdown table, and the JSON file of a run.
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { parseArgs } from "node:util";

export function percentile(sorted, p) {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** The middle value; for an even count, the mean of the two middle ones (of 2 runs: their mean, not the higher). */
export const median = (xs) => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  if (sorted.length === 0) return undefined;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

/** A number for a table; "—" for none (NaN: a per-grant figure of a cell with no grant). */
export const fmt = (n, digits = 0) =>
  Number.isFinite(n)
    ? n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : "—";

/** A call that never comes back (a library without per-node timeouts) ends as an error here. */
export function bounded(promise, ms) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/**
 * Runs `cycle` from `workers` loops for `cellMs`; returns the rate, p50/p99
 * of each cycle's latency, and how many cycles failed (each failure also
 * given to `onError`, if any).
 */
export async function measureCell(workers, cellMs, cycle, onError) {
  const latencies = [];
  let errors = 0;
  const start = performance.now();
  const end = start + cellMs;
  await Promise.all(
    Array.from({ length: workers }, async (_, worker) => {
      while (performance.now() < end) {
        const t0 = performance.now();
        try {
          await cycle(worker);
          latencies.push(performance.now() - t0);
        } catch (error) {
          errors++;
          onError?.(error);
        }
      }
    }),
  );
  const elapsedMs = performance.now() - start;
  latencies.sort((a, b) => a - b);
  return {
    perSecond: (latencies.length / elapsedMs) * 1_000,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    errors,
  };
}

/**
 * Acquire → release on `contender` from `workers` loops for `cellMs`, each
 * worker on `resourceOf(worker)`; an acquire is bounded by `acquireBoundMs`,
 * a release by 2 s. Returns the rate, the sorted acquire and release
 * latencies, grants per worker, and the errors (count, and by message).
 */
export async function lockCycles(contender, { workers, cellMs, resourceOf, acquireBoundMs }) {
  const acquireMs = [];
  const releaseMs = [];
  const grants = new Array(workers).fill(0);
  const errorKinds = new Map();
  const cell = await measureCell(
    workers,
    cellMs,
    async (worker) => {
      const t0 = performance.now();
      const handle = await bounded(contender.acquire(resourceOf(worker)), acquireBoundMs);
      const t1 = performance.now();
      await bounded(contender.release(handle), 2_000);
      acquireMs.push(t1 - t0);
      releaseMs.push(performance.now() - t1);
      grants[worker]++;
    },
    (error) => {
      const message = String(error?.message ?? error).slice(0, 200);
      errorKinds.set(message, (errorKinds.get(message) ?? 0) + 1);
    },
  );
  acquireMs.sort((a, b) => a - b);
  releaseMs.sort((a, b) => a - b);
  return {
    perSecond: cell.perSecond,
    errors: cell.errors,
    acquireMs,
    releaseMs,
    grants,
    errorKinds,
  };
}

/**
 * Summarises cells per (workload, contender), prints the table with each
 * contender's ratio to `baseline`, and writes the run's JSON file. An
 * `extra` column ({ title, of(cells) → text }) is added when given.
 */
export function report({ results, baseline, unit, setup, file, cellMs, reps, extra }) {
  const summary = results.map((r) => {
    const rates = r.cells.map((c) => c.perSecond);
    const base = results.find((o) => o.workload === r.workload && o.contender === baseline);
    return {
      workload: r.workload,
      contender: r.contender,
      perSecond: median(rates),
      min: Math.min(...rates),
      max: Math.max(...rates),
      p50Ms: median(r.cells.map((c) => c.p50Ms)),
      p99Ms: median(r.cells.map((c) => c.p99Ms)),
      errors: r.cells.reduce((n, c) => n + c.errors, 0),
      vsBaseline: median(rates) / median(base.cells.map((c) => c.perSecond)),
      ...(extra ? { [extra.title]: extra.of(r.cells) } : {}),
    };
  });
  const extraTitle = extra ? ` ${extra.title} |` : "";
  console.log(
    `\n| workload | contender | ${unit} (median, min–max) | p50 ms | p99 ms | vs ${baseline} | errors |${extraTitle}`,
  );
  console.log(`|---|---|---|---|---|---|---|${extra ? "---|" : ""}`);
  for (const s of summary) {
    console.log(
      `| ${s.workload} | ${s.contender} | ${fmt(s.perSecond)} (${fmt(s.min)}–${fmt(s.max)}) | ` +
        `${fmt(s.p50Ms, 2)} | ${fmt(s.p99Ms, 2)} | ${fmt(s.vsBaseline, 2)}× | ${s.errors} |` +
        (extra ? ` ${s[extra.title]} |` : ""),
    );
  }
  writeResults({ setup, file, cellMs, reps, summary, results });
}

/** Prints the machine line and writes the run's JSON file. */
export function writeResults({ setup, file, cellMs, reps, summary, results, warmupMs }) {
  const machine = `${cpus().length} cores (${cpus()[0]?.model ?? "unknown"}), Node ${process.version}`;
  console.log(`\n${setup}, ${reps} interleaved runs of ${cellMs / 1000} s per cell; ${machine}`);
  mkdirSync("bench/results", { recursive: true });
  const written = { machine, cellMs, ...(warmupMs === undefined ? {} : { warmupMs }), reps };
  writeFileSync(file, `${JSON.stringify({ ...written, summary, results }, null, 2)}\n`);
  console.log(`results: ${file}`);
}

/** Runs every contender on every workload, A B C then C B A, `reps` times. */
export async function interleave(workloads, contenders, reps, runCell) {
  const results = [];
  for (const workload of workloads) {
    const runs = new Map(contenders.map((name) => [name, []]));
    for (let rep = 0; rep < reps; rep++) {
      const order = rep % 2 === 0 ? contenders : [...contenders].reverse();
      for (const name of order) runs.get(name).push(await runCell(name, workload, rep));
    }
    for (const [contender, cells] of runs)
      results.push({ workload: workload.name, contender, cells });
  }
  return results;
}

const benchUsage =
  "options: --seconds N (per cell, default 2), --reps N (interleaved repetitions, default 3), " +
  "--workload TEXT (only the workloads whose name contains TEXT), --json FILE (write the results)";

/**
 * The options every benchmark takes: --seconds per cell, --reps, --json
 * FILE, and --workload TEXT (only the workloads whose name contains TEXT).
 */
export function benchArgs() {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        seconds: { type: "string", default: "2" },
        reps: { type: "string", default: "3" },
        json: { type: "string" },
        workload: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    }));
  } catch (error) {
    console.error(`${error.message}\n${benchUsage}`);
    process.exit(2);
  }
  if (values.help) {
    console.log(benchUsage);
    process.exit(0);
  }
  return {
    cellMs: Number(values.seconds) * 1_000,
    reps: Number(values.reps),
    json: values.json,
    pick: (workloads) =>
      workloads.filter((w) => !values.workload || w.name.includes(values.workload)),
  };
}
