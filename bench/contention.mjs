// Cross-process contention: many independent clients, each with its own
// connections, waiting for ONE lock — the case a distributed lock exists
// for. Every contender lives in a child process (`--procs` of them, the
// contenders spread evenly; `--procs 64` puts each in a process of its
// own); redquorum, node-redlock and the floors (bare, fair: a fixed ring;
// queue: a queue on every node, bench/queue-floor.mjs; handover: that queue
// with the release handing the key over, bench/handover-floor.mjs) run in the same run
// on the same 5 local redis-server nodes (no persistence), interleaved
// (A B C …, … C B A) and repeated, each cell on a fresh resource.
//
// Per cell: grants/s, acquire p50/p99 (beside a bound on it: 10 ×
// the same library's p99 alone, from the 1-contender cell, × the
// contenders ahead), grants per contender (min–max) and Jain's index,
// Redis commands per grant (INFO commandstats on every node, before and
// after; in all, and by command in a second table), the CPU time a grant
// costs the contenders' processes and the nodes, and mutual exclusion
// checked across processes from every hold's CLOCK_MONOTONIC interval.
//
// Each cell's processes are fresh: they run the workload for `--warmup`
// seconds (6 by default) before it is counted, since a fresh process spends
// its first seconds in V8's compiler (every library's rate about doubles
// over them; redquorum may still be climbing after 6 s: bench/warmup.mjs).
// node-redlock with its own retries wedges until its keys' TTL (10 s)
// frees them: after a warm-up its counted window may hold no grant at all
// (its per-grant columns then read "—").
//
//   npm run bench -- contention
//   node bench/contention.mjs --seconds 5 --reps 3 [--warmup 6] [--procs 8] [--only 64x10] [--libraries "redquorum;floor"]
import { cpus } from "node:os";
import { parseArgs } from "node:util";
import { Redis } from "ioredis";
import { LocalCluster, Redlock } from "../dist/index.js";
import { runWorkers, startContenders } from "./processes.mjs";
import { fmt, median, percentile, writeResults } from "./report.mjs";

const { values: args } = parseArgs({
  options: {
    seconds: { type: "string", default: "5" },
    // Each cell's fresh processes run the workload this long before it is
    // counted: their first seconds are the JIT compiling it (bench/warmup.mjs).
    warmup: { type: "string", default: "6" },
    reps: { type: "string", default: "3" },
    procs: { type: "string", default: "8" },
    hold: { type: "string", default: "0" },
    only: { type: "string" },
    libraries: { type: "string" },
    json: { type: "string" },
  },
});
const cellMs = Number(args.seconds) * 1_000;
const warmupMs = Number(args.warmup) * 1_000;
// setTimeout fires at once beyond 2^31 - 1 ms: such a warm-up would not happen.
if (!(Number.isFinite(warmupMs) && warmupMs >= 0 && warmupMs <= 2 ** 31 - 1)) {
  throw new Error(`--warmup ${args.warmup}: seconds, from 0 to 2147483`);
}
if (!(Number.isFinite(cellMs) && cellMs > 0 && cellMs <= 2 ** 31 - 1)) {
  throw new Error(`--seconds ${args.seconds}: seconds, more than 0 and at most 2147483`);
}
const reps = Number(args.reps);
const holdMs = Number(args.hold);
const ttlMs = 10_000;

