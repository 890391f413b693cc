/**
 * `redquorum id` end to end: the ID commands against real redis-server
 * processes (aof-always, as NextId requires), run as a user runs them
 * (dist/cli.js). The other commands: cli.test.ts.
 */
import assert from "node:assert/strict";
import { closeSync, openSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { LocalCluster } from "../../src/index.js";
import { finished, type Run, startCli, startCliIntoPipe } from "../helpers/cli.js";

/** Bound on one CLI run: its start (about 0.2 s on this machine) plus the command's work, on a loaded machine. */
const runTimeoutMs = 15_000;

function cli(args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  return finished(startCli(args, env), runTimeoutMs);
}

/** What Node prints for an unhandled error (the EPIPE crash), or a stack frame. */
const crashed = /EPIPE|Unhandled|^\s+at /m;

describe("redquorum id", () => {
  let cluster: LocalCluster;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    // New nodes: `redquorum id init` writes the counter's marker.
    cluster = await LocalCluster.start({ nodeCount: 3, persistence: "aof-always", init: false });
    // Not about node timeouts: id init needs every node within the bound.
    env = { REDQUORUM_NODES: cluster.urls.join(","), REDQUORUM_NODE_TIMEOUT: "1s" };
  });

  after(() => cluster.stop());

  it("id next --count 3 prints 3 increasing IDs, one per line", async () => {
    // Before init: the error in command-line terms: the command to run,
    // with the key given (the library's text says "call init()").
    const before = await cli(["id", "next", "--key", "redquorum:id:cli-never"], env);
    assert.equal(before.code, 3, before.stderr);
    assert.match(before.stderr, /missing on \d+ of \d+ nodes/);
    assert.match(before.stderr, /run `redquorum id init --key "redquorum:id:cli-never"` once/);
    assert.doesNotMatch(before.stderr, /init\(\)/);
    const init = await cli(["id", "init"], env);
    assert.equal(init.code, 0, init.stderr);
    const status = await cli(["status", "--json"], env);
    const { verdict, idNodes } = JSON.parse(status.stdout);
    assert.equal(verdict.ids.safe, true, status.stdout);
    assert.deepEqual(
      idNodes.map((node: { marker: boolean }) => node.marker),
      [true, true, true],
    );
    const text = await cli(["status"], env);
    assert.match(text.stdout, /^IDs: safe \(3 of 3 nodes usable, 2 needed\)$/m);
    const other = await cli(["status", "--json", "--key", "redquorum:id:cli-never"], env);
    assert.equal(JSON.parse(other.stdout).verdict.ids.safe, false, "a counter never initialised");
    const otherText = await cli(["status", "--key", "redquorum:id:cli-never"], env);
    assert.match(
      otherText.stdout,
      /^IDs: not initialised \(no node holds the counter "redquorum:id:cli-never";/m,
    );
    const run = await cli(["id", "next", "--count", "3"], env);
    assert.equal(run.code, 0, run.stderr);
    const ids = run.stdout.trimEnd().split("\n").map(BigInt);
    assert.equal(ids.length, 3);
    assert.ok(ids[0]! < ids[1]! && ids[1]! < ids[2]!, run.stdout);
    const json = await cli(["id", "next", "--json"], env);
    const [next] = JSON.parse(json.stdout) as string[];
    assert.ok(BigInt(next!) > ids[2]!);
  });

  it("id init and id next take --node-timeout or $REDQUORUM_NODE_TIMEOUT (1ms to 1s), refusing a value outside it as what was given", async () => {
    // The flag on one command, the variable on the other (one option builder serves both).
    const help = await cli(["id", "init", "--help"], env);
    assert.match(
      help.stdout,
      /--node-timeout <duration>.*\(default: 200ms, env: REDQUORUM_NODE_TIMEOUT\)/s,
    );
    const flag = await cli(["id", "init", "--node-timeout", "2s"], env);
    assert.equal(flag.code, 2, flag.stderr);
    assert.match(flag.stderr, /invalid --node-timeout: "2s": expected 1ms to 1s/);
    const fromEnv = await cli(["id", "next"], { ...env, REDQUORUM_NODE_TIMEOUT: "0ms" });
    assert.equal(fromEnv.code, 2, fromEnv.stderr);
    assert.match(fromEnv.stderr, /invalid --node-timeout \(given as \$REDQUORUM_NODE_TIMEOUT\)/);
    const next = await cli(["id", "next", "--node-timeout", "1s"], env);
    assert.equal(next.code, 0, next.stderr);
    assert.match(next.stdout, /^\d+\n$/);
  });

  it("id init on a counter that handed out IDs: exit 7, one line saying it is left as it is and why that may be fine", async () => {
    // The test before initialised "redquorum:id" and took IDs from it.
    const run = await cli(["id", "init"], env);
    assert.equal(run.code, 7, run.stderr);
    assert.equal(run.stdout, "");
    assert.equal(run.stderr.trimEnd().split("\n").length, 1, run.stderr);
    assert.match(
      run.stderr,
      /"redquorum:id" already handed out IDs \(on 3 of 3 nodes.*left as it is: not an error if it was initialised before/,
    );
    // A counter that handed out none: init again is fine (exit 0), as before.
    const fresh = await cli(["id", "init", "--key", "redquorum:id:cli-fresh"], env);
    assert.equal(fresh.code, 0, fresh.stderr);
    const again = await cli(["id", "init", "--key", "redquorum:id:cli-fresh"], env);
    assert.equal(again.code, 0, again.stderr);
    // The code is in the table --help prints.
    const help = await cli(["--help"]);
    assert.match(help.stdout, /^ {2}7 +id init: the counter already handed out IDs/m);
    assert.match(help.stdout, /^ {2}141 +stdout was closed/m);
  });

  it("id next --proposals clock prints an ID at least the wall clock in microseconds; a bad kind is a usage error", async () => {
    const before = BigInt(Date.now() - 1_000) * 1_000n;
    const run = await cli(["id", "next", "--proposals", "clock"], env);
    assert.equal(run.code, 0, run.stderr);
    const id = BigInt(run.stdout.trim());
    assert.ok(id >= before, `${id} is below the clock at the start, ${before}`);
    const dense = await cli(["id", "next"], env);
    assert.equal(dense.code, 0, dense.stderr);
    assert.ok(BigInt(dense.stdout.trim()) > id, "a dense ID after it is above it");
    const bad = await cli(["id", "next", "--proposals", "fast"], env);
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /--proposals/);
    // Any subcommand's own parse error is a usage error too (it used to exit 1).
    const unknown = await cli(["id", "next", "--bogus"], env);
    assert.equal(unknown.code, 2, unknown.stderr);
  });

  it("$REDQUORUM_ID_KEY names the counter for id init, id next and status, as it does for serve; $REDQUORUM_PROPOSALS the proposals", async () => {
    const keyed = { ...env, REDQUORUM_ID_KEY: "redquorum:id:from-env" };
    const init = await cli(["id", "init"], keyed);
    assert.equal(init.code, 0, init.stderr);
    assert.match(init.stderr, /"redquorum:id:from-env"/);
    const status = await cli(["status", "--json"], keyed);
    assert.equal(JSON.parse(status.stdout).verdict.ids.safe, true, status.stdout);
    const first = await cli(["id", "next"], keyed);
    assert.equal(first.code, 0, first.stderr);
    // The same counter under the flag: the next ID is above it.
    const flagged = await cli(["id", "next", "--key", "redquorum:id:from-env"], env);
    assert.equal(flagged.code, 0, flagged.stderr);
    assert.ok(BigInt(flagged.stdout.trim()) > BigInt(first.stdout.trim()), flagged.stdout);
    const before = BigInt(Date.now() - 1_000) * 1_000n;
    const clock = await cli(["id", "next"], { ...keyed, REDQUORUM_PROPOSALS: "clock" });
    assert.equal(clock.code, 0, clock.stderr);
    assert.ok(
      BigInt(clock.stdout.trim()) >= before,
      `${clock.stdout.trim()} is not a clock proposal`,
    );
  });

  it("status counts a node with no-appendfsync-on-rewrite yes out for IDs, naming it, as NextId refuses it", async () => {
    const keyed = { ...env, REDQUORUM_ID_KEY: "redquorum:id:rewrite" };
    const init = await cli(["id", "init"], keyed);
    assert.equal(init.code, 0, init.stderr);
    const node = new Redis(cluster.urls[1]!);
    try {
      await node.config("SET", "no-appendfsync-on-rewrite", "yes");
      const status = await cli(["status", "--json"], keyed);
      const { verdict } = JSON.parse(status.stdout);
      assert.equal(verdict.ids.usable, 2, status.stdout);
      const endpoint = cluster.urls[1]!.replace("redis://", "");
      assert.ok(
        verdict.ids.reasons.includes(`${endpoint}: no-appendfsync-on-rewrite yes, needs no`),
        status.stdout,
      );
    } finally {
      await node.config("SET", "no-appendfsync-on-rewrite", "no");
      await node.quit();
    }
  });

  it("id next > /dev/full: exit 1 and one line saying the output is lost, no stack; the IDs taken are never handed out again", async () => {
    // A counter of its own: the test runs alone too (--name).
    const keyed = { ...env, REDQUORUM_ID_KEY: "redquorum:id:full" };
    const init = await cli(["id", "init"], keyed);
    assert.equal(init.code, 0, init.stderr);
    const before = await cli(["id", "next"], keyed);
    assert.equal(before.code, 0, before.stderr);
    const full = openSync("/dev/full", "w");
    let run: Run;
    try {
      run = await finished(
        startCli(["id", "next", "--count", "5"], keyed, { stdout: full }),
        runTimeoutMs,
      );
    } finally {
      closeSync(full);
    }
    assert.equal(run.code, 1, run.stderr);
    assert.doesNotMatch(run.stderr, crashed);
    assert.match(run.stderr, /^redquorum: could not write the output \(ENOSPC\): it is lost$/m);
    const after = await cli(["id", "next"], keyed);
    assert.ok(BigInt(after.stdout.trim()) > BigInt(before.stdout.trim()) + 5n, after.stdout);
  });

  it("id next --count 10000 | head -1: exit 141 quietly; the IDs not printed were taken, never handed out again", async () => {
    // Clock proposals: IDs of 16 digits, 170 KB in all, more than the pipe
    // (64 KiB) and the chunk read (at most 64 KiB) hold: the CLI's write
    // must meet the closed pipe.
    const { firstChunk, run } = startCliIntoPipe(
      ["id", "next", "--count", "10000", "--proposals", "clock"],
      env,
      { readFirst: true, timeoutMs: runTimeoutMs },
    );
    const [chunk, done] = await Promise.all([firstChunk, run]);
    assert.equal(done.code, 141, done.stderr);
    assert.equal(done.signal, null);
    assert.doesNotMatch(done.stderr, crashed);
    const first = chunk.split("\n", 1)[0]!;
    assert.match(
      first,
      /^\d{16,}$/,
      "the first line is a whole ID, of the size the test relies on",
    );
    // The batch was taken whole: the next ID is above all 10000 of it.
    const next = await cli(["id", "next"], env);
    assert.equal(next.code, 0, next.stderr);
    assert.ok(BigInt(next.stdout.trim()) > BigInt(first) + 9_999n, next.stdout);
  });
});
