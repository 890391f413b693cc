import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { defaults, LocalCluster } from "../../src/index.js";
import { finished, type Run, startCli, startCliIntoPipe } from "../helpers/cli.js";
import { sleep } from "../helpers/sleep.js";

/** Bound on one CLI run: its start (about 0.2 s on this machine) plus the command's work, on a loaded machine. */
const runTimeoutMs = 15_000;

function cli(args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  return finished(startCli(args, env), runTimeoutMs);
}

/** What Node prints for an unhandled error (the EPIPE crash), or a stack frame. */
const crashed = /EPIPE|Unhandled|^\s+at /m;

async function waitForFile(path: string, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!existsSync(path)) {
    if (performance.now() > deadline) throw new Error(`${path} not created within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("redquorum command line", () => {
  let cluster: LocalCluster;
  let clients: Redis[];
  let env: NodeJS.ProcessEnv;
  let dir: string;

  /** How many nodes hold `key`. */
  const holders = async (key: string) =>
    (await Promise.all(clients.map((c) => c.exists(key)))).reduce((a, b) => a + b, 0);

  before(async () => {
    // New nodes, not marked: what `redquorum init` is for. aof-always for NextId.
    cluster = await LocalCluster.start({ nodeCount: 3, persistence: "aof-always", init: false });
    clients = cluster.urls.map((url) => {
      const client = new Redis(url, { commandTimeout: 2_000, maxRetriesPerRequest: 1 });
      client.on("error", () => {});
      return client;
    });
    // No test here is about node timeouts: not on the 50 ms default, which a
    // loaded machine exceeded (a lock then held on 2 of the 3 nodes).
    env = { REDQUORUM_NODES: cluster.urls.join(","), REDQUORUM_NODE_TIMEOUT: "500ms" };
    dir = mkdtempSync(join(tmpdir(), "redquorum-cli-"));
  });

  after(async () => {
    for (const client of clients) client.disconnect();
    rmSync(dir, { recursive: true, force: true });
    await cluster.stop();
  });

  it("refuses a bad duration with exit 2 and one line naming the argument", async () => {
    const run = await cli(["lock", "--ttl", "30", "r", "--", "true"], env);
    assert.equal(run.code, 2);
    assert.equal(run.stdout, "");
    assert.equal(run.stderr.trimEnd().split("\n").length, 1, run.stderr);
    assert.match(run.stderr, /--ttl.*"30".*ms, s, m or h/);
  });

  it("a bad value from an environment variable is named as that variable too (exit 2)", async () => {
    const fromEnv = await cli(["lock", "r", "--", "true"], {
      ...env,
      REDQUORUM_NODE_TIMEOUT: "5h",
    });
    assert.equal(fromEnv.code, 2, fromEnv.stderr);
    assert.match(
      fromEnv.stderr,
      /^redquorum: invalid --node-timeout \(given as \$REDQUORUM_NODE_TIMEOUT\): "5h": expected/,
    );
    const port = await cli(["serve"], { ...env, REDQUORUM_PORT: "abc" });
    assert.equal(port.code, 2, port.stderr);
    assert.match(port.stderr, /^redquorum: invalid --port \(given as \$REDQUORUM_PORT\): "abc"/);
    // Typed, the flag is what was given, whatever the environment holds.
    const typed = await cli(["serve", "--port", "xyz"], { ...env, REDQUORUM_PORT: "abc" });
    assert.equal(typed.code, 2, typed.stderr);
    assert.match(typed.stderr, /^redquorum: invalid --port: "xyz"/);
  });

  it("a duration flag out of range is refused with the range its --help states", async () => {
    const help = (await cli(["serve", "--help"])).stdout.replace(/\s+/g, " ");
    for (const [flag, tooLong, range] of [
      ["--drain-timeout", "2h", "0ms to 1h"],
      ["--request-timeout", "2m", "1ms to 1m"],
      ["--node-timeout", "2s", "1ms to 1s"],
    ] as const) {
      const start = help.indexOf(`${flag} <duration>`);
      const text = help.slice(start, help.indexOf(" --", start + flag.length));
      assert.ok(text.includes(range), `${flag}'s help: ${text}`);
      const run = await cli(["serve", flag, tooLong], env);
      assert.equal(run.code, 2, run.stderr);
      assert.match(run.stderr, new RegExp(`${flag}: "${tooLong}": expected ${range}$`, "m"));
    }
  });

  it("status says a new cluster is not safe (exit 3); after init every node is marked", async () => {
    const before = await cli(["status"], env);
    assert.equal(before.code, 3, before.stderr);
    assert.match(before.stdout, /locks: NOT safe/);
    assert.match(before.stdout, /no marker: run `redquorum init`/);
    // No ID counter: one line saying so, not "NOT safe" and a reason per node.
    assert.match(
      before.stdout,
      /^IDs: not initialised \(no node holds the counter "redquorum:id"; `redquorum id init` creates it on a new cluster\)$/m,
    );
    assert.doesNotMatch(before.stdout, /IDs: NOT safe|no ID counter marker/);

    const init = await cli(["init", "--json"], env);
    assert.equal(init.code, 0, init.stderr);
    const reports = JSON.parse(init.stdout) as { found: string; action: string }[];
    assert.deepEqual(
      reports.map((r) => [r.found, r.action]),
      Array(3).fill(["not marked", "marked"]),
    );

    const status = await cli(["status", "--json", "--nodes", cluster.urls.join(",")]);
    assert.equal(status.code, 0, status.stderr);
    const { nodes, verdict } = JSON.parse(status.stdout);
    assert.equal(nodes.length, 3);
    for (const node of nodes) {
      assert.equal(node.reachable, true);
      assert.equal(node.marker, true);
      assert.equal(node.quarantineRemainingMs, 0);
      assert.equal(node.appendfsync, "always");
    }
    assert.equal(verdict.locks.safe, true);
    // IDs have their own counter marker, which only `id init` writes.
    assert.equal(verdict.ids.safe, false);
    assert.match(verdict.ids.reasons.join("\n"), /no ID counter marker: run `redquorum id init`/);
  });

  it("--help and status into a pipe whose reader is gone: exit 141, no EPIPE stack, the process ends by itself", async () => {
    // The read end is closed right after the spawn, before the CLI has
    // started: its first write to stdout fails with EPIPE, every time.
    for (const args of [["--help"], ["status"]]) {
      const { run } = startCliIntoPipe(args, env, { readFirst: false, timeoutMs: runTimeoutMs });
      const done = await run; // fails if the CLI does not exit (connections left open)
      assert.equal(done.code, 141, `${args.join(" ")}: ${done.stderr}`);
      assert.equal(done.signal, null);
      assert.doesNotMatch(done.stderr, crashed, args.join(" "));
    }
  });

  it("fencing-floor refuses a token that is not a counter (exit 2); where every node's counters are known it raises their floors once (exit 0), and a second run changes nothing", async () => {
    const bad = await cli(["fencing-floor", "12abc"], env);
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /invalid <token>: .*decimal string/);
    // The cluster was initialised by the test before (in order).
    const actions = async () => {
      const run = await cli(["fencing-floor", "1000", "--json"], env);
      assert.equal(run.code, 0, run.stderr);
      const reports = JSON.parse(run.stdout) as { found: string; action: string }[];
      return reports.map((r) => [r.found, r.action]);
    };
    assert.deepEqual(await actions(), Array(3).fill(["known", "raised"]));
    assert.deepEqual(await actions(), Array(3).fill(["known", "none"]));
  });

  it("init lifts no quarantine unless --lift-quarantines says the nodes are new", async () => {
    const fresh = await LocalCluster.start({ nodeCount: 3, persistence: "none", init: false });
    // Not about node timeouts either: a --ttl 1s lock on the 50 ms default
    // loses its first extension to one slow answer (exit 5, not 0).
    const nodes = {
      REDQUORUM_NODES: fresh.urls.join(","),
      REDQUORUM_NODE_TIMEOUT: env.REDQUORUM_NODE_TIMEOUT,
    };
    try {
      // A first lock call before init puts every new node in quarantine.
      // (It then retries the quarantined nodes until --wait ends: 3 s is
      // room for first contact on a loaded machine, not the default 10 s.)
      const early = await cli(
        ["lock", "cli:early", "--ttl", "1s", "--wait", "3s", "--", "true"],
        nodes,
      );
      assert.equal(early.code, 3, early.stderr);
      assert.match(early.stderr, /quarantined/);
      // Nothing marked, every node in quarantine: not ready, and the exit code says so.
      const kept = await cli(["init", "--json"], nodes);
      assert.equal(kept.code, 3, kept.stderr);
      assert.match(
        kept.stderr,
        /not ready for locks: 0 of 3 nodes in service, 2 needed \(3 left to recover\)/,
      );
      const keptReports = JSON.parse(kept.stdout) as { action: string; detail: string }[];
      for (const report of keptReports) {
        assert.equal(report.action, "left to recover");
        assert.match(report.detail, /--lift-quarantines/);
      }
      const lifted = await cli(["init", "--lift-quarantines", "--json"], nodes);
      assert.equal(lifted.code, 0, lifted.stderr);
      assert.doesNotMatch(lifted.stderr, /not ready/);
      const liftedReports = JSON.parse(lifted.stdout) as { action: string }[];
      assert.deepEqual(
        liftedReports.map((r) => r.action),
        ["marked", "marked", "marked"],
      );
      const run = await cli(["lock", "cli:early", "--ttl", "1s", "--", "true"], nodes);
      assert.equal(run.code, 0, run.stderr);
    } finally {
      await fresh.stop();
    }
  });

  it("lock runs the command with its fence and exits with its code, then releases", async () => {
    const run = await cli(
      [
        "lock",
        "cli:job",
        "--ttl",
        "5s",
        "--",
        "sh",
        "-c",
        'echo "$REDQUORUM_FENCE $REDQUORUM_RESOURCES"; exit 7',
      ],
      env,
    );
    assert.equal(run.code, 7, run.stderr);
    assert.match(run.stdout, /^\d+ cli:job\n$/);
    assert.equal(await holders("cli:job"), 0);
  });

  it("lock --max-ttl: the quarantine's length recorded on every node (also from $REDQUORUM_MAX_TTL); a --ttl above it is a usage error", async () => {
    const records = () => Promise.all(clients.map((c) => c.zrange("redquorum:horizon", 0, -1)));
    const flag = await cli(["lock", "--max-ttl", "7m", "cli:max", "--", "true"], env);
    assert.equal(flag.code, 0, flag.stderr);
    for (const members of await records()) assert.ok(members.includes("420000"), String(members));
    const fromEnv = await cli(["lock", "cli:max", "--", "true"], {
      ...env,
      REDQUORUM_MAX_TTL: "8m",
    });
    assert.equal(fromEnv.code, 0, fromEnv.stderr);
    for (const members of await records()) assert.ok(members.includes("480000"), String(members));
    const over = await cli(["lock", "--max-ttl", "10s", "--ttl", "20s", "r", "--", "true"], env);
    assert.equal(over.code, 2);
    assert.match(over.stderr, /--ttl.*20s.*10s/);
    // The default --ttl (30s) is lowered to a shorter --max-ttl, not refused.
    const short = await cli(["lock", "--max-ttl", "10s", "cli:short", "--", "true"], env);
    assert.equal(short.code, 0, short.stderr);
    // A --max-ttl below the shortest TTL is what is wrong, not the --ttl
    // nobody gave ("invalid --ttl: 1ms: expected 100ms to 1ms").
    const tiny = await cli(["lock", "--max-ttl", "1ms", "r", "--", "true"], env);
    assert.equal(tiny.code, 2, tiny.stderr);
    assert.match(tiny.stderr, /invalid --max-ttl: "1ms": expected at least 100ms/);
  });

  it("a second lock gives up after --wait with exit 4 without running; SIGTERM reaches the command", async () => {
    const ready = join(dir, "ready");
    const trapped = join(dir, "trapped");
    const ran = join(dir, "second-ran");
    // The command runs in a process group of its own: if this test fails
    // before it is stopped, it still ends by itself (within a minute).
    const holder = startCli(
      [
        "lock",
        "cli:held",
        "--",
        "sh",
        "-c",
        `trap 'echo term > ${trapped}; exit 0' TERM; touch ${ready}; ` +
          "i=0; while [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done",
      ],
      env,
    );
    const held = finished(holder, runTimeoutMs);
    try {
      await waitForFile(ready, runTimeoutMs);
      // Held by a majority at once; the third node's vote may still be on
      // its way (its first contact can lag the majority), so it is waited
      // for within the check timeout rather than read at once.
      const deadline = performance.now() + 2 * defaults.checkTimeoutMs;
      while ((await holders("cli:held")) < 3 && performance.now() < deadline) await sleep(20);
      assert.equal(await holders("cli:held"), 3);

      // Refused within --wait (first contact with the nodes comes before it).
      const second = await cli(["lock", "cli:held", "--wait", "2s", "--", "touch", ran], env);
      assert.equal(second.code, 4, second.stderr);
      assert.match(second.stderr, /could not get the lock within 2s/);
      assert.equal(existsSync(ran), false);
    } finally {
      holder.kill("SIGTERM");
    }
    const run = await held;
    assert.equal(run.code, 0, run.stderr); // the command's code: it trapped SIGTERM and exited 0
    assert.equal(readFileSync(trapped, "utf8"), "term\n");
    assert.equal(await holders("cli:held"), 0);
  });

  it("a lost lock sends the command SIGTERM and exits 5", async () => {
    const ready = join(dir, "lost-ready");
    const holder = startCli(
      ["lock", "cli:lost", "--ttl", "1s", "--", "sh", "-c", `touch ${ready}; exec sleep 30`],
      env,
    );
    const held = finished(holder, runTimeoutMs);
    await waitForFile(ready, runTimeoutMs);
    // Someone deletes the lock: the next extension (at half the TTL) is refused.
    await Promise.all(clients.map((c) => c.del("cli:lost")));
    const run = await held;
    assert.equal(run.code, 5, run.stderr);
    assert.match(run.stderr, /lost the lock.*SIGTERM/);
  });

  it("members replace names <old-url> when it is not in the list (exit 2)", async () => {
    const run = await cli(
      ["members", "replace", "redis://127.0.0.1:1", "redis://127.0.0.1:2"],
      env,
    );
    assert.equal(run.code, 2, run.stderr);
    assert.match(
      run.stderr,
      /invalid <old-url>: redis:\/\/127\.0\.0\.1:1 is not one of the nodes given/,
    );
  });

  it("a bad value the library refuses is named as the command line's: --nodes and which URL, --key, <token> (exit 2)", async () => {
    const badUrl = await cli(
      ["status", "--nodes", `${cluster.urls[0]},redis://127.0.0.1:1/x`],
      env,
    );
    assert.equal(badUrl.code, 2, badUrl.stderr);
    assert.match(
      badUrl.stderr,
      /^redquorum: invalid --nodes \(or \$REDQUORUM_NODES\), URL 2: .*database must be a number/m,
    );
    const key = await cli(["id", "next", "--key", ""], env);
    assert.equal(key.code, 2, key.stderr);
    assert.match(key.stderr, /^redquorum: invalid --key: expected a non-empty string/m);
    const token = await cli(["fencing-floor", "abc"], env);
    assert.equal(token.code, 2, token.stderr);
    assert.match(token.stderr, /^redquorum: invalid <token>: .*got "abc"/m);
  });

  it("a node given twice in --nodes is a usage error (exit 2) naming both places, before any connection", async () => {
    const url = cluster.urls[0]!;
    const run = await cli(["status", "--nodes", `${url},${cluster.urls[1]},${url}/0`], env);
    assert.equal(run.code, 2, run.stderr);
    assert.match(
      run.stderr,
      /invalid --nodes \(or \$REDQUORUM_NODES\): URLs 1 and 3 are the same node/,
    );
  });

  it("members add of a node already in the list says so (exit 2), not that the list names a server twice", async () => {
    const run = await cli(["members", "add", cluster.urls[1]!], env);
    assert.equal(run.code, 2, run.stderr);
    const endpoint = cluster.urls[1]!.replace("redis://", "");
    assert.match(
      run.stderr,
      new RegExp(`invalid <url>: ${endpoint} is already a member \\(nodes\\[1\\]\\)`),
    );
  });

  it("members show exits 0 when the members answer, and 3 when only a minority did (what it read may be out of date)", async () => {
    const all = await cli(["members", "show"], env);
    assert.equal(all.code, 0, all.stdout + all.stderr);
    assert.match(all.stdout, /^membership: cluster \w+, epoch \d+, 3 members/m);
    // Two of three paused: the record shown comes from one node, and a
    // change may have landed on the others. It exited 0 before.
    cluster.pause(1);
    cluster.pause(2);
    try {
      const minority = await cli(["members", "show"], env);
      assert.equal(minority.code, 3, minority.stdout + minority.stderr);
      assert.match(minority.stderr, /only 1 of 3 nodes answered, 2 needed: .*may be out of date/);
      const json = await cli(["members", "show", "--json"], env);
      assert.equal(json.code, 3);
      assert.match(JSON.parse(json.stdout).problem, /only 1 of 3 nodes answered/);
    } finally {
      cluster.resume(1);
      cluster.resume(2);
    }
  });

  // Last: it leaves a node taken back after a flush, in the quarantine.
  it("status: a member that lost its memory is named, and the cluster is still safe (exit 0) until a client takes it back", async () => {
    await clients[2]!.flushall();
    const lost = await cli(["status"], env);
    assert.equal(lost.code, 0, lost.stdout + lost.stderr);
    assert.match(lost.stdout, /^locks: safe/m);
    assert.doesNotMatch(lost.stdout, /NOT safe/);
    const endpoint = cluster.urls[2]!.replace("redis://", "");
    assert.match(lost.stdout, new RegExp(`${endpoint}: lost its memory .*takes it back`));
    const json = JSON.parse((await cli(["status", "--json"], env)).stdout);
    assert.deepEqual(json.membership.lostMemory, [endpoint]);

    const taken = await cli(["lock", "cli:take-back", "--", "true"], env);
    assert.equal(taken.code, 0, taken.stderr);
    const after = JSON.parse((await cli(["status", "--json"], env)).stdout);
    assert.equal(after.membership.lostMemory, undefined);
    assert.equal(after.membership.problem, undefined);
  });
});
