// The ID server benchmark's parts (bench/id-server.mjs): CPU sampling from
// /proc, the wait for a quiet machine, starting and stopping the servers
// and the bare node:http floor, and reading their /metrics.
import { execFileSync, spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { cpus } from "node:os";
import { createInterface } from "node:readline";
import { fmt } from "./report.mjs";

const clockTicks = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;

// The servers see none of the caller's REDQUORUM_* settings: every flag that
// matters is passed explicitly, the rest are the server's defaults.
export const childEnv = Object.fromEntries(
  Object.entries(process.env).filter(([name]) => !name.startsWith("REDQUORUM_")),
);

/**
 * A run during which other user-space processes took more than this (% of
 * one CPU) measured them as much as the server: it is done again.
 */
export const disturbedPct = 15;

// ---- CPU sampling -------------------------------------------------------

/** utime + stime of a process (all its threads), in seconds; 0 once it is gone. */
export function cpuSeconds(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / clockTicks;
  } catch {
    return 0;
  }
}

const kernelThread = 0x00200000; // PF_KTHREAD in /proc/<pid>/stat's flags

/**
 * CPU seconds of every user-space process on the machine but `ours`:
 * utime + stime + the times of its children that have exited and been
 * reaped (cutime + cstime), so a test run that starts and ends within the
 * window is counted, through its parent.
 */
function otherProcesses(ours) {
  const times = new Map();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || ours.has(Number(name))) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[6]) & kernelThread) continue;
      const [utime, stime, cutime, cstime] = fields.slice(11, 15).map(Number);
      times.set(name, (utime + stime + cutime + cstime) / clockTicks);
    } catch {
      // gone meanwhile
    }
  }
  return times;
}

/** Busy and total jiffies of the whole machine (first line of /proc/stat). */
function machineTicks() {
  const [, ...fields] = readFileSync("/proc/stat", "utf8").split("\n", 1)[0].trim().split(/\s+/);
  const n = fields.slice(0, 8).map(Number); // user nice system idle iowait irq softirq steal
  const total = n.reduce((a, b) => a + b, 0);
  return { busy: total - n[3] - n[4], iowait: n[4], irq: n[5] + n[6], steal: n[7], total };
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The machine is shared (a CI runner, a laptop, other sessions): before a
 * run, wait until it is nearly idle (at most 10 s, then go on and say so),
 * so a build running elsewhere is not measured as the server's slowness.
 */
export async function waitForQuiet(label) {
  const cores = cpus().length;
  let busy = 0;
  for (let waited = 0; waited < 10_000; waited += 500) {
    const a = machineTicks();
    await sleep(500);
    const b = machineTicks();
    busy = (100 * cores * (b.busy - a.busy)) / (b.total - a.total);
    if (busy < 15) return { waitedMs: waited, busy };
  }
  console.log(
    `  note: ${label}: the machine stayed busy (${fmt(busy)}% of one CPU) for 10 s; running anyway`,
  );
  return { waitedMs: 10_000, busy };
}

export function cpuSnapshot(serverPids, redisPids) {
  const self = process.cpuUsage();
  const ours = new Set([process.pid, ...serverPids, ...redisPids]);
  return {
    others: otherProcesses(ours),
    atMs: performance.now(),
    loadgen: (self.user + self.system) / 1e6,
    servers: serverPids.reduce((s, pid) => s + cpuSeconds(pid), 0),
    redis: redisPids.reduce((s, pid) => s + cpuSeconds(pid), 0),
    machine: machineTicks(),
  };
}

/**
 * CPU use between two snapshots, all in % of one CPU (so the machine's
 * capacity is cpus() × 100). `others`: user-space processes not ours (a
 * build or test run elsewhere on the machine). `kernel`: the rest of the
 * machine's busy time: kernel threads and interrupts (loopback TCP softirq,
 * the journal flushing the AOFs).
 */
export function cpuSplit(a, b) {
  const wall = (b.atMs - a.atMs) / 1000;
  const pct = (x) => (100 * x) / wall;
  const ticks = b.machine.total - a.machine.total;
  const machinePct = (key) => (100 * cpus().length * (b.machine[key] - a.machine[key])) / ticks;
  const split = {
    loadgen: pct(b.loadgen - a.loadgen),
    servers: pct(b.servers - a.servers),
    redis: pct(b.redis - a.redis),
    machineBusy: machinePct("busy"),
    iowait: machinePct("iowait"),
    irq: machinePct("irq"),
    steal: machinePct("steal"),
  };
  // A process gone by the end was reaped: its whole time moved into its
  // parent's, so what it had at the start comes off.
  let others = 0;
  for (const [pid, t] of b.others) others += t - (a.others.get(pid) ?? 0);
  for (const [pid, t] of a.others) if (!b.others.has(pid)) others -= t;
  split.others = pct(others);
  split.kernel = Math.max(
    0,
    split.machineBusy - split.loadgen - split.servers - split.redis - split.others,
  );
  return split;
}

// ---- servers ------------------------------------------------------------

/** Spawns `redquorum serve`; resolves once it logs "listening". */
export function startServer(cli, nodeUrls, options) {
  // A 2 s drain instead of 10 s: the load has stopped before SIGTERM, so a
  // drain that waits at all is a failure, and it should not cost 20 s.
  const flags = [
    "serve",
    "--nodes",
    nodeUrls.join(","),
    "--port",
    "0",
    "--max-count",
    "10000",
    "--drain-timeout",
    "2s",
  ];
  if (options.pipelineDepth !== undefined)
    flags.push("--pipeline-depth", String(options.pipelineDepth));
  if (options.proposals !== undefined) flags.push("--proposals", options.proposals);
  const child = spawn(process.execPath, [cli, ...flags], {
    stdio: ["ignore", "ignore", "pipe"],
    env: childEnv,
  });
  const server = { child, pid: child.pid, problems: [], warnings: [], url: undefined };
  server.exited = new Promise((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stderr });
    lines.on("line", (line) => {
      let entry;
      try {
        entry = JSON.parse(line);
      } catch {
        server.problems.push(`stderr: ${line}`);
        return;
      }
      if (entry.level === "error") server.problems.push(`error log: ${line}`);
      else if (entry.msg === "drain timed out")
        server.problems.push(
          `requests still in flight at SIGTERM, after the load stopped: ${line}`,
        );
      else if (entry.level === "warn") server.warnings.push(line);
      if (entry.msg === "listening" && server.url === undefined) {
        server.url = entry.url;
        resolve(server);
      }
    });
    server.exited.then(({ code, signal }) => {
      if (server.url === undefined)
        reject(
          new Error(
            `server exited (${code ?? signal}) before listening: ${server.problems.join("; ")}`,
          ),
        );
    });
  });
}

