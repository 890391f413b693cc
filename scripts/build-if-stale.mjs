// Builds dist/ (`npm run build`) unless it is newer than every source it
// is built from. `npm start` and scripts/run-tests.mjs run it: a second
// start, or a test run, does not rebuild what has not changed (and a
// rebuild, which empties dist/ first, never runs under running tests).
import { spawnSync } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const sources = ["src", "package.json", "package-lock.json", "tsup.config.ts", "tsconfig.json"];
const outputs = ["dist/cli.js", "dist/index.js", "dist/index.cjs", "dist/index.d.ts"];

function newestMtimeMs(path) {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(0, ...readdirSync(path).map((name) => newestMtimeMs(join(path, name))));
}

/** Whether dist/ lacks a file or is older than a source. */
export function buildIsStale() {
  let builtMs;
  try {
    builtMs = Math.min(...outputs.map((file) => statSync(join(root, file)).mtimeMs));
  } catch {
    return true;
  }
  return Math.max(...sources.map((path) => newestMtimeMs(join(root, path)))) >= builtMs;
}

/** Builds if stale; exits the process with the build's status if it fails. */
export function buildIfStale() {
  if (!buildIsStale()) return;
  const result = spawnSync("npm", ["run", "build", "--silent"], { cwd: root, stdio: "inherit" });
  if (result.status !== 0) {
    console.error("the build failed (npm run build)");
    process.exit(result.status ?? 1);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) buildIfStale();
