// Redis time and client CPU per grant of one A/B cell (bench/ab/cells.mjs:
// L1, L64, LC), for two built worktrees alternating on one 5-node cluster:
// grants/s, Redis µs per grant (INFO commandstats usec over every node, of
// the commands the cell sends: EVALSHA, EVAL, SET, GET; a script's time
// includes the commands it runs), script calls per grant, and this
// process's CPU per grant (process.cpuUsage, user + system). Medians last.
//   node bench/ab/redis-cost.mjs --before <worktree> --after <worktree> --cell LC --reps 10 --seconds 2
// (each worktree built: `npx tsup`; bench/ab/run-ab.sh makes such worktrees)
import { parseArgs } from "node:util";
import { Redis } from "ioredis";
import { median } from "../report.mjs";
import { lockCell, lockCells, redquorumContender } from "./cells.mjs";

const { values } = parseArgs({
  options: {
    before: { type: "string" },
    after: { type: "string" },
    cell: { type: "string", default: "LC" },
    reps: { type: "string", default: "10" },
    seconds: { type: "string", default: "2" },
  },
});
if (!values.before || !values.after || !(values.cell in lockCells)) {
  throw new Error(
    "usage: redis-cost.mjs --before DIR --after DIR [--cell L1|L64|LC] [--reps N] [--seconds S]",
  );
}
const builds = {
  before: await import(`${values.before}/dist/index.js`),
  after: await import(`${values.after}/dist/index.js`),
};
const sent = ["evalsha", "eval", "set", "get"];
const cellMs = Number(values.seconds) * 1000;
const cluster = await builds.after.LocalCluster.start({ nodeCount: 5, persistence: "none" });
const inspect = cluster.urls.map((url) => new Redis(url));

/** Redis µs in the commands a cell sends, and its script calls, over every node. */
async function redisTotals() {
  let us = 0;
  let scripts = 0;
  for (const client of inspect) {
    const stats = await client.info("commandstats");
    for (const [, name, calls, usec] of stats.matchAll(/cmdstat_(\w+):calls=(\d+),usec=(\d+)/g)) {
      if (sent.includes(name)) us += Number(usec);
      if (name === "evalsha" || name === "eval") scripts += Number(calls);
    }
  }
  return { us, scripts };
}

try {
  for (const lib of Object.values(builds)) {
    const init = new lib.Redlock(cluster.urls);
    await init.init();
    await init.close();
  }
  const { workers, contended, pacing } = lockCells[values.cell];
  const rows = { before: [], after: [] };
  for (let rep = 0; rep < Number(values.reps); rep++) {
    for (const name of rep % 2 === 0 ? ["before", "after"] : ["after", "before"]) {
      const redis0 = await redisTotals();
      const cpu0 = process.cpuUsage();
      const contender = redquorumContender(builds[name], cluster.urls, pacing);
      const cell = await lockCell(contender, `${name}:${rep}`, workers, contended, cellMs);
      const cpu = process.cpuUsage(cpu0);
      const redis1 = await redisTotals();
      const grants = (cell.perSecond * cellMs) / 1000;
      const row = {
        grantsPerSecond: cell.perSecond,
        redisUsPerGrant: (redis1.us - redis0.us) / grants,
        scriptsPerGrant: (redis1.scripts - redis0.scripts) / grants,
        clientUsPerGrant: (cpu.user + cpu.system) / grants,
      };
      rows[name].push(row);
      console.log(
        `rep ${rep + 1} ${name.padEnd(6)} ` +
          Object.entries(row)
            .map(([k, v]) => `${k} ${v.toFixed(1)}`)
            .join("  "),
      );
    }
  }
  for (const name of ["before", "after"]) {
    const keys = Object.keys(rows[name][0]);
    console.log(
      `${values.cell} ${name} medians: ` +
        keys.map((k) => `${k} ${median(rows[name].map((r) => r[k])).toFixed(1)}`).join("  "),
    );
  }
} finally {
  for (const client of inspect) client.disconnect();
  await cluster.stop();
}
