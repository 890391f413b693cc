// Runs every test file under node:test with the tsx loader (Node 20 cannot
// run TypeScript itself, and its --test does not expand globs).
import { spawnSync } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";

function find(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return find(path);
    return name.endsWith(".test.ts") ? [path] : [];
  });
}

const only = process.argv.slice(2);
const files = only.length > 0 ? only : [...find("src"), ...find("test")].sort();
const result = spawnSync(
  process.execPath,
  ["--import", "tsx", "--test", "--test-concurrency=1", "--test-timeout=300000", ...files],
  { stdio: "inherit" },
);
process.exit(result.status ?? 1);
