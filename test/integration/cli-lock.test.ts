/**
 * `redquorum lock` end to end, against real redis-server processes: mutual
 * exclusion and fence order between concurrent CLI processes, the exit codes
 * of a command that cannot be run, --kill-after (on the command and on what
 * it started), signal forwarding, and a lock whose majority dies under the
 * command (with `status --json` before and after). The CLI runs from the
 * build (`node dist/cli.js`), spawned directly (no shell), so its signal
 * dispositions are the defaults.
 */
import assert from "node:assert/strict";
import { type ChildProcess, execFileSync } from "node:child_process";
import { once } from "node:events";
import {
  closeSync,
  existsSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { fenceKeyOf } from "../../src/fencing/scripts.js";
import { LocalCluster, maxId, Redlock } from "../../src/index.js";
import { startProxies } from "../faults/tools/proxy.js";
import { findOverlaps, type Hold } from "../helpers/checkers.js";
import { finished, type Run, startCli as startCliProcess } from "../helpers/cli.js";
import { byScale } from "../helpers/scale.js";
import { sleep } from "../helpers/sleep.js";

/** One CLI process's start (dist/cli.js): about 0.2 s on this machine, 3 s under heavy load. */
const cliStartMs = 3_000;
/** A `node -e` or `sh -c` command's start under load (about 50 ms idle). */
const commandStartMs = 500;
/** Bound on a CLI that runs a short command (or none): its start, a few rounds, the close. */
const shortRunMs = cliStartMs + 12_000;
/** Bound on the release's deletes reaching the nodes that were not part of its majority. */
const releaseSettleMs = 2_000;
/** How often the test polls a file or the nodes. */
const pollMs = 20;

const children = new Set<ChildProcess>();
const pidFiles: string[] = [];

/** `redquorum <args>`, remembered for the cleanup. */
function startCli(args: readonly string[], env: NodeJS.ProcessEnv): ChildProcess {
  const child = startCliProcess(args, env);
  children.add(child);
  child.once("close", () => children.delete(child));
  return child;
}

function cli(args: readonly string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<Run> {
  return finished(startCli(args, env), timeoutMs);
}

/** What a failed assertion prints about a run. */
const show = (run: Run) =>
  `exit ${run.code} (signal ${run.signal}); stderr: ${JSON.stringify(run.stderr)}; ` +
  `stdout: ${JSON.stringify(run.stdout)}`;

/**
 * A shell script in `dir` for a chain of `generations` processes in one
 * process group that each write a line ("tick N", the last one "end"),
 * count to 50, start the next and exit (about a ms each), ignoring
 * SIGTERM. Run as `LOG=<file> sh <script> 1`.
 */
function chainScript(dir: string, name: string, generations: number): string {
  const script = join(dir, name);
  writeFileSync(
    script,
    `trap '' TERM\n` +
      `if [ "$1" -ge ${generations} ]; then echo end >> "$LOG"; exit 0; fi\n` +
      `echo "tick $1" >> "$LOG"\nj=0; while [ $j -lt 50 ]; do j=$((j + 1)); done\n` +
      `sh "$0" $(($1 + 1)) &\nexit 0\n`,
  );
  return script;
}

/**
 * Shell that starts a chain (`chainScript`) logging to `log` in the
 * background, its output away from the CLI's pipes, and waits until it has
 * written its first line, so has set its SIGTERM trap: a SIGTERM before
 * that would end it at once (the test would then see no chain at all).
 */
function startChain(script: string, log: string): string {
  return `LOG=${log} sh ${script} 1 >/dev/null 2>&1 & while [ ! -s ${log} ]; do sleep 0.01; done; `;
}

/** The end of a `lock` command line whose command leaves a chain running and exits. */
function leavingChain(script: string, log: string): string[] {
  return ["--node-timeout", "1s", "--", "sh", "-c", `${startChain(script, log)}exit 0`];
}

/** Waits for `path` to exist; fails early, with the CLI's stderr, if the CLI exits first. */
async function waitForFile(
  path: string,
  timeoutMs: number,
  running?: { child: ChildProcess; run: Promise<Run> },
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!existsSync(path)) {
    if (running && (running.child.exitCode !== null || running.child.signalCode !== null)) {
      throw new Error(`the CLI exited before ${path} appeared; ${show(await running.run)}`);
    }
    if (performance.now() > deadline) throw new Error(`${path} not created within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, pollMs));
  }
}

/** Whether process `pid` exists (kill 0: ESRCH when it does not). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ESRCH") return false;
    throw error;
  }
}

/** Alive and not a zombie (an orphan killed a moment ago may wait to be reaped). */
function running(pid: number): boolean {
  if (!alive(pid)) return false;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false; // gone between the two looks
  }
}

/** A pid written by a command (`echo $$ > file`), remembered for after()'s cleanup. */
function pidFile(dir: string, name: string): string {
  const path = join(dir, name);
  pidFiles.push(path);
  return path;
}

function killLeftovers(): void {
  for (const child of children) child.kill("SIGKILL");
  for (const path of pidFiles) {
    try {
      const pid = Number(readFileSync(path, "utf8").trim());
      if (pid > 0) process.kill(pid, "SIGKILL");
    } catch {
      // no such file, or the process is gone: nothing to clean up
    }
  }
}

function clientsOf(cluster: LocalCluster): Redis[] {
  return cluster.urls.map((url) => {
    const client = new Redis(url, {
      commandTimeout: 2_000,
      maxRetriesPerRequest: 1,
      retryStrategy: () => 100,
    });
    client.on("error", () => {});
    return client;
  });
}

/** EXISTS `key` on every node, in node order. */
const existsOn = (clients: readonly Redis[], key: string) =>
  Promise.all(clients.map((client) => client.exists(key)));

/**
 * Waits until no node holds `key`. The release resolves once a majority
 * deleted it; the other deletes are sent and land just after. The TTLs in
 * these tests are far above `releaseSettleMs`, so only a release empties the
 * nodes this fast, not expiry.
 */
async function assertReleased(clients: readonly Redis[], key: string, why: string): Promise<void> {
  const deadline = performance.now() + releaseSettleMs;
  for (;;) {
    const found = await existsOn(clients, key);
    if (found.every((n) => n === 0)) return;
    if (performance.now() > deadline) {
      assert.fail(
        `${key} still on nodes ${JSON.stringify(found)} ${releaseSettleMs} ms after the CLI exited; ${why}`,
      );
    }
    await new Promise((r) => setTimeout(r, pollMs));
  }
}

after(() => killLeftovers());

describe("redquorum lock, end to end", () => {
  let cluster: LocalCluster;
  let clients: Redis[];
  let env: NodeJS.ProcessEnv;
  let dir: string;

  before(async () => {
    cluster = await LocalCluster.start({ nodeCount: 5, persistence: "none" });
    clients = clientsOf(cluster);
    env = { REDQUORUM_NODES: cluster.urls.join(",") };
    dir = mkdtempSync(join(tmpdir(), "redquorum-cli-lock-"));
  });

  after(async () => {
    killLeftovers();
    for (const client of clients ?? []) client.disconnect();
    if (dir) rmSync(dir, { recursive: true, force: true });
    await cluster?.stop();
  });

  describe("concurrent runs on one resource", () => {
    const workers = 3;
    // Each worker's runs one after the other: 2 at the fast scale, 3 at the full one.
    const rounds = byScale(2, 3);
    const holdMs = 200;
    /**
     * A run may wait for every other hold of the test, each a command's
     * start plus its hold; 5 times that, rounded up to whole seconds.
     */
    const waitMs =
      Math.ceil(((workers * rounds - 1) * (commandStartMs + holdMs) * 5) / 1_000) * 1_000;
    const runTimeoutMs = cliStartMs + waitMs + commandStartMs + holdMs + 5_000;

    it(`${workers} CLIs at a time, ${rounds} times: no two holds overlap, fences increase in hold order, all exit 0`, {
      timeout: rounds * runTimeoutMs + 10_000,
    }, async () => {
      const log = join(dir, "mx.log");
      // Both lines on CLOCK_MONOTONIC (process.hrtime), which every process
      // on the machine shares, in ms with µs precision.
      const hold = [
        "const fs = require('node:fs');",
        "const now = () => (Number(process.hrtime.bigint() / 1000n) / 1000).toFixed(3);",
        "const line = (s) => fs.appendFileSync(process.env.MX_LOG, s + '\\n');",
        "line('start ' + process.pid + ' ' + process.env.REDQUORUM_FENCE + ' ' + now());",
        `setTimeout(() => line('end ' + process.pid + ' ' + now()), ${holdMs});`,
      ].join("\n");
      const args = ["lock", "cli:mx", "--wait", `${waitMs}ms`, "--", process.execPath, "-e"];
      const runs: Run[] = [];
      await Promise.all(
        Array.from({ length: workers }, async () => {
          for (let round = 0; round < rounds; round++) {
            runs.push(await cli([...args, hold], { ...env, MX_LOG: log }, runTimeoutMs));
          }
        }),
      );
      for (const run of runs) assert.equal(run.code, 0, show(run));

      const lines = readFileSync(log, "utf8").trimEnd().split("\n");
      const starts = new Map<string, { fence: bigint; atMs: number }>();
      const holds: (Hold & { fence: bigint })[] = [];
      for (const line of lines) {
        const [kind, pid, ...rest] = line.split(" ");
        if (kind === "start") {
          assert.match(rest[0]!, /^\d+$/, `no fence in ${JSON.stringify(line)}`);
          starts.set(pid!, { fence: BigInt(rest[0]!), atMs: Number(rest[1]) });
        } else {
          const start = starts.get(pid!);
          assert.ok(start, `an end without a start: ${JSON.stringify(line)}`);
          holds.push({
            client: `pid ${pid} fence ${start.fence}`,
            startMs: start.atMs,
            endMs: Number(rest[0]),
            fence: start.fence,
          });
        }
      }
      assert.equal(holds.length, workers * rounds, `every run held once:\n${lines.join("\n")}`);

      const overlaps = findOverlaps(holds);
      assert.deepEqual(overlaps, [], `overlapping holds:\n${lines.join("\n")}`);

      const byStart = [...holds].sort((a, b) => a.startMs - b.startMs);
      for (let i = 1; i < byStart.length; i++) {
        assert.ok(
          byStart[i]!.fence > byStart[i - 1]!.fence,
          `fence ${byStart[i]!.fence} (${byStart[i]!.client}) held after fence ` +
            `${byStart[i - 1]!.fence} (${byStart[i - 1]!.client}):\n${lines.join("\n")}`,
        );
      }
      await assertReleased(clients, "cli:mx", "after the last run");
    });
  });

  it("several resources: REDQUORUM_FENCES holds each one's own token, in REDQUORUM_RESOURCES' order", {
    timeout: shortRunMs + 10_000,
  }, async () => {
    // Tokens count per resource: cli:fa is taken three times first, so its
    // token is above any cli:fb has; the first resource's token is no
    // token of the second's.
    const redlock = new Redlock(cluster.urls, { nodeTimeoutMs: 1_000 });
    try {
      let before = 0n;
      for (let i = 0; i < 3; i++) {
        const lock = await redlock.acquire(["cli:fa"], 5_000);
        before = lock.fence!;
        await lock.release();
      }
      const print =
        "console.log(process.env.REDQUORUM_RESOURCES + ' ' + process.env.REDQUORUM_FENCES + ' ' + process.env.REDQUORUM_FENCE)";
      const args = ["lock", "cli:fa", "cli:fb", "--", process.execPath, "-e", print];
      const run = await cli(args, env, shortRunMs);
      assert.equal(run.code, 0, show(run));
      const [resources, fences, fence] = run.stdout.trim().split(" ");
      assert.equal(resources, "cli:fa,cli:fb", show(run));
      assert.match(fences!, /^\d+,\d+$/, show(run));
      const [fa, fb] = fences!.split(",").map(BigInt) as [bigint, bigint];
      assert.equal(fence, String(fa), "REDQUORUM_FENCE is the first resource's");
      assert.ok(fa > before, `cli:fa's token ${fa} is not above ${before}`);
      assert.ok(fb < fa, `cli:fb's token ${fb} is cli:fa's (${fa})`);
      const next = await redlock.acquire(["cli:fb"], 5_000);
      assert.ok(next.fence! > fb, `cli:fb's next token ${next.fence} is not above ${fb}`);
      await next.release();
    } finally {
      await redlock.close();
    }
  });

  it("--wait 0s tries once: a free resource is taken and the command runs; a held one exits 4", {
    timeout: 2 * shortRunMs + 10_000,
  }, async () => {
    // A fresh process: the one attempt includes first contact with the nodes.
    // A 1 s node timeout: one attempt from a fresh process (first contact
    // included) is not about the 50 ms default on a loaded machine.
    const free = await cli(
      ["lock", "cli:wait0", "--wait", "0s", "--node-timeout", "1s", "--", "true"],
      env,
      shortRunMs,
    );
    assert.equal(free.code, 0, show(free));
    const redlock = new Redlock(cluster.urls, { nodeTimeoutMs: 1_000 });
    try {
      const held = await redlock.acquire(["cli:wait0"], 20_000);
      try {
        const busy = await cli(
          ["lock", "cli:wait0", "--wait", "0s", "--node-timeout", "1s", "--", "true"],
          env,
          shortRunMs,
        );
        assert.equal(busy.code, 4, show(busy));
        assert.match(busy.stderr, /could not get the lock at once \(--wait 0s\)/, show(busy));
      } finally {
        await held.release();
      }
    } finally {
      await redlock.close();
    }
  });

  it("a resource whose fencing tokens are used up exits 6 at once, without running the command", {
    timeout: shortRunMs + 10_000,
  }, async () => {
    // Only a fencing floor raised to the end gets a counter there.
    await Promise.all(clients.map((c) => c.set(fenceKeyOf("cli:spent"), maxId.toString())));
    const marker = join(dir, "ran-without-token");
    const run = await cli(
      ["lock", "cli:spent", "--wait", "30s", "--node-timeout", "1s", "--", "touch", marker],
      env,
      shortRunMs,
    );
    assert.equal(run.code, 6, show(run));
    assert.match(run.stderr, /no fencing token is left for "cli:spent"/, show(run));
    assert.equal(existsSync(marker), false, "the command ran without a token");
    await assertReleased(clients, "cli:spent", show(run));
  });

  it("a lock granted with too little validity to keep it exits 3 without running the command (not 5, a job's lost lock)", {
    timeout: shortRunMs + 10_000,
  }, async () => {
    // Each reply 80 ms late: a 100 ms lock is granted with too little
    // validity left to extend it, and is given up before the command starts.
    const proxies = await startProxies(cluster);
    try {
      for (const proxy of proxies) proxy.latency(80);
      const marker = join(dir, "ran-on-a-lock-too-short");
      const run = await cli(
        ["lock", "cli:too-short", "--ttl", "100ms", "--node-timeout", "1s", "--", "touch", marker],
        { REDQUORUM_NODES: proxies.map((proxy) => proxy.url).join(",") },
        shortRunMs,
      );
      assert.equal(existsSync(marker), false, `the command ran; ${show(run)}`);
      assert.equal(run.code, 3, show(run));
      // (Or, slower still, the acquire round itself outlasted the TTL.)
      assert.match(
        run.stderr,
        /given up before the command started \(it was not run\)|nodes answered too slowly for this TTL/,
        show(run),
      );
    } finally {
      await Promise.all(proxies.map((proxy) => proxy.close()));
    }
  });

  it("stderr on a full disk (2> /dev/full) only drops the diagnostics: the command runs and its exit code is the outcome", {
    timeout: shortRunMs + 5_000,
  }, async () => {
    const marker = join(dir, "ran-with-stderr-full");
    const full = openSync("/dev/full", "w");
    let run: Run;
    try {
      // --kill-after longer than --ttl allows: a "note:" line on stderr before the command starts.
      const args = [
        "lock",
        "cli:full",
        "--ttl",
        "1s",
        "--kill-after",
        "5s",
        // Not about node timeouts: with the 50 ms default a 1 s lock is
        // lost to one slow answer to its first extension (exit 5, not 3).
        "--node-timeout",
        "1s",
        "--",
        "sh",
        "-c",
        `touch ${marker}; exit 3`,
      ];
      run = await finished(startCliProcess(args, env, { stderr: full }), shortRunMs);
    } finally {
      closeSync(full);
    }
    assert.equal(run.code, 3, show(run));
    assert.ok(existsSync(marker), "the command did not run");
    await assertReleased(clients, "cli:full", show(run));
  });

  it("a resource name holding a comma is refused (exit 2): REDQUORUM_RESOURCES would read it as two", {
    timeout: shortRunMs + 5_000,
  }, async () => {
    const run = await cli(["lock", "cli:a,b", "cli:c", "--", "true"], env, shortRunMs);
    assert.equal(run.code, 2, show(run));
    assert.match(run.stderr, /"cli:a,b" holds a comma/, show(run));
    await assertReleased(clients, "cli:a,b", show(run));
    await assertReleased(clients, "cli:c", show(run));
  });

  it("exit 126 for a command that is not executable: one stderr line, the lock released", {
    timeout: shortRunMs + releaseSettleMs + 5_000,
  }, async () => {
    const script = join(dir, "not-executable.sh");
    writeFileSync(script, "#!/bin/sh\nexit 0\n", { mode: 0o644 });
    const run = await cli(["lock", "cli:126", "--", script], env, shortRunMs);
    assert.equal(run.code, 126, show(run));
    assert.equal(run.stdout, "", show(run));
    const lines = run.stderr.trimEnd().split("\n");
    assert.equal(lines.length, 1, show(run));
    assert.match(lines[0]!, /cannot run .*not-executable\.sh.*EACCES/, show(run));
    await assertReleased(clients, "cli:126", show(run));
  });

  it("exit 127 for a command that is not found: one stderr line, the lock released", {
    timeout: shortRunMs + releaseSettleMs + 5_000,
  }, async () => {
    const command = "redquorum-test-no-such-command";
    const run = await cli(["lock", "cli:127", "--", command, "arg"], env, shortRunMs);
    assert.equal(run.code, 127, show(run));
    assert.equal(run.stdout, "", show(run));
    const lines = run.stderr.trimEnd().split("\n");
    assert.equal(lines.length, 1, show(run));
    assert.match(lines[0]!, new RegExp(`cannot run .*${command}.*ENOENT`), show(run));
    await assertReleased(clients, "cli:127", show(run));
  });

  describe("--kill-after", () => {
    const ttlMs = 1_000;
    const killAfterMs = 300;
    /** The next extension (at half the TTL) is refused, SIGTERM, SIGKILL, exit: generous. */
    const lostExitMs = ttlMs + killAfterMs + 10_000;

    it("a command that ignores SIGTERM gets SIGKILL at once when the lock's keys are found gone (no validity left, another may hold it); exit 5", {
      timeout: cliStartMs + lostExitMs + ttlMs + 10_000,
    }, async () => {
      const ready = join(dir, "kill-ready");
      const pids = pidFile(dir, "kill-pid");
      // A 2 s lock and a 500 ms node timeout: the refusals that find the
      // keys gone must come back in time on a loaded machine, or the
      // extensions time out and the lock is said to have run out instead.
      const child = startCli(
        [
          "lock",
          "cli:kill",
          "--ttl",
          `${2 * ttlMs}ms`,
          "--node-timeout",
          "500ms",
          "--kill-after",
          `${killAfterMs}ms`,
          "--",
          "sh",
          "-c",
          `trap "" TERM; echo $$ > ${pids}; touch ${ready}; while :; do sleep 0.05; done`,
        ],
        env,
      );
      const run = finished(child, cliStartMs + lostExitMs + ttlMs);
      await waitForFile(ready, cliStartMs + commandStartMs + 5_000, { child, run });
      const pid = Number(readFileSync(pids, "utf8").trim());
      assert.ok(alive(pid), `the command (pid ${pid}) runs`);

      // Someone deletes the lock: the next extension is refused. Before,
      // the command ran on for the whole --kill-after beside a new holder.
      await Promise.all(clients.map((c) => c.del("cli:kill")));
      const done = await run;
      assert.equal(done.code, 5, show(done));
      assert.match(done.stderr, /lost the lock[\s\S]*SIGTERM[\s\S]*SIGKILL in 0ms/, show(done));
      // Said as what happened (it said "ran out of validity or was found lost").
      assert.match(
        done.stderr,
        /its keys were found gone: at most \d of \d nodes still hold them, \d needed; an extension was refused on \S+/,
        show(done),
      );
      // redquorum ran all along: the guard must not say it was stopped (it
      // took the schedule redquorum sent before its SIGTERM for silence).
      assert.doesNotMatch(done.stderr, /\(guard\)/, show(done));
      assert.equal(alive(pid), false, `the command (pid ${pid}) outlived redquorum; ${show(done)}`);
    });

    it("a lost lock stops what the command started too: no process of it runs after --kill-after", {
      timeout: cliStartMs + lostExitMs + killAfterMs + 10_000,
    }, async () => {
      const ready = join(dir, "tree-ready");
      const pids = pidFile(dir, "tree-grandchild-pid");
      // A script running a job (`./job.sh` running `pg_dump`, say): sh waits
      // for its child; `; true` keeps sh from exec'ing it. The grandchild's
      // output goes to /dev/null so it cannot hold the CLI's pipes open.
      const child = startCli(
        [
          "lock",
          "cli:tree",
          "--ttl",
          `${ttlMs}ms`,
          "--kill-after",
          `${killAfterMs}ms`,
          "--",
          "sh",
          "-c",
          `sh -c "echo \\$\\$ > ${pids}; touch ${ready}; exec sleep 60" >/dev/null 2>&1; true`,
        ],
        env,
      );
      const run = finished(child, cliStartMs + lostExitMs);
      await waitForFile(ready, cliStartMs + commandStartMs + 5_000, { child, run });
      const grandchild = Number(readFileSync(pids, "utf8").trim());
      try {
        assert.ok(alive(grandchild), `the command's child (pid ${grandchild}) runs`);
        await Promise.all(clients.map((c) => c.del("cli:tree")));
        const done = await run;
        assert.equal(done.code, 5, show(done));
        // redquorum has exited; a process killed meanwhile gets a moment to be reaped.
        const deadline = performance.now() + killAfterMs + 2_000;
        while (running(grandchild) && performance.now() < deadline) {
          await new Promise((r) => setTimeout(r, pollMs));
        }
        assert.equal(
          running(grandchild),
          false,
          `the command's child (pid ${grandchild}) still runs, outside the lock, ` +
            `${killAfterMs + 2_000} ms after redquorum exited 5; ${show(done)}`,
        );
      } finally {
        if (running(grandchild)) process.kill(grandchild, "SIGKILL");
      }
    });
  });

  describe("the command is stopped before the lock can be another's", () => {
    // A long node timeout makes the margins (two node timeouts of validity
    // left at the SIGKILL) wide: the guard's timers may run late under load.
    const ttlMs = 3_000;
    const nodeTimeout = "500ms";

    /**
     * `redquorum lock` running a command that ignores SIGTERM (`first`: what
     * it does next, before it says it runs; `ignoresTerm` false: a command
     * that SIGTERM ends); resolves once it runs, with its pid.
     */
    async function startIgnoring(
      resource: string,
      killAfter: string,
      first = "",
      ignoresTerm = true,
    ) {
      const ready = join(dir, `${resource}-ready`);
      const pids = pidFile(dir, `${resource}-pid`);
      const child = startCli(
        [
          "lock",
          resource,
          "--ttl",
          `${ttlMs}ms`,
          "--kill-after",
          killAfter,
          "--node-timeout",
          nodeTimeout,
          "--",
          "sh",
          "-c",
          `${ignoresTerm ? 'trap "" TERM; ' : ""}${first}echo $$ > ${pids}; touch ${ready}; ` +
            "while :; do sleep 0.05; done",
        ],
        env,
      );
      const run = finished(child, cliStartMs + 30_000);
      // A command that kills redquorum first: redquorum's exit is expected then.
      await waitForFile(
        ready,
        cliStartMs + commandStartMs + 5_000,
        first ? undefined : { child, run },
      );
      return { child, run, pid: Number(readFileSync(pids, "utf8").trim()) };
    }

    /** Another holder takes `resource` (it waits for the keys to expire); whether the command ran then. */
    async function rivalTakes(resource: string): Promise<{ commandRan: boolean; fence: bigint }> {
      const rival = new Redlock(cluster.urls, { nodeTimeoutMs: 500 });
      try {
        const lock = await rival.acquire([resource], 10_000, {
          waitMs: 20_000,
          retry: { retries: 10_000 },
        });
        const commandRan = running(Number(readFileSync(join(dir, `${resource}-pid`), "utf8")));
        await lock.release();
        return { commandRan, fence: lock.fence! };
      } finally {
        await rival.close();
      }
    }

    it("redquorum killed (SIGKILL, the OOM killer): the command gets SIGTERM at once, and SIGKILL after --kill-after", {
      timeout: cliStartMs + 40_000,
    }, async () => {
      const { child, run, pid } = await startIgnoring("cli:killed", "300ms");
      child.kill("SIGKILL");
      // Not its output's end: a command left running would hold that open.
      await once(child, "exit");
      const { commandRan } = await rivalTakes("cli:killed");
      assert.equal(
        commandRan,
        false,
        `the command (pid ${pid}) still ran when another holder got the lock, after redquorum was killed`,
      );
      const done = await run;
      assert.equal(done.signal, "SIGKILL", show(done));
      assert.match(
        done.stderr,
        /guard\): redquorum exited while the command held the lock/,
        show(done),
      );
    });

    it("redquorum killed while the command runs a chain of processes that fork and exit: the guard stops the chain before the lock can be another's", {
      timeout: cliStartMs + 40_000,
    }, async () => {
      // The guard watches the group once redquorum is gone; a look that
      // missed the chain let it exit without the SIGKILL, and the chain
      // ran on beside the next holder.
      const resource = "cli:guard-chain";
      const script = chainScript(dir, "guard-chain.sh", 12_000);
      const log = join(dir, "guard-chain.log");
      // The command itself ends at the guard's SIGTERM; the chain ignores it.
      const { child, run } = await startIgnoring(resource, "1s", startChain(script, log), false);
      child.kill("SIGKILL");
      await once(child, "exit");
      await rivalTakes(resource);
      const atGrant = readFileSync(log, "utf8").length;
      await sleep(300);
      const later = readFileSync(log, "utf8").length;
      assert.equal(later, atGrant, "the chain wrote on after another holder got the lock");
      assert.equal((await run).signal, "SIGKILL");
    });

    it("redquorum stopped (SIGSTOP): the command is stopped before the validity ends; redquorum exits 5 once resumed", {
      timeout: cliStartMs + 40_000,
    }, async () => {
      const { child, run, pid } = await startIgnoring("cli:stopped", "300ms");
      child.kill("SIGSTOP");
      try {
        const { commandRan } = await rivalTakes("cli:stopped");
        assert.equal(
          commandRan,
          false,
          `the command (pid ${pid}) still ran when another holder got the lock, redquorum stopped`,
        );
      } finally {
        child.kill("SIGCONT");
      }
      const done = await run;
      assert.equal(done.code, 5, show(done));
      assert.match(done.stderr, /guard\): redquorum did not extend the lock/, show(done));
    });

    for (const signal of ["KILL", "STOP"] as const) {
      it(`redquorum gets SIG${signal} at the command's first instruction: the guard knew the command by then`, {
        timeout: cliStartMs + 40_000,
      }, async () => {
        // $PPID: redquorum (the command is its child).
        const resource = `cli:first-${signal}`;
        const { child, run, pid } = await startIgnoring(
          resource,
          "300ms",
          `kill -${signal} $PPID; `,
        );
        try {
          const { commandRan } = await rivalTakes(resource);
          assert.equal(
            commandRan,
            false,
            `the command (pid ${pid}) still ran when another holder got the lock`,
          );
        } finally {
          if (signal === "STOP") child.kill("SIGCONT");
        }
        const done = await run;
        if (signal === "STOP") assert.equal(done.code, 5, show(done));
        else assert.equal(done.signal, "SIGKILL", show(done));
      });
    }

    it("redquorum killed: once the command is gone, so is the guard (it does not wait out the grace)", {
      timeout: cliStartMs + 40_000,
    }, async () => {
      const ready = join(dir, "guard-gone-ready");
      const child = startCli(
        [
          "lock",
          "cli:guard-gone",
          "--ttl",
          "30s",
          "--kill-after",
          "20s",
          "--",
          "sh",
          "-c",
          `touch ${ready}; while :; do sleep 0.05; done`,
        ],
        env,
      );
      const run = finished(child, cliStartMs + 30_000);
      await waitForFile(ready, cliStartMs + commandStartMs + 5_000, { child, run });
      const guards = execFileSync("ps", ["-o", "pid=,args=", "--ppid", String(child.pid)], {
        encoding: "utf8",
      })
        .split("\n")
        .filter((line) => line.includes("cli-guard.js"))
        .map((line) => Number(line.trim().split(" ")[0]));
      assert.equal(guards.length, 1, "one guard beside redquorum");
      const guard = guards[0]!;
      child.kill("SIGKILL");
      // Not the output's end: the guard shares redquorum's stderr.
      await once(child, "exit");
      // The command obeys the guard's SIGTERM at once; the guard looks every 50 ms.
      const deadline = performance.now() + 5_000;
      while (running(guard) && performance.now() < deadline) {
        await new Promise((r) => setTimeout(r, pollMs));
      }
      assert.equal(running(guard), false, `the guard (pid ${guard}) still runs, its command gone`);
      await run;
    });

    it("the nodes stop answering: --kill-after's grace ends before the lock's validity, not after it", {
      timeout: cliStartMs + 40_000,
    }, async () => {
      // 2 s asked; 3 s of TTL leaves room for less (a note says how much).
      const { run, pid } = await startIgnoring("cli:grace", "2s");
      const majority = [0, 1, 2];
      for (const index of majority) cluster.pause(index);
      // No extension can succeed from now: the validity ends within one TTL.
      const validityEndsBy = performance.now() + ttlMs;
      try {
        while (running(pid) && performance.now() < validityEndsBy) {
          await new Promise((r) => setTimeout(r, pollMs));
        }
        assert.equal(
          running(pid),
          false,
          `the command (pid ${pid}), which ignores SIGTERM, still ran ${ttlMs} ms after the nodes ` +
            "stopped answering: past the lock's validity",
        );
      } finally {
        for (const index of majority) cluster.resume(index);
      }
      const done = await run;
      assert.equal(done.code, 5, show(done));
      assert.match(done.stderr, /--kill-after 2s does not fit in --ttl 3s/, show(done));
    });
  });

  it("a command that exits leaving a process running: that process is stopped before the release", {
    timeout: cliStartMs + 15_000,
  }, async () => {
    const pids = pidFile(dir, "left-behind-pid");
    // A script that starts a job in the background and exits at once: the
    // job would work on after the release, outside the lock.
    const run = await finished(
      startCli(
        [
          "lock",
          "cli:left",
          "--kill-after",
          "300ms",
          "--",
          "sh",
          "-c",
          `sleep 60 >/dev/null 2>&1 & echo $! > ${pids}; exit 6`,
        ],
        env,
      ),
      cliStartMs + 10_000,
    );
    const leftBehind = Number(readFileSync(pids, "utf8").trim());
    try {
      assert.equal(run.code, 6, show(run)); // the command's own code
      assert.match(run.stderr, /processes it started are still running: sending them SIGTERM/);
      assert.equal(running(leftBehind), false, `pid ${leftBehind} outlived the lock; ${show(run)}`);
      await assertReleased(clients, "cli:left", show(run));
    } finally {
      if (running(leftBehind)) process.kill(leftBehind, "SIGKILL");
    }
  });

  it("a chain of processes that each fork and exit, left running by the command, is gone before the release", {
    timeout: 3 * (shortRunMs + 1_000),
  }, async () => {
    // A generation forked while /proc was read, whose parent exited before
    // it was looked at, was not seen, and redquorum released (at once, or
    // before --kill-after) while the chain ran on. Three runs: one missed
    // the chain in most runs.
    const script = chainScript(dir, "chain.sh", 8_000);
    for (let i = 0; i < 3; i++) {
      const log = join(dir, `chain-${i}.log`);
      const run = await cli(
        ["lock", `cli:chain-${i}`, "--kill-after", "1s", ...leavingChain(script, log)],
        env,
        shortRunMs,
      );
      assert.equal(run.code, 0, show(run));
      assert.match(run.stderr, /still running: sending them SIGTERM/, show(run));
      const atExit = readFileSync(log, "utf8").length;
      await sleep(300);
      const later = readFileSync(log, "utf8").length;
      assert.equal(later, atExit, `run ${i}: the chain wrote on after the release; ${show(run)}`);
      await assertReleased(clients, `cli:chain-${i}`, show(run));
    }
  });

  it("a chain of processes that each fork and exit gets the whole --kill-after too: it ends by itself within it", {
    timeout: shortRunMs + 70_000,
  }, async () => {
    // Seen once, the chain was then missed by a look during the grace,
    // which ended it early with SIGKILL: it never got to its end.
    // 300 generations: a third of a second on a quiet machine, and far
    // within the grace on a loaded one (in CI, 1,500 of them with two
    // cores busy and three other test files took longer than 20 s).
    const script = chainScript(dir, "short-chain.sh", 300);
    const log = join(dir, "short-chain.log");
    const run = await cli(
      [
        "lock",
        "cli:chain-grace",
        "--ttl",
        "2m",
        "--kill-after",
        "1m",
        // With a 1 s node timeout: the chain's forks load the machine, and
        // with the 50 ms default the extensions of a loaded CI run failed
        // (the lock was then rightly given up, exit 5).
        ...leavingChain(script, log),
      ],
      env,
      shortRunMs + 65_000,
    );
    assert.equal(run.code, 0, show(run));
    assert.match(run.stderr, /still running: sending them SIGTERM \(SIGKILL in 1m\)/, show(run));
    const lines = readFileSync(log, "utf8").trimEnd().split("\n");
    assert.equal(lines.at(-1), "end", `the chain was killed after ${lines.length} generations`);
    await assertReleased(clients, "cli:chain-grace", show(run));
  });

  it("what a command leaves running gets the whole --kill-after while the lock is kept, not only the validity left when the command exited", {
    timeout: cliStartMs + 20_000,
  }, async () => {
    const pids = pidFile(dir, "left-grace-pid");
    const ready = join(dir, "left-grace-ready");
    // A job that ignores SIGTERM, started in the background; the command
    // exits as soon as the job has set its trap (exiting before that, the
    // guard's SIGTERM could reach the job before its trap and end it: a
    // race in the test, seen once in CI on two busy cores). --kill-after
    // (10 s) is far longer than --ttl (2 s): the lock is extended
    // meanwhile, so the job must get the 10 s. Before,
    // the guard's SIGKILL came when the validity left at the command's exit
    // ran out (under 2 s), as if the lock had been lost. Not about node
    // timeouts: with the 50 ms default a slow extension on a loaded machine
    // gives the lock up (then the job is rightly killed); with 1 s it has
    // about a second to land.
    const child = startCli(
      [
        "lock",
        "cli:left-grace",
        "--ttl",
        "2s",
        "--kill-after",
        "10s",
        "--node-timeout",
        "1s",
        "--",
        "sh",
        "-c",
        `sh -c 'trap "" TERM; echo $$ > ${pids}; touch ${ready}; while :; do sleep 0.05; done' >/dev/null 2>&1 & ` +
          `while [ ! -e ${ready} ]; do sleep 0.01; done; exit 0`,
      ],
      env,
    );
    const run = finished(child, cliStartMs + 18_000);
    await waitForFile(ready, cliStartMs + commandStartMs + 5_000, { child, run });
    const job = Number(readFileSync(pids, "utf8").trim());
    try {
      // Two TTLs on: past the old SIGKILL, far before --kill-after's.
      await new Promise((r) => setTimeout(r, 4_000));
      if (!running(job)) {
        assert.fail(`the job left running was killed before --kill-after; ${show(await run)}`);
      }
      process.kill(job, "SIGKILL");
      const done = await run;
      assert.equal(done.code, 0, show(done));
      assert.match(
        done.stderr,
        /still running: sending them SIGTERM \(SIGKILL in 10s\)/,
        show(done),
      );
      await assertReleased(clients, "cli:left-grace", show(done));
    } finally {
      if (running(job)) process.kill(job, "SIGKILL");
    }
  });

  describe("signal forwarding", () => {
    const cases = [
      { signal: "SIGINT", trap: "INT", code: 0 },
      { signal: "SIGHUP", trap: "HUP", code: 3 },
    ] as const;

    for (const { signal, trap, code } of cases) {
      it(`${signal} to redquorum reaches the command; redquorum exits with its code (${code}) and releases`, {
        timeout: cliStartMs + commandStartMs + shortRunMs + releaseSettleMs + 10_000,
      }, async () => {
        const resource = `cli:${trap.toLowerCase()}`;
        const ready = join(dir, `${trap}-ready`);
        const got = join(dir, `${trap}-got`);
        const pids = pidFile(dir, `${trap}-pid`);
        // Traps for both signals, so the file says which one arrived.
        const command =
          `trap 'echo INT > ${got}; exit ${cases[0].code}' INT; ` +
          `trap 'echo HUP > ${got}; exit ${cases[1].code}' HUP; ` +
          `echo $$ > ${pids}; touch ${ready}; while :; do sleep 0.05; done`;
        const child = startCli(["lock", resource, "--", "sh", "-c", command], env);
        const run = finished(child, cliStartMs + commandStartMs + shortRunMs);
        await waitForFile(ready, cliStartMs + commandStartMs + 5_000, { child, run });
        // Held: by a majority. A node that answered after the CLI's 50 ms
        // bound (a loaded machine) is not counted and may not hold the key.
        const holding = await existsOn(clients, resource);
        assert.ok(
          holding.filter((n) => n === 1).length >= 3,
          `${resource} on nodes ${JSON.stringify(holding)}: not a majority`,
        );

        child.kill(signal);
        const done = await run;
        assert.equal(done.signal, null, `redquorum itself died of a signal; ${show(done)}`);
        assert.equal(done.code, code, show(done));
        assert.equal(readFileSync(got, "utf8"), `${trap}\n`, show(done));
        await assertReleased(clients, resource, show(done));
      });
    }
  });
});