const known = [
  "redquorum",
  "redquorum, fencing off",
  "redquorum, turnMs 0",
  "redquorum, turnMs 5",
  "redquorum, turnMs 10",
  "node-redlock 5.0.0-beta.2",
  "node-redlock, caller retries",
  "floor",
  "fair floor",
  "queue floor",
  "handover floor",
];
// --libraries takes names separated by ";" (a name may hold a comma).
// Also "redquorum, turnMs N" when named: redquorum with another turn.
const libraries = args.libraries?.split(";").map((name) => name.trim()) ?? known;
for (const name of libraries) {
  if (!known.includes(name) && !/^redquorum, turnMs \d+$/.test(name)) {
    throw new Error(`--libraries: unknown ${JSON.stringify(name)}; known: ${known.join("; ")}`);
  }
}
const allWorkloads = [
  // One contender alone: its acquire p99 is the unit of the wait bound below.
  { key: "1x10", contenders: 1, pacing: { delayMs: 10, jitterMs: 5 } },
  { key: "2x10", contenders: 2, pacing: { delayMs: 10, jitterMs: 5 } },
  { key: "8x10", contenders: 8, pacing: { delayMs: 10, jitterMs: 5 } },
  { key: "8x200", contenders: 8, pacing: { delayMs: 200, jitterMs: 100 } },
  { key: "64x10", contenders: 64, pacing: { delayMs: 10, jitterMs: 5 } },
  { key: "64x200", contenders: 64, pacing: { delayMs: 200, jitterMs: 100 } },
];
const workloads = args.only
  ? allWorkloads.filter((w) => args.only.split(",").includes(w.key))
  : allWorkloads;

/** Jain's fairness index: 1 when every contender got the same number of grants. */
const jain = (xs) => {
  const sum = xs.reduce((a, b) => a + b, 0);
  const squares = xs.reduce((a, b) => a + b * b, 0);
  return squares === 0 ? 0 : (sum * sum) / (xs.length * squares);
};

/**
 * Commands run on every node so far (INFO commandstats, which counts the
 * commands a script runs too): all of them, the script calls (EVAL,
 * EVALSHA: one per node per round of a script-based library) and PUBLISH
 * (release notices).
 */
async function commandsRun(urls) {
  const counts = { total: 0, scripts: 0, publishes: 0, cpuUs: 0, byName: {} };
  // Every node at once: after a warm-up the workload runs on while they
  // are read, and one after another took 25-30 ms.
  const infos = await Promise.all(
    urls.map(async (url) => {
      const client = new Redis(url);
      try {
        // The node's own CPU time (user + system, INFO cpu), for the CPU a grant costs.
        return await Promise.all([client.info("commandstats"), client.info("cpu")]);
      } finally {
        client.disconnect();
      }
    }),
  );
  for (const [text, cpu] of infos) {
    for (const [, seconds] of cpu.matchAll(/used_cpu_(?:sys|user):([\d.]+)/g)) {
      counts.cpuUs += Number(seconds) * 1e6;
    }
    for (const [, name, calls] of text.matchAll(/cmdstat_(\w+):calls=(\d+)/g)) {
      counts.total += Number(calls);
      counts.byName[name] = (counts.byName[name] ?? 0) + Number(calls);
      if (name === "eval" || name === "evalsha") counts.scripts += Number(calls);
      if (name === "publish") counts.publishes += Number(calls);
    }
  }
  return counts;
}

/** Holds that overlap another, across every process: a sweep over all intervals. */
function overlapsOf(holds) {
  const sorted = holds
    .map(([start, end, instance, pid]) => ({
      start: BigInt(start),
      end: BigInt(end),
      who: `${pid}/${instance}`,
    }))
    .sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  let overlaps = 0;
  let latestEnd = -1n;
  for (const hold of sorted) {
    if (hold.start < latestEnd) overlaps++;
    if (hold.end > latestEnd) latestEnd = hold.end;
  }
  return overlaps;
}

