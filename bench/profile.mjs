// One library alone on a fresh 5-node cluster, for profiling one workload:
//
//   npm run build
//   node --cpu-prof --cpu-prof-dir=prof bench/profile.mjs --workers 1
//   node --cpu-prof --cpu-prof-dir=prof bench/profile.mjs --workers 64 --contended
//   node bench/prof-top.mjs prof        (self time by function and by file)
//
// The whole machine, client and Redis servers together, beside node-redlock:
//
//   perf record -F 999 -a -g -o rq.data -- node --perf-basic-prof bench/profile.mjs --seconds 6
//   perf record -F 999 -a -g -o nr.data -- node --perf-basic-prof bench/profile.mjs --seconds 6 --library node-redlock
//   perf report -i rq.data --no-children --sort comm,dso -g none
//
// --library redquorum (default) or node-redlock (v5, bench/'s own
// dependency); --fencing off turns redquorum's fencing off; --seconds N
// (default 4). Contended: all workers on one resource, retrying every
// 10 ± 5 ms (redquorum's waiters are woken by releases too). The cycles/s
// printed leave out the cluster's start.
import { parseArgs } from "node:util";
import { Redis } from "ioredis";
import NodeRedlock from "redlock";
import { LocalCluster, Redlock } from "../dist/index.js";

const { values } = parseArgs({
  options: {
    library: { type: "string", default: "redquorum" },
    workers: { type: "string", default: "1" },
    contended: { type: "boolean", default: false },
    fencing: { type: "string", default: "on" },
    seconds: { type: "string", default: "4" },
  },
});
if (values.library !== "redquorum" && values.library !== "node-redlock") {
  throw new Error(`--library ${values.library}: redquorum or node-redlock`);
}
const workers = Number(values.workers);
const cellMs = Number(values.seconds) * 1_000;

/** The library's acquire → release cycle on `resource`, and how to close it. */
async function library(urls) {
  if (values.library === "node-redlock") {
    const clients = urls.map((url) => new Redis(url));
    const redlock = new NodeRedlock(clients, {
      retryCount: values.contended ? 10_000 : 0,
      retryDelay: 10,
      retryJitter: 5,
    });
    return {
      cycle: async (resource) => (await redlock.acquire([resource], 10_000)).release(),
      close: async () => {
        await redlock.quit();
      },
    };
  }
  const init = new Redlock(urls);
  await init.init();
  await init.close();
  const redlock = new Redlock(urls, {
    fencing: values.fencing !== "off",
    retry: values.contended ? { retries: 10_000, delayMs: 10, jitterMs: 5 } : { retries: 0 },
  });
  return {
    cycle: async (resource) => (await redlock.acquire([resource], 10_000)).release(),
    close: () => redlock.close(),
  };
}

const cluster = await LocalCluster.start({ nodeCount: 5, persistence: "none" });
try {
  const { cycle, close } = await library(cluster.urls);
  let cycles = 0;
  let errors = 0;
  const end = performance.now() + cellMs;
  await Promise.all(
    Array.from({ length: workers }, async (_, worker) => {
      const resource = values.contended ? "profile" : `profile:${worker}`;
      while (performance.now() < end) {
        try {
          await cycle(resource);
          cycles++;
        } catch {
          errors++;
        }
      }
    }),
  );
  const fencing = values.library === "redquorum" ? `, fencing ${values.fencing}` : "";
  console.log(
    `${values.library}, ${workers} worker(s)${values.contended ? " on one resource" : ""}${fencing}: ` +
      `${Math.round((cycles / cellMs) * 1_000)} cycles/s, ${errors} errors`,
  );
  await close();
} finally {
  await cluster.stop();
}
