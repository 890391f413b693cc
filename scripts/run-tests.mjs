// Runs the test files, each in its own Node process (node:test, with the
// tsx loader: Node 20 cannot run TypeScript itself), a few side by side:
// most of a test's time is spent waiting on TTLs, restarts and timeouts,
// not on the CPU. Prints one line per file with its wall time, the output
// of the files that failed, and at the end every failed test by name with
// its first error line.
//
//   node scripts/run-tests.mjs [options] [file ...]
//
// Without files: the tier's files (see `fullOnly` below). Options:
//   --full             the full tier: every file, long harnesses at full
//                      scale (REDQUORUM_TEST_SCALE=full); default: the fast tier
//   --after-fast       with --full: leave out the files the fast tier has just
//                      run at the same scale (CI runs `npm test` first)
//   --bail             stop at the first failing file
//   --jobs N           files run side by side (default twice the cores, at most 8)
//   --test-timeout MS  bound on each test and hook (default and most 60000)
//   --file-timeout MS  bound on each file, the last resort (default 900000)
//   --verbose          print every file's output, not only failing files'
//   --name PATTERN     only the tests whose name matches (node's --test-name-pattern)
//   --slowest N        list the N slowest tests at the end
//   --cpu              also print each file's CPU time, its processes' included
//                      (needs /usr/bin/time)
//
// Tests that run the `redquorum` command use the built bundle (dist/cli.js):
// it is rebuilt first when any source is newer.
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { buildIfStale, buildIsStale } from "./build-if-stale.mjs";

/** The repository: the tests expect to run from there (their paths, the build). */
const root = join(dirname(fileURLToPath(import.meta.url)), "..");

/**
 * Files only the full tier runs: the fault matrix (every row of the fault
 * catalogue, each with its own cluster and workload processes; the fast
 * tier checks the same safety properties in the integration tests) and the
 * tests of its tools, and `fullTierFiles` below.
 */
function fullOnly(file) {
  return file.startsWith("test/faults/") || fullTierFiles.has(file);
}

/**
 * The full tier's own files outside test/faults/: the two commands that
 * start a whole local cluster, and four scenario files of restarts from
 * older data, lost witnesses, a whole-cluster power loss and short-lived
 * clients repairing restarted nodes (a minute and a half of the fast
 * tier's time between them; the fast tier keeps the same safety
 * properties in `fencing`, `fencing-floor`, `restart-quarantine`,
 * `next-id-faults` and `id-repair`, and a closing client's repairs in
 * `restart-quarantine`), so that `npm test` stays within 3 minutes on a
 * 2-core machine.
 */
const fullTierFiles = new Set([
  "test/integration/npm-start.test.ts",
  "test/integration/cli-dev.test.ts",
  "test/integration/restarted-node.test.ts",
  "test/integration/repair-witness.test.ts",
  "test/integration/power-loss.test.ts",
  "test/integration/short-lived-repair.test.ts",
]);

/** Started first (longest first, as measured here), so no long file is left to run alone at the end. */
const longFirst = [
  "test/faults/matrix.test.ts",
  "test/integration/membership.test.ts",
  "test/integration/restart-quarantine.test.ts",
  "test/integration/cli-lock.test.ts",
  "test/integration/id-server.test.ts",
  "test/integration/cli.test.ts",
  "test/integration/mutual-exclusion.test.ts",
  "test/integration/fencing.test.ts",
  "test/integration/short-lived-repair.test.ts",
  "test/integration/restarted-node.test.ts",
  "test/integration/npm-start.test.ts",
  "test/integration/next-id-faults.test.ts",
  "test/integration/repair-witness.test.ts",
  "test/integration/power-loss.test.ts",
  "test/integration/next-id.test.ts",
];

const testTimeoutMsMax = 60_000;
/** How long a stopped file gets between SIGTERM and SIGKILL. */
const stopGraceMs = 3_000;
const scales = ["fast", "full"];

