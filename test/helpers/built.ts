/**
 * The built package (dist/), for tests that start processes: the
 * `redquorum` command as a user runs it, and scripts importing the library,
 * each started by plain node in ~0.1 s instead of ~1 s of tsx compiling the
 * source. scripts/run-tests.mjs builds dist/ first when it is stale; a test
 * run some other way fails at once on a stale build instead of testing
 * yesterday's code.
 */
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../../", import.meta.url));

/** dist/cli.js: run it as `node <cliPath> <args>`. */
export const cliPath = join(root, "dist/cli.js");

/** dist/index.js as a module specifier, for `import { … } from "<libraryUrl>"` in a child's script. */
export const libraryUrl = new URL("../../dist/index.js", import.meta.url).href;

function newestMtimeMs(path: string): number {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(0, ...readdirSync(path).map((name) => newestMtimeMs(join(path, name))));
}

/** Throws unless dist/ exists and is newer than every source file. */
export function requireFreshBuild(): void {
  let builtMs: number;
  try {
    builtMs = Math.min(statSync(cliPath).mtimeMs, statSync(join(root, "dist/index.js")).mtimeMs);
  } catch {
    throw new Error("dist/ is missing: run `npm run build` (scripts/run-tests.mjs builds it)");
  }
  if (newestMtimeMs(join(root, "src")) >= builtMs) {
    throw new Error(
      "dist/ is older than src/: run `npm run build` (scripts/run-tests.mjs rebuilds it when stale)",
    );
  }
}

requireFreshBuild();
