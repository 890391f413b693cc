// Benchmark worker processes, the coordinator's side: a worker script is
// started with its JSON config as argv[2], prints "ready" once connected
// and warmed up, starts on a "go" line on stdin, stops on a "stop" line and
// prints one JSON line with its results (bench/contention-worker.mjs,
// bench/ids-worker.mjs).
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

/** Starts bench/`script` with `config`: { child, ready, result } (promises for "ready" and the JSON line). */
export function startWorker(script, config) {
  const child = spawn(
    process.execPath,
    [
      // BENCH_WORKER_NODE_ARGS="--cpu-prof --cpu-prof-dir=prof" profiles every worker.
      ...(process.env.BENCH_WORKER_NODE_ARGS?.split(" ").filter(Boolean) ?? []),
      join(here, script),
      JSON.stringify(config),
    ],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  // A worker that died: "mark" or "stop" written to it later must not be an
  // unhandled EPIPE (its missing results say what happened).
  child.stdin.on("error", () => {});
  const lines = createInterface({ input: child.stdout });
  const ready = new Promise((resolve, reject) => {
    lines.on("line", (line) => {
      if (line === "ready") resolve();
    });
    // Its output read to the end (the child's "exit" can come before the
    // last lines are read from the pipe).
    lines.once("close", () =>
      reject(new Error(`${script} ended its output before ready (exit code ${child.exitCode})`)),
    );
  });
  const result = new Promise((resolve, reject) => {
    lines.on("line", (line) => {
      if (line.startsWith("{")) resolve(JSON.parse(line));
    });
    // Resolved already if it printed its results; else it died without
    // them. On the end of its output, not on its exit: a large result line
    // may still be in the pipe when "exit" comes (that rejected runs whose
    // worker had printed its results).
    lines.once("close", () =>
      reject(new Error(`${script} ended its output without results (exit code ${child.exitCode})`)),
    );
  });
  // Awaited only after the cell: a worker that dies sooner must not be an
  // unhandled rejection (which would end the run before the cluster stops).
  ready.catch(() => {});
  result.catch(() => {});
  return { child, ready, result };
}

/**
 * The contention benchmark's workers (bench/contention-worker.mjs): the
 * `contenders` spread evenly over `procs` processes, each contender with
 * its place in the fair floor's ring. `cell`: library, urls, resource,
 * ttlMs, pacing, holdMs.
 */
export function startContenders(cell, contenders, procs) {
  const perProc = Array.from(
    { length: procs },
    (_, i) => Math.floor(contenders / procs) + (i < contenders % procs ? 1 : 0),
  );
  return perProc.map((instances, p) =>
    startWorker("contention-worker.mjs", {
      ...cell,
      instances,
      firstContender: perProc.slice(0, p).reduce((a, b) => a + b, 0),
      contenders,
    }),
  );
}

/** Resolves once every worker exited, or after `boundMs`. */
function exited(workers, boundMs) {
  const exits = workers.map((w) =>
    w.child.exitCode === null ? new Promise((r) => w.child.once("exit", r)) : undefined,
  );
  let timer;
  const bound = new Promise((r) => {
    timer = setTimeout(r, boundMs);
  });
  return Promise.race([Promise.all(exits), bound]).finally(() => clearTimeout(timer));
}

/**
 * Runs one cell over started workers: waits until all are ready, sends "go",
 * waits `cellMs`, sends "stop", and resolves with their results and the
 * elapsed time. `between` ({ before, after }) runs right before the counted
 * time starts and right after "stop" (counters read on the nodes). With
 * `warmupMs`, the workers run that long before the counted time and are
 * then sent "mark", where they start counting afresh (workerProtocol's
 * `onMark`): a worker's first seconds are its JIT compiling the code the
 * workload runs, which a long-lived process pays once.
 */
export async function runWorkers(workers, cellMs, between = {}, warmupMs = 0) {
  try {
    await Promise.all(workers.map((w) => w.ready));
    if (warmupMs > 0) {
      for (const w of workers) w.child.stdin.write("go\n");
      await new Promise((r) => setTimeout(r, warmupMs));
    }
    const before = await between.before?.();
    const start = performance.now();
    for (const w of workers) w.child.stdin.write(warmupMs > 0 ? "mark\n" : "go\n");
    await new Promise((r) => setTimeout(r, cellMs));
    for (const w of workers) w.child.stdin.write("stop\n");
    const elapsedMs = performance.now() - start;
    const after = await between.after?.();
    const results = await Promise.all(workers.map((w) => w.result));
    return { results, elapsedMs, before, after };
  } finally {
    // Profiled workers (BENCH_WORKER_NODE_ARGS) write their profiles as they
    // exit, after their results: given a few seconds to finish, or they
    // were killed with nothing written.
    if (process.env.BENCH_WORKER_NODE_ARGS) await exited(workers, 10_000);
    // Those that reported have exited; any other is not left running.
    for (const w of workers) {
      w.child.stdin.end();
      if (w.child.exitCode === null) w.child.kill("SIGKILL");
    }
  }
}

/**
 * The worker's side: resolves on "go"; `onMark` runs on "mark" (the
 * warm-up is over: count afresh from here); `onStop` runs on "stop" and
 * returns the results, which are printed as one JSON line before the
 * process exits.
 */
export function workerProtocol(onStop, onMark = () => {}) {
  const lines = createInterface({ input: process.stdin });
  lines.on("line", (line) => {
    if (line === "mark") onMark();
    if (line !== "stop") return;
    // Exit once the line is out: a large result does not fit the pipe at once.
    process.stdout.write(`${JSON.stringify(onStop())}\n`, () => process.exit(0));
  });
  process.stdout.write("ready\n");
  return new Promise((resolve) => lines.on("line", (line) => line === "go" && resolve()));
}
