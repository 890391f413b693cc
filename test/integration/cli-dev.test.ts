import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { Redis } from "ioredis";
import { freePort } from "../../src/cluster/local-sockets.js";
import { limits } from "../../src/limits.js";
import { connectResult, startCli } from "../helpers/cli.js";

/** Bound on a short CLI run (status, id next, a usage error): its start (~0.2 s) plus a few round trips. */
const runTimeoutMs = 15_000;
/**
 * Bound on `dev` printing its line: its start, then 3 redis-servers that
 * must each answer PING (LocalCluster allows each 10 s), then two init rounds.
 */
const startTimeoutMs = 30_000;
/** Bound on `dev` exiting after a signal: SIGKILL 3 nodes, reap them, remove a directory. */
const stopTimeoutMs = 10_000;
/** Bound on `dev` reporting a node that died: its poll runs every 500 ms. */
const noticeTimeoutMs = 5_000;

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** One `redquorum <args>` run, its output collected as it comes. */
class CliRun {
  readonly child: ChildProcess;
  stdout = "";
  stderr = "";
  readonly exited: Promise<Exit>;

  constructor(args: readonly string[], env: NodeJS.ProcessEnv = {}) {
    this.child = startCli(args, env);
    this.child.stdout!.on("data", (chunk) => {
      this.stdout += chunk;
    });
    this.child.stderr!.on("data", (chunk) => {
      this.stderr += chunk;
    });
    this.exited = new Promise((resolve) => {
      this.child.on("close", (code, signal) => resolve({ code, signal }));
    });
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Resolves once `pattern` matches stream `from`; fails after `timeoutMs` or on an early exit. */
  async waitFor(pattern: RegExp, from: "stdout" | "stderr", timeoutMs: number) {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const match = this[from].match(pattern);
      if (match) return match;
      if (!this.running) {
        // Its output complete (read to the end), and how it ended.
        const { code, signal } = await this.exited;
        throw new Error(
          `exited (${signal ?? `code ${code}`}) before ${pattern} on ${from}; ${this.output()}`,
        );
      }
      if (performance.now() > deadline) {
        throw new Error(`no ${pattern} on ${from} within ${timeoutMs} ms; ${this.output()}`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** The exit, within `timeoutMs`. */
  async exit(timeoutMs: number): Promise<Exit> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`still running after ${timeoutMs} ms; ${this.output()}`)),
        timeoutMs,
      );
    });
    try {
      return await Promise.race([this.exited, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  output(): string {
    return `stdout: ${JSON.stringify(this.stdout)}, stderr: ${this.stderr}`;
  }
}

/** Polls `test` every 20 ms until it holds; fails after `timeoutMs`. */
async function waitUntil(test: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!test()) {
    if (performance.now() > deadline) throw new Error(`not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const portOf = (url: string) => Number(new URL(url).port);
const clusterDirs = (dir: string) =>
  readdirSync(dir).filter((n) => n.startsWith("redquorum-cluster-"));

/** After a stop: every node refuses connections, and no data directory is left. */
async function assertGone(urls: readonly string[], dir: string): Promise<void> {
  for (const url of urls) assert.equal(await connectResult(portOf(url)), "ECONNREFUSED", url);
  assert.deepEqual(clusterDirs(dir), []);
}

const max = limits.nodeCountMax;

describe("redquorum dev", () => {
  const runs: CliRun[] = [];
  const dirs: string[] = [];
  const cli = (args: readonly string[], env: NodeJS.ProcessEnv = {}) => {
    const run = new CliRun(args, env);
    runs.push(run);
    return run;
  };
  const dev = (args: readonly string[], env: NodeJS.ProcessEnv = {}) => cli(["dev", ...args], env);
  const tempDir = () => {
    const dir = mkdtempSync(join(tmpdir(), "redquorum-dev-"));
    dirs.push(dir);
    return dir;
  };

  after(async () => {
    for (const run of runs.filter((r) => r.running)) {
      // SIGINT first: a SIGKILLed dev would leave its redis-servers running.
      run.child.kill("SIGINT");
      await run.exit(stopTimeoutMs).catch(() => run.child.kill("SIGKILL"));
    }
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it("prints REDQUORUM_NODES for a ready cluster and removes it all on SIGINT (exit 0)", async () => {
    const dir = tempDir();
    // A REDQUORUM_NODES exported for the other commands must not get in dev's way.
    const run = dev(["--nodes", "3", "--dir", dir], { REDQUORUM_NODES: "redis://127.0.0.1:1" });
    const [line, list] = await run.waitFor(/^REDQUORUM_NODES=(\S+)\n/, "stdout", startTimeoutMs);
    const urls = list!.split(",");
    assert.equal(urls.length, 3, line);
    for (const url of urls) assert.match(url, /^redis:\/\/127\.0\.0\.1:\d+$/);
    assert.equal(clusterDirs(dir).length, 1);

    for (const url of urls) {
      const client = new Redis(url, { maxRetriesPerRequest: 0, retryStrategy: () => null });
      try {
        assert.equal(await client.ping(), "PONG");
      } finally {
        client.disconnect();
      }
    }
    const env = { REDQUORUM_NODES: urls.join(",") };
    const status = cli(["status", "--json"], env);
    const statusExit = await status.exit(runTimeoutMs);
    assert.equal(statusExit.code, 0, status.output());
    const { verdict } = JSON.parse(status.stdout);
    assert.equal(verdict.locks.safe, true, status.stdout);
    assert.equal(verdict.ids.safe, true, status.stdout);
    const id = cli(["id", "next"], env);
    assert.equal((await id.exit(runTimeoutMs)).code, 0, id.output());
    assert.match(id.stdout, /^[1-9]\d*\n$/);

    run.child.kill("SIGINT");
    const exit = await run.exit(stopTimeoutMs);
    assert.deepEqual(exit, { code: 0, signal: null }, run.output());
    assert.match(run.stderr, /SIGINT: stopping 3 nodes/);
    assert.match(run.stderr, /stopped\n$/);
    assert.equal(run.stdout, line, "stdout holds the one data line only");
    await assertGone(urls, dir);
  });

  it("--json; reports a node that dies and runs on; SIGTERM removes it all (exit 0)", async () => {
    const dir = tempDir();
    const run = dev(["--nodes", "3", "--dir", dir, "--json"]);
    await run.waitFor(/\n/, "stdout", startTimeoutMs);
    const printed = JSON.parse(run.stdout);
    assert.equal(printed.nodes.length, 3);
    assert.equal(printed.persistence, "always");
    assert.ok(printed.dir.startsWith(dir) && existsSync(printed.dir), printed.dir);
    assert.equal(run.stdout.split("\n").length, 2, "one line");
    await run.waitFor(/press Ctrl-C/, "stderr", runTimeoutMs); // printed with the line

    const pids = [...run.stderr.matchAll(/ pid (\d+) /g)].map((m) => Number(m[1]));
    assert.equal(pids.length, 3, run.stderr);
    process.kill(pids[1]!, "SIGKILL");
    await run.waitFor(/node 1 \(\S+\) exited; 2 left, a majority is 2/, "stderr", noticeTimeoutMs);
    assert.equal(run.running, true, "a dead node does not stop dev");

    run.child.kill("SIGTERM");
    const exit = await run.exit(stopTimeoutMs);
    assert.deepEqual(exit, { code: 0, signal: null }, run.output());
    assert.match(run.stderr, /SIGTERM: stopping 3 nodes/);
    assert.match(run.stderr, /stopped\n$/);
    await assertGone(printed.nodes, dir);
  });

  it("--ports starts the nodes on the ports given, their number the node count", async () => {
    const dir = tempDir();
    const ports = [await freePort(), await freePort(), await freePort()];
    const run = dev(["--ports", ports.join(","), "--dir", dir, "--json"]);
    await run.waitFor(/\n/, "stdout", startTimeoutMs);
    const printed = JSON.parse(run.stdout);
    assert.deepEqual(
      printed.nodes,
      ports.map((port) => `redis://127.0.0.1:${port}`),
    );
    run.child.kill("SIGINT");
    assert.deepEqual(await run.exit(stopTimeoutMs), { code: 0, signal: null }, run.output());
    await assertGone(printed.nodes, dir);
  });

  for (const host of ["127.0.0.1", "::1"]) {
    it(`--ports with a port taken on ${host} exits 2 naming it, before any node starts`, async () => {
      // ::1 alone is what a dev server listening on "localhost" holds:
      // redis-server binds both loopbacks, and exits on either taken.
      const dir = tempDir();
      const holder = createServer();
      await new Promise<void>((resolve) =>
        holder.listen({ port: 0, host, ipv6Only: true }, resolve),
      );
      const taken = (holder.address() as AddressInfo).port;
      try {
        const made = join(dir, "made");
        const run = dev([
          "--ports",
          `${await freePort()},${taken},${await freePort()}`,
          "--dir",
          made,
        ]);
        const exit = await run.exit(runTimeoutMs);
        assert.equal(exit.code, 2, run.output());
        assert.equal(run.stdout, "");
        assert.match(
          run.stderr,
          new RegExp(`^redquorum: invalid --ports: port ${taken} is taken \\(EADDRINUSE`),
        );
        assert.equal(run.stderr.trimEnd().split("\n").length, 1, run.stderr);
        assert.deepEqual(readdirSync(dir), [], "nothing started, no directory made");
      } finally {
        holder.close();
      }
    });
  }

  it("a node whose redis-server exits at its start: exit 3 with its output; nothing left, not even the directory dev made", async () => {
    const dir = tempDir();
    // A stand-in that fails as redis-server does on a bad configuration.
    const fake = join(dir, "redis-server");
    writeFileSync(fake, "#!/bin/sh\necho 'FATAL CONFIG FILE ERROR (stand-in)' >&2\nexit 1\n", {
      mode: 0o755,
    });
    const made = join(dir, "made");
    const run = dev(["--nodes", "1", "--dir", made], { REDQUORUM_REDIS_SERVER: fake });
    const exit = await run.exit(runTimeoutMs);
    assert.equal(exit.code, 3, run.output());
    assert.equal(run.stdout, "");
    assert.match(run.stderr, /exited \(1\) before it answered PING; its last output:/);
    assert.match(run.stderr, /FATAL CONFIG FILE ERROR \(stand-in\)/);
    assert.equal(existsSync(made), false, "the directory dev made is gone");
  });

  it("a second SIGINT while the nodes start exits 130 at once, leaving no node and no directory dev made", async () => {
    const dir = tempDir();
    // A stand-in that never answers PING: the start lasts until the signals.
    const fake = join(dir, "redis-server");
    writeFileSync(fake, "#!/bin/sh\nexec sleep 60\n", { mode: 0o755 });
    const made = join(dir, "made");
    const run = dev(["--nodes", "2", "--dir", made], { REDQUORUM_REDIS_SERVER: fake });
    await run.waitFor(/starting 2 redis-server nodes/, "stderr", startTimeoutMs);
    await waitUntil(() => existsSync(made) && readdirSync(made).length > 0, startTimeoutMs);
    run.child.kill("SIGINT");
    await run.waitFor(/SIGINT: stopping once the nodes have started/, "stderr", runTimeoutMs);
    run.child.kill("SIGINT");
    const exit = await run.exit(stopTimeoutMs);
    assert.deepEqual(exit, { code: 130, signal: null }, run.output());
    assert.match(run.stderr, /SIGINT again while starting: exiting now/);
    // Before, the cluster's own directory went, and the one dev made for it stayed.
    assert.equal(existsSync(made), false, `left: ${existsSync(made) && readdirSync(made)}`);
  });

  for (const [args, pattern] of [
    [
      ["--nodes", "0"],
      new RegExp(`^redquorum: invalid --nodes: "0": expected a node count from 1 to ${max}\\b`),
    ],
    [
      ["--ports", "7001,70000"],
      /^redquorum: invalid --ports: "70000" in "7001,70000": expected comma-separated port numbers from 1 to 65535/,
    ],
    [["--ports", "7001,7001"], /^redquorum: invalid --ports: "7001,7001": expected distinct ports/],
    [
      ["--nodes", "5", "--ports", "7001,7002,7003"],
      /^redquorum: invalid --nodes: 5 nodes, but --ports names 3: give one port per node, or leave --nodes out/,
    ],
    [
      ["--persistence", "sometimes"],
      /^redquorum: invalid --persistence: "sometimes": expected one of always, everysec, none/,
    ],
  ] as const) {
    it(`refuses ${args.join(" ")} with exit 2 and one line naming the option`, async () => {
      const dir = tempDir();
      const run = dev([...args, "--dir", dir]);
      const exit = await run.exit(runTimeoutMs);
      assert.equal(exit.code, 2, run.output());
      assert.equal(run.stdout, "");
      assert.equal(run.stderr.trimEnd().split("\n").length, 1, run.stderr);
      assert.match(run.stderr, pattern);
      assert.deepEqual(readdirSync(dir), [], "nothing started");
    });
  }
  it("without redis-server exits 3, its last line saying what to install", async () => {
    const dir = tempDir();
    const run = dev(["--nodes", "3", "--dir", dir], {
      REDQUORUM_REDIS_SERVER: join(dir, "no-such-redis-server"),
    });
    const exit = await run.exit(runTimeoutMs);
    assert.equal(exit.code, 3, run.output());
    assert.equal(run.stdout, "");
    assert.match(
      run.stderr.trimEnd().split("\n").at(-1)!,
      /^redquorum: redis-server not found at .*install it \(Debian\/Ubuntu: apt-get install -y redis-server\)$/,
    );
  });
});
