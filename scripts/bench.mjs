// `npm run bench`: installs the benchmark's own dependencies (the other
// Redlock libraries, kept out of the library's package.json) when missing,
// then runs the benchmark. Arguments are passed through.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";

const run = (command, args) => {
  const result = spawnSync(command, args, { stdio: "inherit" });
  if (result.status !== 0) process.exit(result.status ?? 1);
};
if (!existsSync("bench/node_modules/redlock")) {
  run("npm", ["ci", "--prefix", "bench", "--no-audit", "--no-fund"]);
}
run(process.execPath, ["bench/locks.mjs", ...process.argv.slice(2)]);
