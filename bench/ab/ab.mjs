// A/B driver: the redquorum cells of bench/ab/cells.mjs (the workloads of
// bench/locks.mjs and bench/ids.mjs) against the dist of one worktree, plus
// the floor as a control; one process per build and run (see run-ab.sh;
// interleaved.mjs runs two builds in one process instead).
//   node bench/ab/ab.mjs --dir <a built worktree> --seconds 5 --json out.json
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import { bareRounds } from "../floor.mjs";
import { idCell, idCells, lockCell, lockCells, redquorumContender } from "./cells.mjs";

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
const lib = await import(`${dir}/dist/index.js`);
const { Redis } = createRequire(`${dir}/package.json`)("ioredis");
const out = { dir, cellMs, load: loadavg()[0], cells: {} };

// Control: the bench's floor (../floor.mjs, this checkout's), independent of the compared builds.
function floor(urls) {
  const clients = urls.map((u) => new Redis(u));
  const { acquireRound, release } = bareRounds(clients, 10_000);
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

{
  const cluster = await lib.LocalCluster.start({ nodeCount: 5, persistence: "none" });
  try {
    const init = new lib.Redlock(cluster.urls);
    await init.init();
    await init.close();
    for (const [key, { workers, contended, pacing }] of Object.entries(lockCells)) {
      if (!want.has(key)) continue;
      const contender = redquorumContender(lib, cluster.urls, pacing);
      out.cells[key] = await lockCell(contender, key, workers, contended, cellMs);
    }
    if (want.has("F64"))
      out.cells.F64 = await lockCell(floor(cluster.urls), "F64", 64, false, cellMs);
  } finally {
    await cluster.stop();
  }
}
if ([...want].some((key) => key in idCells)) {
  const cluster = await lib.LocalCluster.start({ nodeCount: 5, persistence: "aof-always" });
  try {
    const init = new lib.NextId(cluster.urls);
    await init.init();
    await init.close();
    for (const [key, callers] of Object.entries(idCells)) {
      if (want.has(key)) out.cells[key] = await idCell(lib, cluster.urls, callers, cellMs);
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