interface StatusJson {
  nodes: { endpoint: string; reachable: boolean }[];
  verdict: { locks: { safe: boolean; usable: number; needed: number } };
}

describe("redquorum lock and status when a majority of the nodes dies", () => {
  const killed = [0, 1, 2];
  let cluster: LocalCluster;
  let env: NodeJS.ProcessEnv;
  let dir: string;

  before(async () => {
    cluster = await LocalCluster.start({ nodeCount: 5, persistence: "none" });
    env = { REDQUORUM_NODES: cluster.urls.join(",") };
    dir = mkdtempSync(join(tmpdir(), "redquorum-cli-lock-majority-"));
  });

  after(async () => {
    killLeftovers();
    if (dir) rmSync(dir, { recursive: true, force: true });
    await cluster?.stop();
  });

  /** `status --json`: a dead node is refused its connection at once; 2 s check timeout at most. */
  const status = async () => {
    const run = await cli(["status", "--json"], env, shortRunMs);
    let parsed: StatusJson;
    try {
      parsed = JSON.parse(run.stdout) as StatusJson;
    } catch {
      assert.fail(`status --json printed no JSON; ${show(run)}`);
    }
    return { run, ...parsed };
  };

  it("status --json on the healthy cluster: every node reachable, safe for locks, exit 0", {
    timeout: shortRunMs + 5_000,
  }, async () => {
    const { run, nodes, verdict } = await status();
    assert.equal(run.code, 0, show(run));
    assert.deepEqual(
      nodes.map((n) => n.reachable),
      [true, true, true, true, true],
      show(run),
    );
    assert.equal(verdict.locks.safe, true, show(run));
  });

  describe("losing the majority while the command runs", () => {
    const ttlMs = 2_000;
    /** Extensions fail from ttl/2 on; the lock is given up before its validity ends; then the close. */
    const lostExitMs = ttlMs + 10_000;

    it(`killing ${killed.length} of 5 nodes under the command: it gets SIGTERM, redquorum says the lock was lost and exits 5`, {
      timeout: cliStartMs + lostExitMs + 10_000,
    }, async () => {
      const ready = join(dir, "majority-ready");
      const marker = join(dir, "majority-term");
      const pids = pidFile(dir, "majority-pid");
      const child = startCli(
        [
          "lock",
          "cli:majority",
          "--ttl",
          `${ttlMs}ms`,
          "--",
          "sh",
          "-c",
          `trap 'echo term > ${marker}; exit 0' TERM; echo $$ > ${pids}; touch ${ready}; ` +
            "while :; do sleep 0.05; done",
        ],
        env,
      );
      const run = finished(child, cliStartMs + lostExitMs);
      await waitForFile(ready, cliStartMs + commandStartMs + 5_000, { child, run });
      for (const index of killed) await cluster.kill(index);

      const done = await run;
      assert.equal(done.code, 5, show(done));
      assert.match(
        done.stderr,
        /lost the lock on resource "cli:majority"[\s\S]*sending SIGTERM to the command/,
        show(done),
      );
      assert.equal(readFileSync(marker, "utf8"), "term\n", show(done));
    });
  });

  it(`status --json after ${killed.length} of 5 nodes are killed: those unreachable, NOT safe for locks, exit 3`, {
    timeout: shortRunMs + 10_000,
  }, async () => {
    for (const index of killed) await cluster.kill(index); // no-op for those already dead
    const { run, nodes, verdict } = await status();
    assert.equal(run.code, 3, show(run));
    assert.deepEqual(
      nodes.map((n) => n.reachable),
      [false, false, false, true, true],
      show(run),
    );
    assert.equal(verdict.locks.safe, false, show(run));
    assert.equal(verdict.locks.usable, 2, show(run));
    assert.equal(verdict.locks.needed, 3, show(run));
  });
});