function usage(message) {
  console.error(`run-tests: ${message}`);
  console.error(
    "usage: node scripts/run-tests.mjs [--full] [--after-fast] [--bail] [--jobs N] " +
      "[--test-timeout MS] [--file-timeout MS] [--verbose] [--name PATTERN] [--slowest N] [--cpu] [file ...]",
  );
  process.exit(2);
}

function parseArgs(argv) {
  const options = {
    full: false,
    afterFast: false,
    bail: false,
    // Most of a file's time is waiting: twice the cores, but not so many
    // redis-servers and clients that a small machine thrashes.
    jobs: Math.min(8, 2 * availableParallelism()),
    testTimeoutMs: testTimeoutMsMax,
    fileTimeoutMs: 900_000,
    verbose: false,
    namePattern: undefined,
    slowest: 0,
    cpu: false,
    files: [],
  };
  const integer = (flag, value, min, max) => {
    const n = Number(value);
    if (value === undefined || !Number.isSafeInteger(n) || n < min || n > max) {
      usage(`${flag} takes an integer from ${min} to ${max}, got ${value ?? "nothing"}`);
    }
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--full") options.full = true;
    else if (arg === "--after-fast") options.afterFast = true;
    else if (arg === "--bail") options.bail = true;
    else if (arg === "--verbose") options.verbose = true;
    else if (arg === "--cpu") options.cpu = true;
    else if (arg === "--name") {
      options.namePattern = argv[++i];
      if (!options.namePattern) usage("--name takes a pattern");
    } else if (arg === "--slowest") options.slowest = integer(arg, argv[++i], 1, 1_000);
    else if (arg === "--jobs") options.jobs = integer(arg, argv[++i], 1, 16);
    else if (arg === "--test-timeout")
      options.testTimeoutMs = integer(arg, argv[++i], 1, testTimeoutMsMax);
    else if (arg === "--file-timeout")
      options.fileTimeoutMs = integer(arg, argv[++i], 1_000, 3_600_000);
    else if (arg.startsWith("--")) usage(`unknown option ${arg}`);
    else options.files.push(arg);
  }
  if (options.afterFast && !options.full) usage("--after-fast goes with --full");
  if (options.afterFast && options.files.length > 0) usage("--after-fast takes no files");
  return options;
}

function find(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return find(path);
    return name.endsWith(".test.ts") ? [path] : [];
  });
}

/** Whether a file sizes its work by REDQUORUM_TEST_SCALE (it imports the scale helper). */
function readsScale(file) {
  return /from "(\.\.\/)+helpers\/scale\.js"/.test(readFileSync(file, "utf8"));
}

function tierFiles({ full, afterFast }) {
  const all = [...find("src"), ...find("test")].sort();
  if (!full) return all.filter((file) => !fullOnly(file));
  if (!afterFast) return all;
  return all.filter((file) => fullOnly(file) || readsScale(file));
}

function seconds(ms) {
  return `${(ms / 1000).toFixed(1)} s`;
}

