// ID benchmark: NextId's range strategy (one round trip, group commit,
// pipelined rounds), with dense and with clock proposals, beside seed 2's
// strategy (read a majority, max + 1, write), on the same 5 local
// redis-server nodes with appendfsync always, interleaved (A B C, C B A,
// ...) and repeated; median with min-max. The "processes" workload runs
// each instance in a child process of its own.
//
//   npm run bench                   (runs the lock and the ID benchmark)
//   node bench/ids.mjs --seconds 2 --reps 3
import { Redis } from "ioredis";
import { LocalCluster, NextId } from "../dist/index.js";
import { runWorkers, startWorker } from "./processes.mjs";
import { benchArgs, fmt, interleave, measureCell, percentile, report } from "./report.mjs";

const { cellMs, reps, json, pick } = benchArgs();

const cluster = await LocalCluster.start({ nodeCount: 5, persistence: "aof-always" });
const peeks = cluster.urls.map((url) => new Redis(url));

/** The counter at `key` on the node where it is highest (0 for none). */
async function counterTop(key) {
  let top = 0n;
  for (const peek of peeks) {
    const value = await peek.get(key).catch(() => null);
    if (value && /^\d+$/.test(value) && BigInt(value) > top) top = BigInt(value);
  }
  return top;
}

const workloads = [
  { name: "1 caller", instances: 1, callers: 1 },
  { name: "64 callers, 1 instance", instances: 1, callers: 64 },
  { name: "4 instances × 16 callers", instances: 4, callers: 16 },
  // Issue 13: instances that talk to the nodes directly, one caller each,
  // as 4 or 16 processes would (each round races the others').
  { name: "4 instances × 1 caller", instances: 4, callers: 1 },
  { name: "16 instances × 1 caller", instances: 16, callers: 1 },
  // The same as 16 separate processes (each a NextId and one caller).
  { name: "16 processes × 1 caller", processes: 16 },
];

/**
 * Each contender's NextId options. Each has a counter of its own on the
 * same nodes: on a shared one, the dense cells left it wherever their holes
 * took it (ahead of the clock's microseconds, before dense proposals chased
 * only clock-driven counters), and the clock cells after them proposed as
 * dense ones do until the clock caught up.
 */
const contenders = {
  range: { strategy: "range", key: "bench:id:dense" },
  // Proposals at least the wall clock in microseconds (IdProposals).
  "range, clock proposals": { strategy: "range", proposals: "clock", key: "bench:id:clock" },
  seed: { strategy: "seed", key: "bench:id:seed" },
};
// One ID each first, so that a clock counter's jump to the clock's scale
// is not counted in the first cell's "counter moved per ID".
for (const options of Object.values(contenders)) {
  const init = new NextId(cluster.urls, options);
  await init.init();
  await init.next();
  await init.close();
}

try {
  const results = await interleave(
    pick(workloads),
    Object.keys(contenders),
    reps,
    (contender, workload) =>
      workload.processes
        ? processCell(contenders[contender], workload)
        : instanceCell(contenders[contender], workload),
  );
  report({
    results,
    baseline: "seed",
    unit: "IDs/s",
    setup: "5 local redis-server nodes (appendfsync always)",
    file: json ?? `bench/results/ids-${new Date().toISOString().replace(/[:.]/g, "-")}.json`,
    cellMs,
    reps,
    extra: {
      // How far the counter moved per ID handed out (warm-up calls
      // included): 1 when there are no holes.
      title: "rounds won / sent; counter moved per ID",
      of: (cells) => {
        const won = cells.reduce((n, c) => n + c.roundsWon, 0);
        const sent = won + cells.reduce((n, c) => n + c.roundsLost, 0);
        const rounds = sent === 0 ? "—" : `${fmt((100 * won) / sent)} %`;
        const moved = cells.reduce((n, c) => n + c.moved, 0);
        const ids = cells.reduce((n, c) => n + c.ids, 0);
        return `${rounds}; ${ids === 0 ? "—" : fmt(moved / ids)}`;
      },
    },
  });
} finally {
  for (const peek of peeks) peek.disconnect();
  await cluster.stop();
}

/** Instances in this process, each with `callers` callers. */
async function instanceCell(options, workload) {
  // Proposal rounds won and lost (the range strategy reports them), to
  // show why independent instances do not scale: see bench/results/ids.md.
  const rounds = { won: 0, lost: 0, counting: false };
  const onEvent = (event) => {
    if (event.type === "id-round" && rounds.counting) rounds[event.outcome]++;
  };
  const before = await counterTop(options.key);
  const generators = Array.from(
    { length: workload.instances },
    () => new NextId(cluster.urls, { ...options, onEvent }),
  );
  for (const g of generators) await g.next(); // connect and check
  let ids = generators.length;
  rounds.counting = true;
  // Caller w belongs to instance w % instances.
  const cell = await measureCell(workload.instances * workload.callers, cellMs, async (w) => {
    await generators[w % workload.instances].next();
    ids++;
  });
  rounds.counting = false;
  await Promise.all(generators.map((g) => g.close()));
  const moved = Number((await counterTop(options.key)) - before);
  return { ...cell, roundsWon: rounds.won, roundsLost: rounds.lost, moved, ids };
}

/** `processes` child processes, each one NextId with one caller. */
async function processCell(options, workload) {
  const before = await counterTop(options.key);
  const workers = Array.from({ length: workload.processes }, () =>
    startWorker("ids-worker.mjs", { urls: cluster.urls, options }),
  );
  const { results, elapsedMs } = await runWorkers(workers, cellMs);
  const moved = Number((await counterTop(options.key)) - before);
  const latencies = results.flatMap((r) => r.latencies).sort((a, b) => a - b);
  const sum = (key) => results.reduce((n, r) => n + r[key], 0);
  return {
    perSecond: (latencies.length / elapsedMs) * 1_000,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    errors: sum("errors"),
    roundsWon: sum("roundsWon"),
    roundsLost: sum("roundsLost"),
    moved,
    // Each worker's 3 warm-up calls besides the ones it timed.
    ids: latencies.length + 3 * workload.processes,
  };
}
