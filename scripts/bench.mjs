// `npm run bench`: installs the benchmark's own dependencies (the other
// Redlock libraries, kept out of the library's package.json) when missing,
// then runs the lock and ID benchmarks.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";

const run = (command, args) => {
  const result = spawnSync(command, args, { stdio: "inherit" });
  if (result.status !== 0) process.exit(result.status ?? 1);
};
if (!existsSync("bench/node_modules/redlock")) {
  run("npm", ["ci", "--prefix", "bench", "--no-audit", "--no-fund"]);
}
// `npm run bench -- locks` or `-- ids` runs one; the rest of the arguments go to it.
const [first, ...rest] = process.argv.slice(2);
const only = first === "locks" || first === "ids" ? first : undefined;
const args = only ? rest : process.argv.slice(2);
for (const name of only ? [only] : ["locks", "ids"]) {
  run(process.execPath, [`bench/${name}.mjs`, ...args]);
}