class FileRun {
  constructor(file, options, eventsDir, index) {
    this.file = file;
    this.eventsPath = join(eventsDir, `${index}.jsonl`);
    this.output = "";
    this.start = performance.now();
    this.cpuPath = options.cpu ? join(eventsDir, `${index}.cpu`) : undefined;
    const command = [
      process.execPath,
      "--import",
      "tsx",
      "--import",
      "./scripts/test-runner/register.mjs",
      "--test-force-exit",
      ...(options.namePattern ? [`--test-name-pattern=${options.namePattern}`] : []),
      "--test-reporter=spec",
      "--test-reporter-destination=stdout",
      "--test-reporter=./scripts/test-runner/events-reporter.mjs",
      "--test-reporter-destination=stdout",
      file,
    ];
    if (this.cpuPath) command.unshift("/usr/bin/time", "-f", "%U %S", "-o", this.cpuPath);
    this.child = spawn(command[0], command.slice(1), {
      // Its own process group: a hung file is killed with the
      // redis-servers and commands it started.
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        ...process.env,
        REDQUORUM_TEST_SCALE: options.full ? "full" : "fast",
        REDQUORUM_TEST_TIMEOUT_MS: String(options.testTimeoutMs),
        REDQUORUM_TEST_EVENTS: this.eventsPath,
      },
    });
    const collect = (chunk) => {
      this.output += chunk;
    };
    this.child.stdout.on("data", collect);
    this.child.stderr.on("data", collect);
    this.timedOut = false;
    this.watchdog = setTimeout(() => {
      this.timedOut = true;
      this.kill("SIGKILL");
    }, options.fileTimeoutMs);
    this.child.on("exit", (code, signal) => {
      clearTimeout(this.watchdog);
      this.ms = performance.now() - this.start;
      this.code = code;
      this.signal = signal;
      // Whatever the file started and left running (tsx's esbuild service,
      // a process a failed test never stopped), which may also hold its
      // output pipes open.
      this.kill("SIGKILL");
    });
    this.done = new Promise((resolve) => this.child.on("close", () => resolve(this)));
  }

  /** Signals the file's process group; whether anything was left in it. */
  kill(signal) {
    try {
      process.kill(-this.child.pid, signal);
      return true;
    } catch {
      return false;
    }
  }

  /** User + system CPU seconds of the file and every process it waited for (--cpu). */
  cpuSeconds() {
    try {
      const [user, system] = readFileSync(this.cpuPath, "utf8").trim().split(/\s+/).slice(-2);
      return Number(user) + Number(system);
    } catch {
      return undefined;
    }
  }

  results() {
    try {
      return readFileSync(this.eventsPath, "utf8")
        .split("\n")
        .filter((line) => line !== "")
        .map((line) => JSON.parse(line));
    } catch {
      return [];
    }
  }
}

