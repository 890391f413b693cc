/**
 * The README's main-job command, as a newcomer runs it: `npm start` builds
 * (quietly, and only when dist/ is older than the sources), starts `redquorum dev`, runs the demo through the CLI, keeps
 * the cluster and the ID server up, and stops everything on Ctrl-C (SIGINT
 * to the whole process group, as a terminal sends it), on SIGTERM to npm
 * alone (a service manager, `kill <pid>`), and on SIGTERM to the demo alone.
 * "Everything" is checked with ps: no process is left in npm's process
 * group (the demo, the CLI's children and the redis-servers all are in it).
 */
import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { describe, it } from "node:test";
import { connectResult } from "../helpers/cli.js";
import { sleep } from "../helpers/sleep.js";

/**
 * 5 nodes + 12 lock turns + IDs + status (about 6 s here, 50 s with the
 * machine loaded), with room for more; no build: the test runner leaves
 * dist/ up to date (a build would take ~11 s more).
 */
const upTimeoutMs = 120_000;
/** After the signal: the server drains, the nodes stop. */
const stopTimeoutMs = 30_000;
/** Each test's own bound, above the runner's 60 s default: a whole demo run and its stop. */
const timeout = upTimeoutMs + stopTimeoutMs + 10_000;

type Exit = { code: number | null; signal: NodeJS.Signals | null };

/** The processes of process group `pgid` still running, as ps lists them ("pid args"). */
function groupProcesses(pgid: number): string[] {
  const table = execFileSync("ps", ["-e", "-o", "pid=,pgid=,stat=,args="], { encoding: "utf8" });
  return table
    .split("\n")
    .map((line) => line.trim().split(/\s+/))
    .filter(([, group, stat]) => Number(group) === pgid && !stat?.startsWith("Z"))
    .map(([pid, , , ...args]) => `${pid} ${args.join(" ")}`);
}

/** `npm start` in a process group of its own, its output collected. */
class NpmStart {
  readonly child: ChildProcess;
  output = "";
  readonly exited: Promise<Exit>;
  private stopping: Promise<Exit> | undefined;

  constructor() {
    this.child = spawn("npm", ["start"], { detached: true, stdio: ["ignore", "pipe", "pipe"] });
    const collect = (chunk: Buffer) => {
      this.output += chunk;
    };
    this.child.stdout!.on("data", collect);
    this.child.stderr!.on("data", collect);
    this.exited = new Promise((resolve) =>
      this.child.once("close", (code, signal) => resolve({ code, signal })),
    );
  }

  get pgid(): number {
    return this.child.pid!;
  }

  /** Resolves once the output shows `text`; rejects if npm exits first or after `upTimeoutMs`. */
  until(text: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (!this.output.includes(text)) return false;
        clearTimeout(timer);
        this.child.stdout!.off("data", check);
        resolve();
        return true;
      };
      const timer = setTimeout(
        () =>
          reject(new Error(`no ${JSON.stringify(text)} within ${upTimeoutMs} ms:\n${this.output}`)),
        upTimeoutMs,
      );
      if (check()) return;
      this.child.stdout!.on("data", check);
      void this.exited.then(() => {
        if (!check()) {
          clearTimeout(timer);
          reject(new Error(`npm start exited before ${JSON.stringify(text)}:\n${this.output}`));
        }
      });
    });
  }

  /**
   * Sends `signal` to `pid` once, and SIGKILLs the whole group if npm has
   * not exited after `stopTimeoutMs`; also in a test's `finally`, so no
   * dev cluster outlives the test.
   */
  stop(signal: NodeJS.Signals, pid: number): Promise<Exit> {
    this.stopping ??= (async () => {
      try {
        process.kill(pid, signal);
      } catch {
        // Already gone.
      }
      const timer = setTimeout(() => this.killAll(), stopTimeoutMs);
      const exit = await this.exited;
      clearTimeout(timer);
      return exit;
    })();
    return this.stopping;
  }

  killAll(): void {
    try {
      process.kill(-this.pgid, "SIGKILL");
    } catch {
      // The group is gone.
    }
  }

  /** The demo's own process (`node scripts/demo.mjs`), found with ps in npm's group. */
  demoPid(): number {
    const demo = groupProcesses(this.pgid).find((line) => line.includes("scripts/demo.mjs"));
    assert.ok(demo, `no demo process in the group:\n${groupProcesses(this.pgid).join("\n")}`);
    return Number(demo.split(" ", 1)[0]);
  }

  /** Waits (bounded) for the group to empty; returns what is left. */
  async leftOver(): Promise<string[]> {
    // The processes have exited when npm has; ps may still list them for a moment.
    for (let i = 0; i < 50; i++) {
      const left = groupProcesses(this.pgid);
      if (left.length === 0) return [];
      await sleep(100);
    }
    return groupProcesses(this.pgid);
  }
}

