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
import { spawn } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
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
export const mutants = [
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
    tests: ["test/integration/quarantine.test.ts"],
  },
  {
    name: "fence-equal",
    bug: "a node accepts a fencing proposal equal to its counter",
    file: "src/fencing/scripts.ts",
    find: "return current, less(current, proposal) and",
    replace: "return current, not less(proposal, current) and",
    tests: ["test/integration/fencing.test.ts"],
  },
  {
    name: "id-minority",
    bug: "an ID round is won by a minority of nodes",
    file: "src/id/range-rounds.ts",
    find: "if (round.yesCount < quorum) {",
    replace: "if (round.yesCount < 1) {",
    tests: ["test/integration/next-id.test.ts"],
  },
  {
    name: "release-any-value",
    bug: "a release deletes the key whoever holds it",
    file: "src/lock/scripts.ts",
    find: "if redis.call('get', KEYS[i]) == ARGV[1] then",
    replace: "if redis.call('exists', KEYS[i]) == 1 then",
    tests: ["test/integration/lock.test.ts"],
  },
  {
    name: "validity-unchecked",
    bug: "an acquire returns a lock whose validity ran out during its round",
    file: "src/lock/attempt.ts",
    find: "const valid = validUntil > options.clock.now();",
    replace: "const valid = true;",
    tests: ["test/integration/lock.test.ts"],
  },
  {
    name: "fence-one-node",
    bug: "a fencing token is committed when one node accepted it",
    file: "src/fencing/issuer.ts",
    find: "if (tally.accepted[i]! >= this.context.group.quorum) {",
    replace: "if (tally.accepted[i]! >= 1) {",
    tests: ["test/integration/fencing.test.ts"],
  },
  {
    name: "id-equal",
    bug: "an ID node accepts a proposal equal to its counter",
    file: "src/id/counter.ts",
    find: "if less(current, ARGV[1]) then",
    replace: "if not less(ARGV[1], current) then",
    tests: ["test/integration/next-id.test.ts"],
  },
];

/** What a scratch copy needs to run the tests: everything but the build, the VCS and the outputs. */
const copied = ["src", "test", "scripts", "package.json", "tsconfig.json", "biome.json"];

function usage(message) {
  if (message) process.stderr.write(`${message}\n`);
  process.stderr.write(
    "usage: node scripts/mutants.mjs [--only NAME[,NAME…]] [--list] [--prepare NAME] [--keep]\n",
  );
  process.exit(2);
}

/** Applies one mutant to the file under `dir`; throws unless its text is there exactly once. */
export function plant(dir, mutant) {
  const path = join(dir, mutant.file);
  const text = readFileSync(path, "utf8");
  const count = text.split(mutant.find).length - 1;
  if (count !== 1) {
    throw new Error(
      `mutant ${mutant.name}: ${JSON.stringify(mutant.find)} found ${count} times in ${mutant.file} ` +
        "(expected once): the source changed, update the mutant in scripts/mutants.mjs",
    );
  }
  writeFileSync(path, text.replace(mutant.find, mutant.replace));
}

function scratchCopy(mutant) {
  const dir = mkdtempSync(join(tmpdir(), `redquorum-mutant-${mutant.name}-`));
  for (const entry of copied) {
    if (existsSync(join(root, entry)))
      cpSync(join(root, entry), join(dir, entry), { recursive: true });
  }
  symlinkSync(join(root, "node_modules"), join(dir, "node_modules"), "dir");
  plant(dir, mutant);
  return dir;
}

/** Whether this checkout's runner stops at the first failing file. */
const runnerBails = readFileSync(join(root, "scripts/run-tests.mjs"), "utf8").includes("--bail");

/** Runs the runner on `files` in `dir`; resolves with its exit code and output. */
function runTests(dir, files) {
  return new Promise((done) => {
    const args = ["scripts/run-tests.mjs", ...(runnerBails ? ["--bail"] : []), ...files];
    const child = spawn(process.execPath, args, {
      cwd: dir,
      env: { ...process.env, REDQUORUM_TEST_SCALE: "fast", FORCE_COLOR: "0", NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk) => {
      output += chunk;
    });
    child.stderr.on("data", (chunk) => {
      output += chunk;
    });
    child.on("close", (code, signal) => done({ code: code ?? (signal ? 1 : 0), output }));
  });
}

/** The first failing test the output names (TAP's "not ok", or the spec reporter's ✖). */
function firstFailure(output) {
  for (const line of output.split("\n")) {
    const tap = /^\s*not ok \d+ - (.+?)\s*(#.*)?$/.exec(line);
    if (tap) return tap[1];
    const spec = /^\s*✖ (.+?)(?: \(\d+(?:\.\d+)?m?s\))?$/.exec(line);
    if (spec && !/failing tests/.test(spec[1])) return spec[1];
  }
  return "(no test named in the output)";
}

/** Runs `mutant`'s test files until one fails; the verdict. */
async function hunt(mutant, keep) {
  const started = performance.now();
  let dir;
  try {
    dir = scratchCopy(mutant);
  } catch (error) {
    return { mutant, status: "not planted", detail: error.message, seconds: 0 };
  }
  try {
    const batches = runnerBails ? [mutant.tests] : mutant.tests.map((file) => [file]);
    for (const files of batches) {
      const { code, output } = await runTests(dir, files);
      if (code !== 0) {
        const file = files.length === 1 ? files[0] : failingFile(output, files);
        const seconds = (performance.now() - started) / 1000;
        return { mutant, status: "caught", detail: `${file}: ${firstFailure(output)}`, seconds };
      }
    }
    const seconds = (performance.now() - started) / 1000;
    return { mutant, status: "SURVIVED", detail: `passed ${mutant.tests.join(", ")}`, seconds };
  } finally {
    if (keep) process.stdout.write(`kept ${dir}\n`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

/** With a bailing runner: the file the first failure belongs to, as far as the output tells. */
function failingFile(output, files) {
  const named = files.filter((file) => output.includes(file));
  return named.length === 1 ? named[0] : files.join(" | ");
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
    process.stdout.write(`${scratchCopy(mutant)}\n`);
    return 0;
  }
  const selected = values.only
    ? values.only
        .split(",")
        .map((name) => byName.get(name) ?? usage(`--only: no mutant ${name} (see --list)`))
    : mutants;
  const started = performance.now();
  const results = [];
  for (const mutant of selected) {
    process.stdout.write(`${mutant.name}: ${mutant.bug} …\n`);
    const result = await hunt(mutant, values.keep);
    results.push(result);
    process.stdout.write(`  ${result.status} (${result.seconds.toFixed(1)} s): ${result.detail}\n`);
  }
  const rows = results.map((r) => [r.mutant.name, r.status, r.detail, `${r.seconds.toFixed(1)}`]);
  const widths = [0, 1, 2].map((c) => Math.max(...rows.map((row) => row[c].length), 7));
  process.stdout.write(
    `\n${pad("mutant", widths[0])}  ${pad("verdict", widths[1])}  ${pad("caught by", Math.min(widths[2], 100))}  seconds\n`,
  );
  for (const [name, status, detail, seconds] of rows) {
    process.stdout.write(
      `${pad(name, widths[0])}  ${pad(status, widths[1])}  ${pad(detail, Math.min(widths[2], 100))}  ${seconds}\n`,
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