function summarize(run, fileTimeoutMs) {
  const results = run.results();
  // Where it failed: not the suites above a failed test, nor the tests a
  // failed hook cancelled.
  const failures = results.filter(
    (r) => !r.ok && r.kind !== "subtestsFailed" && r.kind !== "cancelledByParent",
  );
  const tests = results.filter((r) => !r.suite && !r.skipped).length;
  const problems = failures.map((r) => ({ file: run.file, name: r.name, error: r.error }));
  if (run.timedOut) {
    problems.push({
      file: run.file,
      name: "(the file)",
      error: `killed after ${seconds(fileTimeoutMs)} (--file-timeout)`,
    });
  } else if (run.code !== 0 && failures.length === 0) {
    const lastLine = run.output.trim().split("\n").at(-1) ?? "";
    problems.push({
      file: run.file,
      name: "(the file)",
      error: `exited with ${run.signal ?? `code ${run.code}`}: ${lastLine}`,
    });
  }
  const timed = results
    .filter((r) => !r.suite && !r.skipped)
    .map((r) => ({ file: run.file, name: r.name, ms: r.ms ?? 0 }));
  return { tests, problems, timed };
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  options.files = options.files.map((file) => relative(root, resolve(file)));
  process.chdir(root);
  const fromEnv = process.env.REDQUORUM_TEST_SCALE;
  if (fromEnv !== undefined && fromEnv !== "" && !scales.includes(fromEnv)) {
    usage(`REDQUORUM_TEST_SCALE must be one of ${scales.join(", ")}, got ${fromEnv}`);
  }
  // The variable picks the scale (and tier) as --full does.
  if (fromEnv === "full") options.full = true;
  const files = options.files.length > 0 ? options.files : tierFiles(options);
  const queue = [
    ...longFirst.filter((file) => files.includes(file)),
    ...files.filter((file) => !longFirst.includes(file)),
  ];
  if (buildIsStale()) {
    console.log("run-tests: dist/ is older than the sources: npm run build");
    buildIfStale();
  }

  const tier = options.files.length > 0 ? "" : options.full ? " (full tier)" : " (fast tier)";
  console.log(
    `run-tests: ${queue.length} files${tier}, scale ${options.full ? "full" : "fast"}, ` +
      `${options.jobs} at a time, each test at most ${seconds(options.testTimeoutMs)}`,
  );
  const eventsDir = mkdtempSync(join(tmpdir(), "redquorum-test-events-"));
  const running = new Set();
  const problems = [];
  const times = [];
  const timed = [];
  let tests = 0;
  let stopping = false;
  let next = 0;
  const start = performance.now();

  const stopAll = (signal) => {
    for (const run of running) run.kill(signal);
  };
  // SIGTERM first: a test process then stops its local clusters, which give
  // back their claims on ports (src/cluster/port-claims.ts); a SIGKILL
  // leaves the claims behind. What is still running after the grace gets
  // SIGKILL. Resolves then, or once every file has ended.
  const stopGracefully = async () => {
    stopAll("SIGTERM");
    let timer;
    await Promise.race([
      Promise.all([...running].map((run) => run.done)),
      new Promise((resolveGrace) => {
        timer = setTimeout(resolveGrace, stopGraceMs);
      }),
    ]);
    clearTimeout(timer);
    stopAll("SIGKILL");
  };
  // Set once a signal began stopping the run.
  let interrupted;
  // Each file runs in a process group of its own (see FileRun), which a
  // terminal's Ctrl-C does not reach: whatever ends this process ends them.
  process.on("exit", () => stopAll("SIGKILL"));
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
    process.on(signal, () => {
      // A second signal: at once.
      if (interrupted) process.exit(130);
      stopping = true;
      for (const run of running) run.stopped = signal;
      interrupted = stopGracefully().then(() => {
        rmSync(eventsDir, { recursive: true, force: true });
        process.exit(130);
      });
    });
  }
  // A reader of this output that went away (`| head`) must not crash the run into orphans.
  process.stdout.on("error", () => {});

  await new Promise((resolveAll) => {
    const launch = () => {
      while (!stopping && running.size < options.jobs && next < queue.length) {
        const run = new FileRun(queue[next], options, eventsDir, next);
        next += 1;
        running.add(run);
        run.done.then(finish);
      }
      if (running.size === 0) resolveAll();
    };
    const finish = (run) => {
      running.delete(run);
      if (run.stopped) {
        console.log(`- ${seconds(run.ms).padStart(8)}  ${run.file} (stopped by ${run.stopped})`);
        launch();
        return;
      }
      const summary = summarize(run, options.fileTimeoutMs);
      tests += summary.tests;
      timed.push(...summary.timed);
      times.push({ file: run.file, ms: run.ms });
      const failed = summary.problems.length > 0;
      if (failed || options.verbose) process.stdout.write(`\n${run.output}\n`);
      const mark = failed ? "✖" : "✔";
      const note = failed ? `, ${summary.problems.length} failed` : "";
      const cpu = run.cpuPath ? `, ${run.cpuSeconds()?.toFixed(1) ?? "?"} s CPU` : "";
      console.log(
        `${mark} ${seconds(run.ms).padStart(8)}  ${run.file} (${summary.tests} tests${note}${cpu})`,
      );
      problems.push(...summary.problems);
      if (failed && options.bail && !stopping) {
        stopping = true;
        console.log("run-tests: --bail: stopping at the first failing file");
        for (const other of running) other.stopped = "--bail";
        void stopGracefully();
      }
      launch();
    };
    launch();
  });
  // A signal's stop ends the process itself.
  if (interrupted) await interrupted;
  rmSync(eventsDir, { recursive: true, force: true });

  const wall = performance.now() - start;
  const notRun = queue.length - times.length;
  console.log(
    `\nrun-tests: ${times.length} files, ${tests} tests in ${seconds(wall)}` +
      (notRun > 0 ? ` (${notRun} files not run)` : ""),
  );
  if (options.slowest > 0) {
    console.log(`run-tests: the ${options.slowest} slowest tests:`);
    for (const t of timed.sort((a, b) => b.ms - a.ms).slice(0, options.slowest)) {
      console.log(`  ${seconds(t.ms).padStart(8)}  ${t.file}: ${t.name}`);
    }
  }
  if (problems.length === 0) {
    console.log("run-tests: all passed");
    process.exit(notRun > 0 ? 1 : 0);
  }
  console.log(`run-tests: ${problems.length} failed:`);
  for (const p of problems) console.log(`  ${p.file}: ${p.name}\n      ${p.error}`);
  process.exit(1);
}

await main();