/** The dev cluster's data directories still on disk. */
/** The dev clusters' data directories under .redquorum, but those in `before` (left by an earlier run that was killed). */
function dataDirsLeft(before: readonly string[] = []): string[] {
  return existsSync(".redquorum")
    ? readdirSync(".redquorum").filter(
        (name) => name.startsWith("redquorum-cluster-") && !before.includes(name),
      )
    : [];
}

describe("npm start", () => {
  it("brings the cluster up quietly, runs the demo, and stops cleanly on Ctrl-C", {
    timeout,
  }, async () => {
    const earlier = dataDirsLeft();
    const npm = new NpmStart();
    try {
      await npm.until("Press Ctrl-C to stop");
      const { output } = npm;
      // The build is one line, not tsup's report of every file (or none:
      // dist/ is up to date when the test runner starts this).
      assert.match(output, /built dist\/ in \d+\.\d s|dist\/ is up to date with the sources/);
      assert.doesNotMatch(output, /ESM Build|CJS Build|DTS Build|Build success/);
      // What the demo showed: the lock turns without overlap, IDs, the status verdict.
      assert.match(output, /12 turns: 0 overlapping holds seen, each fence above the one before/);
      assert.match(output, /fences go up, but not one by one/);
      assert.doesNotMatch(output, /could not release|exited with/);
      assert.match(output, /SHUTDOWN NOSAVE on node 4/);
      // (IDs may skip values after a lost round; they never repeat or go back.)
      const ids = /ids: ((?:\d+ ?){5})\n/.exec(output)![1]!.trim().split(" ").map(BigInt);
      const served = /POST \/v1\/ids \{"count": 3\} → (\S+)/.exec(output)![1]!;
      const more = (JSON.parse(served) as { ids: string[] }).ids.map(BigInt);
      const all = [...ids, ...more];
      assert.equal(all.length, 8);
      for (let i = 1; i < all.length; i++) assert.ok(all[i]! > all[i - 1]!, all.join(" "));
      assert.match(output, /locks: safe \(4 of 5 nodes usable, 3 needed\)/);
      const nodes = /export REDQUORUM_NODES=(\S+)/.exec(output)![1]!.split(",");
      const server = /redquorum serve listening on (\S+)/.exec(output)![1]!;
      const health = await fetch(`${server}/healthz`);
      assert.equal(health.status, 200, await health.text());

      // Ctrl-C: SIGINT to the whole group.
      const exit = await npm.stop("SIGINT", -npm.pgid);
      // npm ends itself by the signal it got (as shells expect); the demo exits 0.
      assert.ok(exit.code === 0 || exit.signal === "SIGINT", `${JSON.stringify(exit)}\n${output}`);
      assert.match(npm.output, /stopped; the cluster's data directory is removed/);
      assert.doesNotMatch(npm.output, /demo: /, "the demo reported an error");
      assert.deepEqual(await npm.leftOver(), []);
      for (const url of nodes) {
        assert.equal(await connectResult(Number(new URL(url).port)), "ECONNREFUSED", url);
      }
      assert.equal(await connectResult(Number(new URL(server).port)), "ECONNREFUSED", server);
      assert.deepEqual(dataDirsLeft(earlier), [], "the dev cluster's data directory is removed");
    } finally {
      npm.killAll();
    }
  });

  it("SIGTERM to npm alone, while the lock workers run, leaves nothing running", {
    timeout,
  }, async () => {
    const earlier = dataDirsLeft();
    const npm = new NpmStart();
    try {
      // Mid-demo: the cluster is up and workers come and go.
      await npm.until("holds demo:printer");
      assert.ok(groupProcesses(npm.pgid).some((line) => line.includes("redis-server")));
      await npm.stop("SIGTERM", npm.pgid);
      assert.deepEqual(await npm.leftOver(), [], npm.output);
      assert.match(npm.output, /SIGTERM: stopping/);
      assert.deepEqual(dataDirsLeft(earlier), [], npm.output);
      assert.doesNotMatch(npm.output, /could not release|demo: /);
    } finally {
      npm.killAll();
    }
  });

  it("SIGTERM to the demo alone, with the ID server up, leaves nothing running; so does a second signal on its heels", {
    timeout,
  }, async () => {
    const earlier = dataDirsLeft();
    const npm = new NpmStart();
    try {
      await npm.until("redquorum serve listening on");
      const demo = npm.demoPid();
      // As after Ctrl-C, when npm passes the SIGINT on to the demo that got one too.
      const exiting = npm.stop("SIGTERM", demo);
      process.kill(demo, "SIGINT");
      const exit = await exiting;
      assert.equal(exit.code, 0, `${JSON.stringify(exit)}\n${npm.output}`);
      assert.deepEqual(await npm.leftOver(), [], npm.output);
      assert.match(npm.output, /stopped; the cluster's data directory is removed/);
      assert.deepEqual(dataDirsLeft(earlier), [], npm.output);
    } finally {
      npm.killAll();
    }
  });
});
