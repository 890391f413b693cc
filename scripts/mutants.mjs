// Plants known bugs in src/, one at a time, each in a scratch copy of the
// checkout (never the working tree), and runs a few fast-tier test files
// against it: every mutant must make one of them fail. A mutant is an exact
// text replacement in a named file; if its text is no longer there (a
// refactor moved it), the run fails instead of silently testing nothing.
//
//   npm run mutants                      every mutant
//   npm run mutants -- --only fence-equal,id-minority
//   npm run mutants -- --list            the mutants and their test files
//   npm run mutants -- --prepare NAME    make the mutated copy, print its path, run nothing
//
// Exit code 0 when every mutant was caught, 1 when one survived or could
// not be planted, 2 on a usage error.
import { spawn, spawnSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/**
 * Each mutant: the file, the exact text to replace (found exactly once) and
 * its replacement, and the test files that must catch it, fastest first.
 */
const mutants = [
  {
    name: "majority-to-1",
    bug: "a lock is granted on 1 vote instead of a majority",
    file: "src/lock/attempt.ts",
    find: "const majority = round.yesCount >= group.quorum;",
    replace: "const majority = round.yesCount >= 1;",
    tests: ["test/integration/mutual-exclusion.test.ts"],
  },
  {
    name: "quarantine-ignored",
    bug: "a node in the restart quarantine votes as if it were not",
    file: "src/node/node-state.ts",
    find: "local waits = tonumber(quarantineArg) > 0",
    replace: "local waits = false",
    tests: ["test/integration/faults.test.ts", "test/integration/observe.test.ts"],
  },
  {
    name: "fence-equal",
    bug: "a node accepts a fencing proposal equal to its counter",
    file: "src/fencing/scripts.ts",
    find: "return current, less(current, proposal) and",
    replace: "return current, not less(proposal, current) and",
    tests: ["test/integration/mutual-exclusion.test.ts"],
  },
  {
    name: "id-minority",
    bug: "an ID round is won by a minority of nodes",
    file: "src/id/range-rounds.ts",
    find: "if (round.yesCount < quorum) {",
    replace: "if (round.yesCount < 1) {",
    tests: ["test/integration/id-repair.test.ts"],
  },
  {
    name: "release-any-value",
    bug: "a release deletes the key whoever holds it",
    file: "src/lock/release-script.ts",
    find: "if redis.call('get', KEYS[i]) == ARGV[1] then",
    replace: "if redis.call('exists', KEYS[i]) == 1 then",
    tests: ["test/integration/lock.test.ts", "test/integration/attempt-undo.test.ts"],
  },
  {
    name: "validity-unchecked",
    bug: "an acquire returns a lock whose validity ran out during its round",
    file: "src/lock/attempt.ts",
    find: "const valid = validUntil > options.clock.now();",
    replace: "const valid = true;",
    tests: ["test/integration/lock.test.ts", "test/integration/lock-overlap.test.ts"],
  },
  {
    name: "fence-one-node",
    bug: "a fencing token is committed when one node accepted it",
    file: "src/fencing/issuer.ts",
    find: "if (tally.accepted[i]! >= this.context.group.quorum) {",
    replace: "if (tally.accepted[i]! >= 1) {",
    tests: ["test/integration/fencing-rolling-restart.test.ts"],
  },
  {
    name: "id-equal",
    bug: "an ID node accepts a proposal equal to its counter",
    file: "src/id/counter.ts",
    find: "if less(current, ARGV[1]) then",
    replace: "if not less(ARGV[1], current) then",
    tests: ["test/integration/next-id-faults.test.ts"],
  },
];

/**
 * What a scratch copy takes from the checkout (node_modules is linked).
 * dist/ is copied with its times, and a mutated file keeps its old time,
 * so the test runner does not rebuild: the files named above import the
 * library from src/ (the mutant), none runs the built command.
 */
const copied = [
  "src",
  "test",
  "scripts",
  "dist",
  "package.json",
  "package-lock.json",
  "tsconfig.json",
  "tsup.config.ts",
  "biome.json",
];

/** Bound on one mutant's test run (its files together); past it the run is stopped. */
const runTimeoutMs = 300_000;

/** The scratch copies and test runs alive now: Ctrl-C removes and stops them. */
const live = { dirs: new Set(), children: new Set() };
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    for (const child of live.children) stopGroup(child, { now: true });
    for (const dir of live.dirs) rmSync(dir, { recursive: true, force: true });
    process.exit(130);
  });
}

/**
 * Stops a detached child's whole process group (the runner and its test
 * processes): SIGTERM first, so that each test process stops its local
 * clusters and gives back their ports (cluster/local-cluster.ts), then
 * SIGKILL for what is left after `stopGraceMs`. `now`: at once (this
 * process is exiting, and no timer of it would fire).
 */
