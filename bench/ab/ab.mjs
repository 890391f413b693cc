// A/B driver: the redquorum cells of bench/locks.mjs and bench/ids.mjs (same
// cell code: runCell / measureCell), run against the dist of one worktree.
//   node bench/ab/ab.mjs --dir <a built worktree> --seconds 5 --json out.json (see run-ab.sh)
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import { bareRounds } from "../floor.mjs";

const { values } = parseArgs({
  options: {
    dir: { type: "string" },
    seconds: { type: "string", default: "5" },
    json: { type: "string" },
    cells: { type: "string", default: "L1,L64,LC,F64,I1,I64" },
  },
});
const dir = values.dir;
const cellMs = Number(values.seconds) * 1000;
const want = new Set(values.cells.split(","));
const { LocalCluster, Redlock, NextId } = await import(`${dir}/dist/index.js`);
const { measureCell, percentile } = await import(`${dir}/bench/report.mjs`);
const { Redis } = createRequire(`${dir}/package.json`)("ioredis");
const ttlMs = 10_000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const bounded = (p, ms) =>
  Promise.race([p, sleep(ms).then(() => Promise.reject(new Error(`no answer in ${ms} ms`)))]);
const out = { dir, cellMs, load: loadavg()[0], cells: {} };

function ours(urls, pacing) {
  const redlock = new Redlock(urls, {
    retry: pacing ? { retries: 10_000, ...pacing } : { retries: 0 },
  });
  return {
    acquire: (resource) => redlock.acquire([resource], ttlMs),
    release: (lock) => lock.release(),
    close: () => redlock.close(),
  };
}
// Control: the bench's floor (../floor.mjs, this checkout's), independent of the compared builds.
function floor(urls) {
  const clients = urls.map((u) => new Redis(u));
  const { acquireRound, release } = bareRounds(clients, ttlMs);
  return {
    acquire: async (resource) => {
      const lock = await acquireRound(resource);
      if (!lock) throw new Error("not acquired");
      return lock;
    },
    release,
    close: async () => {
      for (const c of clients) c.disconnect();
    },
  };
}

async function lockCell(key, contender, workers, contended) {
  const label = `${key}`;
  for (let i = 0; i < 20; i++) await contender.release(await contender.acquire(`warm:${label}`));
  const acquireMs = [],
    releaseMs = [],
    grants = new Array(workers).fill(0);
  let errors = 0;
  const start = performance.now(),
    end = start + cellMs;
  await Promise.all(
    grants.map(async (_, w) => {
      const resource = contended ? `bench:${label}` : `bench:${label}:${w}`;
      while (performance.now() < end) {
        try {
          const t0 = performance.now();
          const h = await bounded(contender.acquire(resource), contended ? 30_000 : 2_000);
          const t1 = performance.now();
          await bounded(contender.release(h), 2_000);
          acquireMs.push(t1 - t0);
          releaseMs.push(performance.now() - t1);
          grants[w]++;
        } catch {
          errors++;
        }
      }
    }),
  );
  const elapsed = performance.now() - start;
  await contender.close();
  acquireMs.sort((a, b) => a - b);
  releaseMs.sort((a, b) => a - b);
  out.cells[key] = {
    perSecond: (acquireMs.length / elapsed) * 1000,
    p50Ms: percentile(acquireMs, 50),
    p99Ms: percentile(acquireMs, 99),
    relP50Ms: percentile(releaseMs, 50),
    relP99Ms: percentile(releaseMs, 99),
    errors,
  };
}

{
  const cluster = await LocalCluster.start({ nodeCount: 5, persistence: "none" });
  try {
    const init = new Redlock(cluster.urls);
    await init.init();
    await init.close();
    if (want.has("L1")) await lockCell("L1", ours(cluster.urls), 1, false);
    if (want.has("L64")) await lockCell("L64", ours(cluster.urls), 64, false);
    if (want.has("LC"))
      await lockCell("LC", ours(cluster.urls, { delayMs: 10, jitterMs: 5 }), 64, true);
    if (want.has("F64")) await lockCell("F64", floor(cluster.urls), 64, false);
  } finally {
    await cluster.stop();
  }
}
{
  const cluster = await LocalCluster.start({ nodeCount: 5, persistence: "aof-always" });
  try {
    const init = new NextId(cluster.urls);
    await init.init();
    await init.close();
    for (const [key, callers] of [
      ["I1", 1],
      ["I64", 64],
    ]) {
      if (!want.has(key)) continue;
      const g = new NextId(cluster.urls, { strategy: "range" });
      await g.next();
      out.cells[key] = await measureCell(callers, cellMs, () => g.next());
      await g.close();
    }
  } finally {
    await cluster.stop();
  }
}
out.loadEnd = loadavg()[0];
const line = Object.entries(out.cells)
  .map(([k, c]) => `${k}=${Math.round(c.perSecond)}/s p50=${c.p50Ms.toFixed(2)} e=${c.errors}`)
  .join("  ");
console.log(
  `${dir.split("-").pop()} load ${out.load.toFixed(2)}→${out.loadEnd.toFixed(2)}  ${line}`,
);
if (values.json) writeFileSync(values.json, JSON.stringify(out, null, 2));