async function runCell(cluster, library, workload, rep) {
  const procs = Math.min(Number(args.procs), workload.contenders);
  const resource = `contention:${workload.key}:${rep}:${library}`;
  const workers = startContenders(
    { library, urls: cluster.urls, resource, ttlMs, pacing: workload.pacing, holdMs },
    workload.contenders,
    procs,
  );
  // Commands are counted up to "stop": the drain that follows serves no counted grant.
  const {
    results,
    elapsedMs,
    before: commandsBefore,
    after: commandsAfter,
  } = await runWorkers(
    workers,
    cellMs,
    {
      before: () => commandsRun(cluster.urls),
      after: () => commandsRun(cluster.urls),
    },
    warmupMs,
  );
  const grants = results.flatMap((r) => r.grants);
  const acquireMs = results.flatMap((r) => r.acquireMs).sort((a, b) => a - b);
  const holds = results.flatMap((r) => r.holds.map((h) => [...h, r.pid]));
  const total = grants.reduce((a, b) => a + b, 0);
  const errorKinds = {};
  for (const r of results) {
    for (const [k, v] of Object.entries(r.errorKinds)) errorKinds[k] = (errorKinds[k] ?? 0) + v;
  }
  return {
    perSecond: (total / elapsedMs) * 1_000,
    acquireP50Ms: percentile(acquireMs, 50),
    acquireP99Ms: percentile(acquireMs, 99),
    grantsMin: Math.min(...grants),
    grantsMax: Math.max(...grants),
    jain: jain(grants),
    // The info calls themselves (5 before, 5 after) are left in: 10 of thousands.
    commandsPerGrant:
      total === 0 ? Number.NaN : (commandsAfter.total - commandsBefore.total) / total,
    scriptsPerGrant:
      total === 0 ? Number.NaN : (commandsAfter.scripts - commandsBefore.scripts) / total,
    publishesPerGrant:
      total === 0 ? Number.NaN : (commandsAfter.publishes - commandsBefore.publishes) / total,
    // Which commands, per grant (INFO and the like of the counting included).
    commandsByName: Object.fromEntries(
      Object.entries(commandsAfter.byName)
        .map(([name, after]) => [name, (after - (commandsBefore.byName[name] ?? 0)) / total])
        .filter(([, perGrant]) => total > 0 && perGrant > 0),
    ),
    // Both sides of a grant's CPU: the contenders' processes (from "go" to
    // "stop") and the five redis-servers. On a machine whose cores they all
    // share, grants/s is about the cores over the sum.
    clientCpuUsPerGrant:
      total === 0 ? Number.NaN : results.reduce((n, r) => n + r.cpuUs, 0) / total,
    redisCpuUsPerGrant:
      total === 0 ? Number.NaN : (commandsAfter.cpuUs - commandsBefore.cpuUs) / total,
    overlaps: overlapsOf(holds),
    // Every hold the mutual-exclusion check covered, the warm-up's too.
    holdsChecked: holds.length,
    errors: results.reduce((n, r) => n + r.errors, 0),
    errorKinds,
  };
}

