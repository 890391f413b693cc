// How a contention cell's rate climbs while its fresh processes warm up:
// one long cell per library (bench/contention-worker.mjs, the contenders
// spread over up to 8 processes, retry 10 ± 5 ms, 5 local nodes without
// persistence), grants counted per second from the cell's first grant. The
// reason bench/contention.mjs runs each cell's workload for a while
// (`--warmup`) before it counts.
//
//   npm run build && node bench/warmup.mjs --seconds 16 --contenders 8 \
//     --libraries "redquorum;fair floor"
//   BENCH_WORKER_NODE_ARGS=--no-opt node bench/warmup.mjs …   (V8 without its optimizing compiler)
import { parseArgs } from "node:util";
import { LocalCluster } from "../dist/index.js";
import { runWorkers, startContenders } from "./processes.mjs";

const { values: args } = parseArgs({
  options: {
    seconds: { type: "string", default: "16" },
    contenders: { type: "string", default: "8" },
    libraries: { type: "string", default: "redquorum;fair floor" },
  },
});
const seconds = Number(args.seconds);
const contenders = Number(args.contenders);
if (!Number.isInteger(seconds) || seconds < 1)
  throw new Error(`--seconds ${args.seconds}: a whole number, 1 or more`);
if (!Number.isInteger(contenders) || contenders < 1) {
  throw new Error(`--contenders ${args.contenders}: a whole number, 1 or more`);
}
const cluster = await LocalCluster.start({ nodeCount: 5, persistence: "none" });
try {
  console.log(
    `| library | grants in each second from the first, one ${seconds} s cell, ${contenders} contenders |`,
  );
  console.log("|---|---|");
  for (const library of args.libraries.split(";").map((name) => name.trim())) {
    const resource = `warmup:${library}:${Math.random()}`;
    const workers = startContenders(
      {
        library,
        urls: cluster.urls,
        resource,
        ttlMs: 10_000,
        pacing: { delayMs: 10, jitterMs: 5 },
        holdMs: 0,
      },
      contenders,
      Math.min(8, contenders),
    );
    const { results } = await runWorkers(workers, seconds * 1_000);
    const starts = results.flatMap((r) => r.holds.map((h) => BigInt(h[0])));
    const first = starts.reduce((a, b) => (b < a ? b : a), starts[0] ?? 0n);
    const perSecond = new Array(seconds).fill(0);
    for (const start of starts) {
      const i = Number((start - first) / 1_000_000_000n);
      if (i < seconds) perSecond[i]++;
    }
    console.log(`| ${library} | ${perSecond.join(", ")} |`);
  }
} finally {
  await cluster.stop();
}