function stopGroup(child, { now = false } = {}) {
  signalGroup(child, now ? "SIGKILL" : "SIGTERM");
  if (!now) setTimeout(() => signalGroup(child, "SIGKILL"), stopGraceMs).unref();
}

/** Time a test run gets between SIGTERM and SIGKILL: more than the runner gives its files (3 s). */
const stopGraceMs = 5_000;

function signalGroup(child, signal) {
  try {
    process.kill(-child.pid, signal);
  } catch {
    // already gone
  }
}

function usage(message) {
  if (message) process.stderr.write(`${message}\n`);
  process.stderr.write(
    "usage: node scripts/mutants.mjs [--only NAME[,NAME…]] [--list] [--prepare NAME] [--keep]\n",
  );
  process.exit(2);
}

/** Applies one mutant to the file under `dir`; throws unless its text is there exactly once. */
function plant(dir, mutant) {
  const path = join(dir, mutant.file);
  const text = readFileSync(path, "utf8");
  const count = text.split(mutant.find).length - 1;
  if (count !== 1) {
    throw new Error(
      `mutant ${mutant.name}: ${JSON.stringify(mutant.find)} found ${count} times in ${mutant.file} ` +
        "(expected once): the source changed, update the mutant in scripts/mutants.mjs",
    );
  }
  const { atime, mtime } = statSync(path);
  writeFileSync(path, text.replace(mutant.find, mutant.replace));
  utimesSync(path, atime, mtime);
}

/** A scratch copy of the checkout with `mutant` planted (throws if it cannot be). */
function scratchCopy(mutant) {
  const dir = mkdtempSync(join(tmpdir(), `redquorum-mutant-${mutant.name}-`));
  live.dirs.add(dir);
  try {
    for (const entry of copied) {
      if (!existsSync(join(root, entry))) continue;
      cpSync(join(root, entry), join(dir, entry), { recursive: true, preserveTimestamps: true });
    }
    symlinkSync(join(root, "node_modules"), join(dir, "node_modules"), "dir");
    plant(dir, mutant);
    return dir;
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    live.dirs.delete(dir);
    throw error;
  }
}

/** Whether this checkout's runner stops at the first failing file. */
const runnerBails = readFileSync(join(root, "scripts/run-tests.mjs"), "utf8").includes("--bail");

/** Runs the runner on `files` in `dir`: its exit code, output, and whether it was stopped. */
function runTests(dir, files) {
  return new Promise((done) => {
    const args = ["scripts/run-tests.mjs", ...(runnerBails ? ["--bail"] : []), ...files];
    const child = spawn(process.execPath, args, {
      cwd: dir,
      env: { ...process.env, REDQUORUM_TEST_SCALE: "fast", FORCE_COLOR: "0", NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true, // its own process group: a stop reaches the test processes too
    });
    live.children.add(child);
    let output = "";
    let stopped = false;
    // The first failing test is the verdict: the rest of the run is not
    // waited for (a test that fails may leave its file unable to exit).
    const collect = (chunk) => {
      output += chunk;
      if (!stopped && failedIn(output)) {
        stopped = true;
        setTimeout(() => stopGroup(child), 200); // the rest of the failure's lines
      }
    };
    child.stdout.on("data", collect);
    child.stderr.on("data", collect);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      stopGroup(child);
    }, runTimeoutMs);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      live.children.delete(child);
      done({ code: code ?? (signal ? 1 : 0), output, timedOut });
    });
  });
}

/** Whether the runner's output reports a failed test (TAP, spec reporter, or its own list). */
function failedIn(output) {
  return /^\s*not ok \d+ - |^run-tests: \d+ failed:|^\s*✖ /m.test(output);
}

/**
 * The first failing test the output names, with its file when it says:
 * the runner's closing list ("file: test"), else TAP's "not ok" or the
 * spec reporter's ✖ (the innermost test comes first).
 */
