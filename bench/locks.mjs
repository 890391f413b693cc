// Lock benchmark: acquire + release cycles of redquorum (fencing on and
// off) beside node-redlock v5 on the same 5 local redis-server nodes, in the
// same run, interleaved (A B C, C B A, ...) and repeated, reporting the
// median with min-max.
//
//   npm run bench                  (builds first)
//   node bench/locks.mjs --seconds 2 --reps 3
import { parseArgs } from "node:util";
import { Redis } from "ioredis";
import NodeRedlock from "redlock";
import { LocalCluster, Redlock } from "../dist/index.js";
import { interleave, measureCell, report } from "./report.mjs";

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

/** Acquire then release, the same for every library. */
const cycleOf = (redlock) => async (resource) => {
  const lock = await redlock.acquire([resource], ttlMs);
  await lock.release();
};

const ours = (options) => async () => {
  const redlock = new Redlock(cluster.urls, { retry: { retries: 0 }, ...options });
  return { cycle: cycleOf(redlock), close: () => redlock.close() };
};

/** Each contender: setup returns { cycle(resource), close() }. */
const contenders = {
  redquorum: ours({}),
  "redquorum, fencing off": ours({ fencing: false }),
  "node-redlock 5.0.0-beta.2": async () => {
    const clients = cluster.urls.map((url) => new Redis(url));
    const redlock = new NodeRedlock(clients, { retryCount: 0, driftFactor: 0.01 });
    redlock.on("error", () => {});
    return {
      cycle: cycleOf(redlock),
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

try {
  const results = await interleave(
    workloads,
    Object.keys(contenders),
    reps,
    async (name, workload, rep) => {
      const label = `${rep}:${name}`;
      const contender = await contenders[name]();
      // Warm up: connections, script cache, JIT.
      for (let i = 0; i < 20; i++) await contender.cycle(`warm:${label}`);
      const cell = await measureCell(workload.workers, cellMs, (w) =>
        contender.cycle(`bench:${label}:${w}`),
      );
      await contender.close();
      return cell;
    },
  );
  report({
    results,
    baseline: "redquorum",
    unit: "cycles/s",
    setup: "5 local redis-server nodes",
    file: args.json ?? `bench/results/locks-${new Date().toISOString().replace(/[:.]/g, "-")}.json`,
    cellMs,
    reps,
  });
} finally {
  await cluster.stop();
}
