// redquorum alone on a fresh 5-node cluster, for profiling one workload:
//
//   npm run build
//   node --cpu-prof --cpu-prof-dir=prof bench/profile.mjs --workers 1
//   node --cpu-prof --cpu-prof-dir=prof bench/profile.mjs --workers 64 --contended
//   node bench/prof-top.mjs prof        (self time by function and by file)
//
// --fencing off turns fencing off; --seconds N (default 4). Contended: all
// workers on one resource, retrying every 10 ± 5 ms (woken by releases).
import { parseArgs } from "node:util";
import { LocalCluster, Redlock } from "../dist/index.js";

const { values } = parseArgs({
  options: {
    workers: { type: "string", default: "1" },
    contended: { type: "boolean", default: false },
    fencing: { type: "string", default: "on" },
    seconds: { type: "string", default: "4" },
  },
});
const workers = Number(values.workers);
const cellMs = Number(values.seconds) * 1_000;
const cluster = await LocalCluster.start({ nodeCount: 5, persistence: "none" });
try {
  const init = new Redlock(cluster.urls);
  await init.init();
  await init.close();
  const redlock = new Redlock(cluster.urls, {
    fencing: values.fencing !== "off",
    retry: values.contended ? { retries: 10_000, delayMs: 10, jitterMs: 5 } : { retries: 0 },
  });
  let cycles = 0;
  let errors = 0;
  const end = performance.now() + cellMs;
  await Promise.all(
    Array.from({ length: workers }, async (_, worker) => {
      const resource = values.contended ? "profile" : `profile:${worker}`;
      while (performance.now() < end) {
        try {
          const lock = await redlock.acquire([resource], 10_000);
          await lock.release();
          cycles++;
        } catch {
          errors++;
        }
      }
    }),
  );
  console.log(
    `${workers} worker(s)${values.contended ? " on one resource" : ""}, fencing ${values.fencing}: ` +
      `${Math.round((cycles / cellMs) * 1_000)} cycles/s, ${errors} errors`,
  );
  await redlock.close();
} finally {
  await cluster.stop();
}