/**
 * The bare node:http floor (bench/http-floor.mjs), or another floor server
 * of bench/ (the ID floor, bench/id-floor.mjs) with its arguments; resolves
 * once it prints its URL.
 */
export function startFloor(script = "http-floor.mjs", args = []) {
  const child = spawn(process.execPath, [new URL(script, import.meta.url).pathname, ...args], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const server = { child, pid: child.pid, problems: [], warnings: [], url: undefined };
  server.exited = new Promise((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).once("line", (line) => {
      server.url = JSON.parse(line).url;
      resolve(server);
    });
    server.exited.then(({ code, signal }) => {
      if (server.url === undefined)
        reject(new Error(`the floor exited (${code ?? signal}) before listening`));
    });
  });
}

/** SIGTERM, then the exit code must be 0 (a drain that works). */
export async function stopServer(server) {
  if (server.child.exitCode === null && server.child.signalCode === null)
    server.child.kill("SIGTERM");
  const timer = setTimeout(() => server.child.kill("SIGKILL"), 10_000);
  const { code, signal } = await server.exited;
  clearTimeout(timer);
  if (code !== 0) server.problems.push(`exit ${code ?? signal} after SIGTERM`);
}

export async function postIds(url, count) {
  const response = await fetch(`${url}/v1/ids`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ count }),
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`POST ${url}/v1/ids: ${response.status} ${text}`);
  const { ids } = JSON.parse(text);
  if (!Array.isArray(ids) || ids.length !== count) throw new Error(`POST ${url}/v1/ids: ${text}`);
}

/** The NextId and HTTP counters of one server's /metrics. */
export async function scrape(url) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const value = (name) => {
    const line = text.split("\n").find((l) => l.startsWith(`${name} `));
    return line ? Number(line.slice(name.length + 1)) : 0;
  };
  return {
    roundsWon: value('redquorum_id_rounds_total{outcome="won"}'),
    roundsLost: value('redquorum_id_rounds_total{outcome="lost"}'),
    roundSeconds: value("redquorum_id_round_duration_seconds_sum"),
    roundCount: value("redquorum_id_round_duration_seconds_count"),
    idsIssued: value("redquorum_ids_issued_total"),
    requestSeconds: value("redquorum_id_request_duration_seconds_sum"),
    requestCount: value("redquorum_id_request_duration_seconds_count"),
    inFlight: value("redquorum_id_requests_in_flight"),
  };
}

export function roundStats(before, after, wallSeconds) {
  const sum = (list, key) => list.reduce((s, m) => s + m[key], 0);
  const d = (key) => sum(after, key) - sum(before, key);
  const roundMs = (1000 * d("roundSeconds")) / d("roundCount");
  const roundsPerSecond = d("roundCount") / wallSeconds;
  return {
    roundsPerSecond,
    idsPerRound: d("idsIssued") / d("roundsWon"),
    roundMs,
    // Little's law: rounds in flight on average, summed over the servers.
    roundsInFlight: (roundsPerSecond * roundMs) / 1000,
    lost: d("roundsLost"),
    serverRequestMs: (1000 * d("requestSeconds")) / d("requestCount"),
  };
}

/**
 * Once every client connection is closed, each server's in-flight gauge
 * must come back to 0 (the requests answered or dropped); returns what is
 * still counted after `waitMs`.
 */
export async function leftInFlight(urls, waitMs = 2_000) {
  const deadline = performance.now() + waitMs;
  for (;;) {
    const left = await Promise.all(urls.map(async (url) => (await scrape(url)).inFlight));
    if (left.every((n) => n === 0) || performance.now() > deadline) return left;
    await sleep(100);
  }
}