function firstFailure(output, files) {
  const lines = output.split("\n");
  const summary = lines.findIndex((line) => /^run-tests: \d+ failed:/.test(line));
  if (summary >= 0 && lines[summary + 1]) return lines[summary + 1].trim();
  const named = files.filter((file) => output.includes(`${file}`));
  const file = files.length === 1 ? files[0] : named.length === 1 ? named[0] : files.join(" | ");
  for (const line of lines) {
    const tap = /^\s*not ok \d+ - (.+?)\s*(#.*)?$/.exec(line);
    if (tap) return `${file}: ${tap[1]}`;
    const spec = /^\s*✖ (.+?)(?: \(\d+(?:\.\d+)?m?s\))?$/.exec(line);
    if (spec && !/failing tests/.test(spec[1])) return `${file}: ${spec[1]}`;
  }
  return `${file}: (no test named in the output)`;
}

/** Runs `mutant`'s test files until one fails; the verdict. */
async function hunt(mutant, keep) {
  const started = performance.now();
  const elapsed = () => (performance.now() - started) / 1000;
  let dir;
  try {
    dir = scratchCopy(mutant);
  } catch (error) {
    return { mutant, status: "NOT PLANTED", detail: error.message, seconds: 0 };
  }
  try {
    // A runner that bails takes the files together (side by side, the
    // first failure stops the rest); else one file at a time.
    const batches = runnerBails ? [mutant.tests] : mutant.tests.map((file) => [file]);
    for (const files of batches) {
      const { code, output, timedOut } = await runTests(dir, files);
      const failed = failedIn(output);
      if (timedOut && !failed) {
        return {
          mutant,
          status: "TIMED OUT",
          detail: `${files.join(", ")}: no failure within ${runTimeoutMs / 1000} s`,
          seconds: elapsed(),
        };
      }
      if (code !== 0 || failed) {
        return {
          mutant,
          status: "caught",
          detail: firstFailure(output, files),
          seconds: elapsed(),
        };
      }
    }
    return {
      mutant,
      status: "SURVIVED",
      detail: `passed ${mutant.tests.join(", ")}`,
      seconds: elapsed(),
    };
  } finally {
    if (keep) process.stdout.write(`kept ${dir}\n`);
    else rmSync(dir, { recursive: true, force: true });
    live.dirs.delete(dir);
  }
}

function pad(text, width) {
  return String(text).padEnd(width);
}

async function main() {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        only: { type: "string" },
        list: { type: "boolean" },
        prepare: { type: "string" },
        keep: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    }));
  } catch (error) {
    usage(error.message);
  }
  if (values.help) usage();
  const byName = new Map(mutants.map((m) => [m.name, m]));
  if (values.list) {
    for (const m of mutants) {
      process.stdout.write(
        `${pad(m.name, 20)} ${m.file}: ${m.bug}\n${" ".repeat(21)}${m.tests.join(", ")}\n`,
      );
    }
    return 0;
  }
  if (values.prepare) {
    const mutant = byName.get(values.prepare);
    if (!mutant) usage(`--prepare: no mutant ${values.prepare} (see --list)`);
    const dir = scratchCopy(mutant);
    live.dirs.delete(dir); // kept: the caller removes it
    process.stdout.write(`${dir}\n`);
    return 0;
  }
  const selected = values.only
    ? values.only
        .split(",")
        .map((name) => byName.get(name) ?? usage(`--only: no mutant ${name} (see --list)`))
    : mutants;
  // The runner rebuilds a stale dist/ before it runs tests: once here,
  // not in every scratch copy (which takes dist/ as it is).
  const builder = join(root, "scripts/build-if-stale.mjs");
  if (existsSync(builder)) {
    const build = spawnSync(process.execPath, [builder], { cwd: root, stdio: "inherit" });
    if (build.status !== 0) return 1;
  }
  const started = performance.now();
  const results = [];
  for (const mutant of selected) {
    process.stdout.write(`${mutant.name}: ${mutant.bug} …\n`);
    const result = await hunt(mutant, values.keep);
    results.push(result);
    process.stdout.write(`  ${result.status} (${result.seconds.toFixed(1)} s): ${result.detail}\n`);
  }
  const clip = (text, width) => (text.length > width ? `${text.slice(0, width - 1)}…` : text);
  const rows = results.map((r) => [
    r.mutant.name,
    r.status,
    clip(r.detail, 110),
    r.seconds.toFixed(1),
  ]);
  const header = ["mutant", "verdict", "caught by (file: test), or why not", "seconds"];
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((row) => row[c].length)));
  process.stdout.write("\n");
  for (const row of [header, ...rows]) {
    process.stdout.write(
      `${row
        .map((cell, c) => pad(cell, widths[c]))
        .join("  ")
        .trimEnd()}\n`,
    );
  }
  const total = (performance.now() - started) / 1000;
  const failed = results.filter((r) => r.status !== "caught");
  process.stdout.write(
    `\n${results.length - failed.length} of ${results.length} mutants caught in ${total.toFixed(0)} s` +
      (failed.length > 0 ? `; not caught: ${failed.map((r) => r.mutant.name).join(", ")}` : "") +
      "\n",
  );
  return failed.length === 0 ? 0 : 1;
}

process.exitCode = await main();
