// Lock benchmark: redquorum (fencing on and off) beside the Node Redlock
// libraries and the floor (a bare round: SET NX PX to all 5 nodes at once,
// then compare-and-delete to all 5), on the same 5 local redis-server nodes
// in the same run, interleaved (A B C…, …C B A) and repeated; median with
// min-max. redlock-universal is left out: every published version needs
// Node 22.
//
//   npm run bench                  (builds first)
//   node bench/locks.mjs --seconds 2 --reps 3
import { Redlock as RedlockSesame } from "@sesamecare-oss/redlock";
import { Redis } from "ioredis";
import { RedlockMutex } from "redis-semaphore";
import NodeRedlock from "redlock";
import NodeRedlock4 from "redlock4";
import { LocalCluster, Redlock } from "../dist/index.js";
import { drawChart } from "./chart.mjs";
import { bareRounds } from "./floor.mjs";
import {
  benchArgs,
  fmt,
  interleave,
  lockCycles,
  median,
  percentile,
  writeResults,
} from "./report.mjs";

const { cellMs, reps, json, pick } = benchArgs();
const ttlMs = 10_000;

const cluster = await LocalCluster.start({ nodeCount: 5, persistence: "none" });
{
  // Mark the new nodes, so redquorum's first acquire is not quarantined.
  const redlock = new Redlock(cluster.urls);
  await redlock.init();
  await redlock.close();
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const ioredisClients = (options = {}) =>
  cluster.urls.map((url) => {
    const client = new Redis(url, options);
    client.on("error", () => {}); // the paused-node cell makes some fail; that is measured, not printed
    return client;
  });
const disconnect = (clients) => async () => {
  for (const client of clients) client.disconnect();
};

/**
 * Each contender: `setup(pacing)` returns { acquire(resource), release(handle), close() };
 * with `pacing` (contended cells: { delayMs, jitterMs }, the same for every
 * library), acquire retries until it gets the lock; without, it tries once.
 */
const contenders = {
  redquorum: ours({}),
  "redquorum, fencing off": ours({ fencing: false }),
  "node-redlock 5.0.0-beta.2": redlockLike(NodeRedlock),
  "@sesamecare-oss/redlock 1.4.0": redlockLike(RedlockSesame),
  "node-redlock 4.2.0": async (pacing) => {
    const clients = ioredisClients();
    const redlock = new NodeRedlock4(clients, {
      retryCount: pacing ? 100_000 : 0,
      retryDelay: pacing?.delayMs,
      retryJitter: pacing?.jitterMs,
    });
    redlock.on("clientError", () => {});
    return {
      acquire: (resource) => redlock.lock(resource, ttlMs),
      release: (lock) => lock.unlock(),
      close: disconnect(clients),
    };
  },
  "redis-semaphore 5.8.0 RedlockMutex": async (pacing) => {
    const clients = ioredisClients();
    const mutexes = new Map();
    return {
      acquire: async (resource) => {
        let mutex = mutexes.get(resource);
        if (!mutex || pacing) {
          mutex = new RedlockMutex(clients, resource, {
            lockTimeout: ttlMs,
            acquireTimeout: pacing ? 60_000 : 50,
            acquireAttemptsLimit: pacing ? Number.POSITIVE_INFINITY : 1,
            retryInterval: pacing?.delayMs, // no jitter option
            refreshInterval: 0,
          });
          if (!pacing) mutexes.set(resource, mutex);
        }
        await mutex.acquire();
        return mutex;
      },
      release: (mutex) => mutex.release(),
      close: disconnect(clients),
    };
  },
  floor: floor(false),
  "floor, auto-pipelining": floor(true),
};

function ours(options) {
  return async (pacing) => {
    const redlock = new Redlock(cluster.urls, {
      ...options,
      retry: pacing ? { retries: 10_000, ...pacing } : { retries: 0 },
    });
    return {
      acquire: (resource) => redlock.acquire([resource], ttlMs),
      release: (lock) => lock.release(),
      close: () => redlock.close(),
    };
  };
}

function redlockLike(Library) {
  return async (pacing) => {
    const clients = ioredisClients();
    const redlock = new Library(clients, {
      retryCount: pacing ? 100_000 : 0,
      retryDelay: pacing?.delayMs,
      retryJitter: pacing?.jitterMs,
      driftFactor: 0.01,
    });
    redlock.on("error", () => {});
    return {
      acquire: (resource) => redlock.acquire([resource], ttlMs),
      release: (lock) => lock.release(),
      close: disconnect(clients),
    };
  };
}

/** The floor (floor.mjs): bare rounds, paced retries like everyone else. */
function floor(enableAutoPipelining) {
  return async (pacing) => {
    const clients = ioredisClients({ enableAutoPipelining });
    const { acquireRound, release } = bareRounds(clients, ttlMs);
    return {
      acquire: async (resource) => {
        for (;;) {
          const lock = await acquireRound(resource);
          if (lock) return lock;
          if (!pacing) throw new Error("not acquired");
          await sleep(pacing.delayMs + Math.floor((Math.random() * 2 - 1) * pacing.jitterMs));
        }
      },
      release,
      close: disconnect(clients),
    };
  };
}

const workloads = pick([
  { name: "uncontended, 1 worker", workers: 1, kind: "uncontended" },
  { name: "uncontended, 64 workers", workers: 64, kind: "uncontended" },
  // Retry pacing: node-redlock's default delay (200 ms, also redquorum's),
  // and an aggressive 10 ms that favours blind polling.
  {
    name: "contended, 64 workers on 1 resource, retry 200 ± 100 ms",
    workers: 64,
    kind: "contended",
    pacing: { delayMs: 200, jitterMs: 100 },
  },
  {
    name: "contended, 64 workers on 1 resource, retry 10 ± 5 ms",
    workers: 64,
    kind: "contended",
    pacing: { delayMs: 10, jitterMs: 5 },
  },
  { name: "all nodes healthy, 8 workers", workers: 8, kind: "uncontended" },
  { name: "1 node paused, 8 workers", workers: 8, kind: "paused" },
]);

/** Jain's fairness index: 1 when every worker got the same number of grants. */
const jain = (xs) => {
  const sum = xs.reduce((a, b) => a + b, 0);
  const squares = xs.reduce((a, b) => a + b * b, 0);
  return squares === 0 ? 0 : (sum * sum) / (xs.length * squares);
};

async function runCell(name, workload, rep) {
  const contended = workload.kind === "contended";
  const contender = await contenders[name](workload.pacing);
  const label = `${rep}:${name}:${workload.kind}`;
  for (let i = 0; i < 20; i++) await contender.release(await contender.acquire(`warm:${label}`));
  if (workload.kind === "paused") cluster.pause(0);
  let cycles;
  try {
    cycles = await lockCycles(contender, {
      workers: workload.workers,
      cellMs,
      resourceOf: (worker) => (contended ? `bench:${label}` : `bench:${label}:${worker}`),
      acquireBoundMs: contended ? 30_000 : 2_000,
    });
  } finally {
    if (workload.kind === "paused") cluster.resume(0);
  }
  await contender.close();
  const { acquireMs, releaseMs, grants, errors, errorKinds } = cycles;
  return {
    perSecond: cycles.perSecond,
    acquireP50Ms: percentile(acquireMs, 50),
    acquireP99Ms: percentile(acquireMs, 99),
    releaseP50Ms: percentile(releaseMs, 50),
    releaseP99Ms: percentile(releaseMs, 99),
    grantsMin: Math.min(...grants),
    grantsMax: Math.max(...grants),
    jain: jain(grants),
    errors,
    errorKinds: Object.fromEntries(errorKinds),
  };
}

try {
  const names = Object.keys(contenders);
  const results = await interleave(workloads, names, reps, runCell);
  const rate = (workload, contender) =>
    median(
      results
        .find((r) => r.workload === workload && r.contender === contender)
        .cells.map((c) => c.perSecond),
    );
  const summary = results.map((r) => {
    const cells = r.cells;
    const m = (field) => median(cells.map((c) => c[field]));
    return {
      workload: r.workload,
      contender: r.contender,
      perSecond: m("perSecond"),
      min: Math.min(...cells.map((c) => c.perSecond)),
      max: Math.max(...cells.map((c) => c.perSecond)),
      acquireP50Ms: m("acquireP50Ms"),
      acquireP99Ms: m("acquireP99Ms"),
      releaseP50Ms: m("releaseP50Ms"),
      releaseP99Ms: m("releaseP99Ms"),
      grantsMin: m("grantsMin"),
      grantsMax: m("grantsMax"),
      jain: m("jain"),
      errors: cells.reduce((n, c) => n + c.errors, 0),
      vsRedquorum: m("perSecond") / rate(r.workload, "redquorum"),
      vsFloor: m("perSecond") / rate(r.workload, "floor"),
    };
  });
  for (const workload of workloads) {
    const rows = summary.filter((s) => s.workload === workload.name);
    const contended = workload.kind === "contended";
    console.log(`\n### ${workload.name}\n`);
    console.log(
      contended
        ? "| contender | grants/s (median, min–max) | acquire p50 / p99 ms | grants per worker min–max | Jain | vs redquorum | vs floor | errors |"
        : "| contender | cycles/s (median, min–max) | acquire p50 / p99 ms | release p50 / p99 ms | vs redquorum | vs floor | errors |",
    );
    console.log(contended ? "|---|---|---|---|---|---|---|---|" : "|---|---|---|---|---|---|---|");
    for (const s of rows) {
      const head = `| ${s.contender} | ${fmt(s.perSecond)} (${fmt(s.min)}–${fmt(s.max)}) | ${fmt(s.acquireP50Ms, 2)} / ${fmt(s.acquireP99Ms, 2)} |`;
      const tail = `${fmt(s.vsRedquorum, 2)}× | ${fmt(s.vsFloor, 2)}× | ${s.errors} |`;
      console.log(
        contended
          ? `${head} ${s.grantsMin}–${s.grantsMax} | ${fmt(s.jain, 2)} | ${tail}`
          : `${head} ${fmt(s.releaseP50Ms, 2)} / ${fmt(s.releaseP99Ms, 2)} | ${tail}`,
      );
    }
  }
  const file = json ?? `bench/results/locks-${new Date().toISOString().replace(/[:.]/g, "-")}.json`;
  writeResults({
    setup: "5 local redis-server nodes (no persistence)",
    file,
    cellMs,
    reps,
    summary,
    results,
  });
  drawChart(file);
} finally {
  await cluster.stop();
}