describe("redquorum lock when a majority of the nodes is stopped (SIGSTOP)", () => {
  const stopped = [0, 1, 2];
  let cluster: LocalCluster;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    cluster = await LocalCluster.start({ nodeCount: 5, persistence: "none" });
    env = { REDQUORUM_NODES: cluster.urls.join(",") };
  });

  after(async () => {
    if (!cluster) return;
    // Only those the test paused (a --name filter may have skipped it).
    for (const index of stopped) {
      if (cluster.node(index).state === "paused") cluster.resume(index);
    }
    await cluster.stop();
  });

  const endpointOf = (index: number) => new URL(cluster.urls[index]!).host;

  it(`${stopped.length} of 5 stopped, --wait shorter than first contact: exit 3, says 2 nodes answered and names each stopped one with why`, {
    timeout: shortRunMs + 10_000,
  }, async () => {
    for (const index of stopped) cluster.pause(index);
    // A stopped node holds first contact for the check timeout (2 s): a
    // --wait of 1.5 s ends there, with the two running nodes checked and
    // the stopped ones not answering. (Were the checks slower than that
    // under load, the acquire round's error would say the same.)
    const run = await cli(
      ["lock", "cli:stopped", "--wait", "1500ms", "--", "true"],
      env,
      shortRunMs,
    );
    assert.equal(run.code, 3, show(run));
    assert.match(run.stderr, /reached 2 of 5 nodes, needs 3:/, show(run));
    const lines = run.stderr.split("\n");
    for (const index of stopped) {
      const line = lines.find((l) => l.trim().startsWith(`${endpointOf(index)}: `));
      assert.ok(line, `no line for stopped node ${endpointOf(index)}; ${show(run)}`);
      assert.match(line, /: no (answer|reply)/, show(run));
    }
    for (const index of [3, 4]) {
      assert.ok(!run.stderr.includes(endpointOf(index)), `running node named; ${show(run)}`);
    }
  });
});