const cluster = await LocalCluster.start({ nodeCount: 5, persistence: "none" });
try {
  {
    const redlock = new Redlock(cluster.urls);
    await redlock.init();
    await redlock.close();
  }
  const results = [];
  for (const workload of workloads) {
    for (let rep = 0; rep < reps; rep++) {
      // A B C …, then … C B A: drift over the run falls on every library alike.
      const order = rep % 2 === 0 ? libraries : [...libraries].reverse();
      for (const library of order) {
        const cell = await runCell(cluster, library, workload, rep);
        process.stderr.write(
          `${workload.key} rep ${rep + 1}/${reps} ${library}: ${fmt(cell.perSecond)} grants/s, ` +
            `p99 ${fmt(cell.acquireP99Ms)} ms, ${fmt(cell.commandsPerGrant)} commands/grant, overlaps ${cell.overlaps}\n`,
        );
        results.push({ workload: workload.key, library, rep, ...cell });
      }
    }
  }
  console.log(
    `\n${workloads.length} workloads × ${libraries.length} libraries × ${reps} reps, ${args.seconds} s per cell after ${args.warmup} s of warm-up, ` +
      `contenders in ${args.procs === "64" ? "one process each" : `up to ${args.procs} processes`}, hold ${holdMs} ms, ` +
      `${cpus().length} CPUs, Node ${process.version}; 5 local redis-server nodes, no persistence`,
  );
  const summary = [];
  for (const workload of workloads) {
    const { contenders, pacing } = workload;
    console.log(
      `\n### ${contenders} independent contenders, one resource, retry ${pacing.delayMs} ± ${pacing.jitterMs} ms\n`,
    );
    console.log(
      "| library | grants/s (median, min–max) | acquire p50 / p99 ms | p99 bound ms | grants per contender min–max | Jain | Redis commands / script calls / PUBLISH per grant | CPU µs per grant: clients / Redis | overlapping holds | errors |",
    );
    console.log("|---|---|---|---|---|---|---|---|---|---|");
    for (const library of libraries) {
      const cells = results.filter((r) => r.workload === workload.key && r.library === library);
      const m = (field) => median(cells.map((c) => c[field]));
      const row = {
        workload: workload.key,
        library,
        perSecond: m("perSecond"),
        min: Math.min(...cells.map((c) => c.perSecond)),
        max: Math.max(...cells.map((c) => c.perSecond)),
        acquireP50Ms: m("acquireP50Ms"),
        acquireP99Ms: m("acquireP99Ms"),
        grantsMin: m("grantsMin"),
        grantsMax: m("grantsMax"),
        jain: m("jain"),
        commandsPerGrant: m("commandsPerGrant"),
        scriptsPerGrant: m("scriptsPerGrant"),
        publishesPerGrant: m("publishesPerGrant"),
        clientCpuUsPerGrant: m("clientCpuUsPerGrant"),
        redisCpuUsPerGrant: m("redisCpuUsPerGrant"),
        overlaps: cells.reduce((n, c) => n + c.overlaps, 0),
        errors: cells.reduce((n, c) => n + c.errors, 0),
      };
      // Issue 13's bound on waiting: 10 × the same library's p99 alone
      // (the 1x10 cell of this run) × the contenders ahead in line.
      const alone = summary.find((r) => r.workload === "1x10" && r.library === library);
      row.acquireP99BoundMs =
        alone && contenders > 1 ? 10 * alone.acquireP99Ms * (contenders - 1) : undefined;
      const bound =
        row.acquireP99BoundMs === undefined
          ? "—"
          : `${fmt(row.acquireP99BoundMs)} (${row.acquireP99Ms <= row.acquireP99BoundMs ? "within" : "over"})`;
      const names = new Set(cells.flatMap((c) => Object.keys(c.commandsByName)));
      row.commandsByName = Object.fromEntries(
        [...names].map((name) => [name, median(cells.map((c) => c.commandsByName[name] ?? 0))]),
      );
      summary.push(row);
      console.log(
        `| ${library} | ${fmt(row.perSecond)} (${fmt(row.min)}–${fmt(row.max)}) | ${fmt(row.acquireP50Ms, 1)} / ${fmt(row.acquireP99Ms, 1)} | ${bound} | ` +
          `${row.grantsMin}–${row.grantsMax} | ${fmt(row.jain, 2)} | ${fmt(row.commandsPerGrant)} / ${fmt(row.scriptsPerGrant, 1)} / ${fmt(row.publishesPerGrant, 1)} | ${fmt(row.clientCpuUsPerGrant)} / ${fmt(row.redisCpuUsPerGrant)} | ${row.overlaps} | ${row.errors} |`,
      );
    }
    // Which commands a grant costs (scripts' own commands included): where to look.
    console.log("\n| library | Redis commands per grant, by command (median) |\n|---|---|");
    for (const row of summary.filter((r) => r.workload === workload.key)) {
      const parts = Object.entries(row.commandsByName)
        .filter(([, perGrant]) => perGrant >= 0.05)
        .sort((a, b) => b[1] - a[1])
        .map(([name, perGrant]) => `${name} ${fmt(perGrant, 1)}`);
      console.log(`| ${row.library} | ${parts.join(", ")} |`);
    }
  }
  const file =
    args.json ?? `bench/results/contention-${new Date().toISOString().replace(/[:.]/g, "-")}.json`;
  writeResults({
    setup: `5 local redis-server nodes (no persistence), contenders in child processes, each cell counted after ${args.warmup} s of warm-up`,
    warmupMs,
    file,
    cellMs,
    reps,
    summary,
    results,
  });
  if (summary.some((s) => s.overlaps > 0)) {
    console.error("MUTUAL EXCLUSION VIOLATED in some cell (overlapping holds above)");
    process.exitCode = 1;
  }
} finally {
  await cluster.stop();
}
