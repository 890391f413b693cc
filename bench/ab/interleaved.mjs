// A/B of two builds in one process, on the same clusters, alternating cell
// by cell (before/after, then after/before, …): on a shared machine whose
// speed drifts from minute to minute, a pair measured seconds apart is
// compared under the same conditions, where run-ab.sh's default (a fresh
// process and clusters per build and run, a minute apart) is not. Writes
// run-ab.sh's per-run files (<out>/before-<rep>.json, <out>/after-<rep>.json)
// for analyze.mjs. Cells: bench/ab/cells.mjs (no floor: it is not a build).
//   node bench/ab/interleaved.mjs --before <built worktree> --after <built worktree> \
//     --cells L1,LC --seconds 2 --reps 10 --out <dir>
//   (or INTERLEAVED=1 bench/ab/run-ab.sh <before-commit> <after-commit>)
import { mkdirSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import { idCell, idCells, lockCell, lockCells, redquorumContender } from "./cells.mjs";

const { values } = parseArgs({
  options: {
    before: { type: "string" },
    after: { type: "string" },
    seconds: { type: "string", default: "2" },
    reps: { type: "string", default: "10" },
    cells: { type: "string", default: "L1,L64,LC,I1,I64" },
    out: { type: "string" },
  },
});
if (!values.before || !values.after || !values.out) {
  throw new Error("usage: interleaved.mjs --before DIR --after DIR --out DIR [--cells …]");
}
const cellMs = Number(values.seconds) * 1000;
const reps = Number(values.reps);
const want = values.cells.split(",");
for (const key of want) {
  if (!(key in lockCells) && !(key in idCells)) throw new Error(`--cells: unknown cell ${key}`);
}
const builds = {
  before: await import(`${values.before}/dist/index.js`),
  after: await import(`${values.after}/dist/index.js`),
};
// The clusters come from the after build; both builds' init() runs on them.
const { LocalCluster } = builds.after;
const runs = { before: [], after: [] };
for (let rep = 0; rep < reps; rep++) {
  for (const name of ["before", "after"]) runs[name].push({ cells: {} });
}

/** Each build counts on its own ID key: the two never share a counter. */
const idKeyOf = (lib) => (lib === builds.before ? "bench:id:before" : "bench:id:after");

async function withCluster(persistence, init, measure) {
  const cluster = await LocalCluster.start({ nodeCount: 5, persistence });
  try {
    for (const lib of Object.values(builds)) await init(lib, cluster.urls);
    await measure(cluster.urls);
  } finally {
    await cluster.stop();
  }
}

/** Each rep runs every cell once per build, the builds' order alternating. */
async function alternate(keys, measureOne) {
  for (let rep = 0; rep < reps; rep++) {
    // The load average as this rep's first cells start (analyze.mjs prints it).
    for (const name of ["before", "after"]) runs[name][rep].load ??= loadavg()[0];
    for (const key of keys) {
      const order = rep % 2 === 0 ? ["before", "after"] : ["after", "before"];
      for (const name of order) {
        runs[name][rep].cells[key] = await measureOne(builds[name], key, `${key}:${name}:${rep}`);
      }
    }
    console.log(
      `rep ${rep + 1}/${reps}  ` +
        keys
          .map(
            (key) =>
              `${key} ${Math.round(runs.before[rep].cells[key].perSecond)} → ` +
              `${Math.round(runs.after[rep].cells[key].perSecond)}`,
          )
          .join("  "),
    );
  }
}

const lockKeys = want.filter((key) => key in lockCells);
if (lockKeys.length > 0) {
  await withCluster(
    "none",
    async (lib, urls) => {
      const init = new lib.Redlock(urls);
      await init.init();
      await init.close();
    },
    (urls) =>
      alternate(lockKeys, (lib, key, label) => {
        const { workers, contended, pacing } = lockCells[key];
        return lockCell(redquorumContender(lib, urls, pacing), label, workers, contended, cellMs);
      }),
  );
}
const idKeys = want.filter((key) => key in idCells);
if (idKeys.length > 0) {
  await withCluster(
    "aof-always",
    async (lib, urls) => {
      const init = new lib.NextId(urls, { key: idKeyOf(lib) });
      await init.init();
      await init.close();
    },
    (urls) =>
      alternate(idKeys, (lib, key) => idCell(lib, urls, idCells[key], cellMs, idKeyOf(lib))),
  );
}
mkdirSync(values.out, { recursive: true });
for (const name of ["before", "after"]) {
  runs[name].forEach((run, rep) => {
    writeFileSync(`${values.out}/${name}-${rep + 1}.json`, JSON.stringify({ ...run, cellMs }));
  });
}
