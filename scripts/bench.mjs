// `npm run bench`: installs the benchmark's own dependencies (the other
// Redlock libraries and autocannon, kept out of the library's package.json)
// when missing, then runs the summary (bench/summary.mjs: the lock and ID cases beside
// node-redlock and the floors, in one table), the lock, ID and ID server
// benchmarks, and the contention benchmark.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";

const run = (command, args) => {
  const result = spawnSync(command, args, { stdio: "inherit" });
  if (result.status !== 0) process.exit(result.status ?? 1);
};
if (!existsSync("bench/node_modules/redlock") || !existsSync("bench/node_modules/autocannon")) {
  run("npm", ["ci", "--prefix", "bench", "--no-audit", "--no-fund"]);
}
// `npm run bench -- summary`, `-- locks`, `-- ids`, `-- server` or `-- contention` runs one; the rest of the
// arguments go to it. Without a name, every benchmark gets all the arguments.
const benchmarks = {
  summary: "bench/summary.mjs",
  locks: "bench/locks.mjs",
  ids: "bench/ids.mjs",
  server: "bench/id-server.mjs",
  contention: "bench/contention.mjs",
};
const [first, ...rest] = process.argv.slice(2);
const only = Object.hasOwn(benchmarks, first) ? first : undefined;
const args = only ? rest : process.argv.slice(2);
for (const name of only ? [only] : Object.keys(benchmarks)) {
  run(process.execPath, [benchmarks[name], ...args]);
}
