import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { claimPort, claimRange, claimsDir, release } from "../../src/cluster/port-claims.js";
import {
  InvalidArgumentError,
  LocalCluster,
  type LocalClusterOptions,
  Redlock,
  RedquorumError,
  type RestartOptions,
} from "../../src/index.js";
import { libraryUrl } from "../helpers/built.js";
import { notAboutTimeouts } from "../helpers/timeouts.js";

/** A port the system picks as free now (another process may take it meanwhile). */
function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Running, not dead or a zombie waiting to be reaped by init. */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

/**
 * Whether each process is still alive once those that got a SIGKILL have
 * died: the script exits right after sending it, and a loaded machine may
 * run the exit before the kill has landed (5 s at most).
 */
async function gone(pids: readonly number[]): Promise<boolean[]> {
  const deadline = performance.now() + 5_000;
  while (pids.some(alive) && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return pids.map(alive);
}

/** The pid that claims `port` among local clusters, if any (port-claims.ts). */
function claimant(port: number): number | undefined {
  try {
    return Number(readFileSync(join(claimsDir, String(port)), "utf8"));
  } catch {
    return undefined;
  }
}

async function withClient<T>(url: string, run: (client: Redis) => Promise<T>): Promise<T> {
  const client = new Redis(url, { maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on("error", () => {});
  try {
    return await run(client);
  } finally {
    client.disconnect();
  }
}

describe("LocalCluster", () => {
  let cluster: LocalCluster;

  before(async () => {
    cluster = await LocalCluster.start({ nodeCount: 3, persistence: "aof-always" });
  });
  after(() => cluster.stop());

  it("starts independent nodes on distinct loopback ports, never 6379, each with its own data directory", async () => {
    const ports = cluster.nodes.map((n) => n.port);
    assert.equal(new Set(ports).size, 3);
    assert.ok(!ports.includes(6379));
    assert.equal(new Set(cluster.nodes.map((n) => n.dataDir)).size, 3);
    const runIds = await Promise.all(
      cluster.urls.map((url) =>
        withClient(url, async (c) => /run_id:(\w+)/.exec(await c.info("server"))![1]),
      ),
    );
    assert.equal(new Set(runIds).size, 3);
    const fsync = await withClient(cluster.urls[0]!, (c) => c.config("GET", "appendfsync"));
    assert.deepEqual(fsync, ["appendfsync", "always"]);
  });

  it("each node is its own process: INFO's process_id is the pid the cluster reports", async () => {
    const pids = await Promise.all(
      cluster.urls.map((url) =>
        withClient(url, async (c) => Number(/process_id:(\d+)/.exec(await c.info("server"))![1])),
      ),
    );
    assert.deepEqual(
      pids,
      cluster.nodes.map((n) => n.pid),
    );
  });

  it("a port another cluster's node holds fails the start, naming the port, and never adopts that node", async () => {
    // Two clusters started side by side can draw the same free port; the one
    // whose redis-server loses the bind must not answer with the other's node.
    const taken = cluster.node(2).port;
    const second = LocalCluster.start({ ports: [taken], startTimeoutMs: 3_000 });
    await assert.rejects(second, (error: unknown) => {
      assert.ok(error instanceof RedquorumError, String(error));
      assert.equal(error.code, "ERR_CLUSTER");
      // Found taken before a redis-server is started on it; one started in
      // a race with the bind is told apart from the holder by its pid.
      assert.match(error.message, new RegExp(`^node 0: port ${taken} is taken \\(`));
      return true;
    });
    assert.equal(await withClient(cluster.urls[2]!, (c) => c.ping()), "PONG");
  });

  it("a node whose redis-server exits at its start fails the start, saying it exited, with its output", async () => {
    await assert.rejects(
      LocalCluster.start({ nodeCount: 1, extraArgs: ["--no-such-directive", "1"] }),
      (error: unknown) => {
        assert.ok(error instanceof RedquorumError, String(error));
        assert.equal(error.code, "ERR_CLUSTER");
        // Before: "did not answer PING within 10000 ms", though it had exited.
        assert.match(error.message, /exited \(1\) before it answered PING; its last output:/);
        assert.match(error.message, /no-such-directive/);
        return true;
      },
    );
  });

  it("fixed ports: the nodes start on them; a wrong list is a typed error", async () => {
    const [a, b] = [await freeLoopbackPort(), await freeLoopbackPort()];
    const fixed = await LocalCluster.start({ ports: [a!, b!] });
    try {
      assert.deepEqual(
        fixed.nodes.map((n) => n.port),
        [a, b],
      );
    } finally {
      await fixed.stop();
    }
    await assert.rejects(LocalCluster.start({ ports: [a!, a!] }), /distinct ports/);
    await assert.rejects(
      LocalCluster.start({ nodeCount: 3, ports: [a!] }),
      /one port per node \(3\), got 1/,
    );
    await assert.rejects(LocalCluster.start({ ports: [0] }), /ports\[0\]/);
  });

  it("restart keeps the data (AOF); restart empty loses it", async () => {
    await withClient(cluster.urls[0]!, (c) => c.set("kept", "1"));
    await cluster.restart(0);
    assert.equal(await withClient(cluster.urls[0]!, (c) => c.get("kept")), "1");
    await cluster.restart(0, { keepData: false });
    assert.equal(await withClient(cluster.urls[0]!, (c) => c.get("kept")), null);
  });

  it("refuses unknown options and a keepData that is not a boolean, before any node starts or stops", async () => {
    // Before, each was ignored: a cluster started with AOF, a restart meant to lose the data kept it.
    const startCases: Array<[string, LocalClusterOptions]> = [
      ["cluster options.persistance", { nodeCount: 1, persistance: "none" } as never],
      ["baseDir", { nodeCount: 1, baseDir: 5 as never }],
      ["init", { nodeCount: 1, init: "false" as never }],
    ];
    for (const [argument, options] of startCases) {
      await assert.rejects(LocalCluster.start(options), (error: unknown) => {
        assert.ok(error instanceof InvalidArgumentError, `${argument}: ${String(error)}`);
        assert.equal(error.argument, argument);
        return true;
      });
    }
    await withClient(cluster.urls[1]!, (c) => c.set("kept", "1"));
    const pid = cluster.node(1).pid;
    const restartCases: Array<[string, RestartOptions]> = [
      ["restart options.keepdata", { keepdata: false } as never],
      ["keepData", { keepData: "false" as never }],
      ["keepData", { keepData: 0 as never }],
    ];
    for (const [argument, options] of restartCases) {
      await assert.rejects(cluster.restart(1, options), (error: unknown) => {
        assert.ok(error instanceof InvalidArgumentError, `${argument}: ${String(error)}`);
        assert.equal(error.argument, argument);
        return true;
      });
    }
    assert.equal(cluster.node(1).pid, pid, "not restarted");
    assert.equal(await withClient(cluster.urls[1]!, (c) => c.get("kept")), "1");
  });

  it("restart can change a node's persistence and arguments, for later restarts too", async () => {
    await cluster.restart(0, { persistence: "none", extraArgs: ["--maxmemory", "7mb"] });
    const config = (name: string) =>
      withClient(cluster.urls[0]!, async (c) => ((await c.config("GET", name)) as string[])[1]);
    assert.equal(await config("appendonly"), "no");
    assert.equal(await config("maxmemory"), String(7 * 1024 * 1024));
    assert.equal(cluster.node(0).persistence, "none");
    await withClient(cluster.urls[0]!, (c) => c.set("lost", "1"));
    await cluster.restart(0);
    assert.equal(await withClient(cluster.urls[0]!, (c) => c.get("lost")), null);
    await cluster.restart(0, { persistence: "aof-always", extraArgs: [] });
    assert.equal(await config("appendfsync"), "always");
    await assert.rejects(
      cluster.restart(0, { persistence: "sometimes" as never }),
      /Invalid persistence: expected one of none, aof-everysec, aof-always/,
    );
  });

  it("kill -9 stops the process; restart brings it back on the same port", async () => {
    const { pid, port } = cluster.node(1);
    await cluster.kill(1);
    assert.equal(alive(pid!), false);
    assert.equal(cluster.node(1).state, "stopped");
    await cluster.restart(1);
    assert.equal(cluster.node(1).port, port);
    assert.equal(await withClient(cluster.urls[1]!, (c) => c.ping()), "PONG");
  });

  const range = claimRange();
  const noRoom = range ? false : "the system's ephemeral range leaves no room below it";

  it("a node's port is below the system's ephemeral range and claimed while the node is down: no other cluster gets it", {
    skip: noRoom,
  }, async () => {
    assert.ok(range);
    const { port } = cluster.node(2);
    assert.ok(
      port >= range.low && port <= range.high,
      `port ${port} outside ${range.low}-${range.high}`,
    );
    await cluster.kill(2);
    try {
      assert.equal(claimant(port), process.pid);
      // Asked for that port alone, a claim gets another (one the system picks).
      const other = await claimPort({ low: port, high: port });
      assert.notEqual(other, port);
    } finally {
      await cluster.restart(2);
    }
    assert.equal(cluster.node(2).port, port);
  });

  it("a claim whose process is gone is taken over; release gives it up", {
    skip: noRoom,
  }, async () => {
    const exited = spawnSync(process.execPath, ["-e", "console.log(process.pid)"], {
      encoding: "utf8",
    });
    // A port no one claims, claimed for the process that exited.
    let port = 0;
    for (let tries = 0; port === 0; tries++) {
      assert.ok(tries < 5, "no port to claim");
      port = await claimPort();
      release(port);
      try {
        writeFileSync(join(claimsDir, String(port)), exited.stdout.trim(), { flag: "wx" });
      } catch {
        port = 0;
      }
    }
    assert.equal(await claimPort({ low: port, high: port }), port);
    assert.equal(claimant(port), process.pid);
    release(port);
    assert.equal(claimant(port), undefined);
  });

  it("pause stops answering; resume answers again", async () => {
    cluster.pause(2);
    const client = new Redis(cluster.urls[2]!, { commandTimeout: 200, maxRetriesPerRequest: 0 });
    client.on("error", () => {});
    try {
      await assert.rejects(client.ping(), /timed out/);
      cluster.resume(2);
      assert.equal(await client.ping(), "PONG");
    } finally {
      client.disconnect();
    }
  });

  it("a redis-server path that does not exist rejects with ERR_REDIS_NOT_FOUND, also in a script of its own", async () => {
    await assert.rejects(
      LocalCluster.start({ nodeCount: 2, redisServerPath: "/nope/redis-server" }),
      (error: unknown) => {
        assert.ok(error instanceof RedquorumError, String(error));
        assert.equal(error.code, "ERR_REDIS_NOT_FOUND");
        assert.match(error.message, /\/nope\/redis-server/);
        return true;
      },
    );
    // What a user's script meets: an error and exit code 1, not exit 13 in silence.
    const script = `
      import { LocalCluster } from "${libraryUrl}";
      await LocalCluster.start({ nodeCount: 2 });
    `;
    const run = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
      encoding: "utf8",
      timeout: 30_000,
      env: { ...process.env, REDQUORUM_REDIS_SERVER: "/nope/redis-server" },
    });
    assert.equal(run.status, 1, run.stderr);
    assert.match(run.stderr, /ERR_REDIS_NOT_FOUND|redis-server not found/);
  });

  it("hands out nodes ready for locks: the first acquire needs no init()", async () => {
    const fresh = await LocalCluster.start({ nodeCount: 3, persistence: "none" });
    const redlock = new Redlock(fresh.urls, { ...notAboutTimeouts, retry: { retries: 0 } });
    try {
      const lock = await redlock.acquire(["first"], 1_000);
      assert.equal(lock.fence, 1n);
      await lock.release();
    } finally {
      await redlock.close();
      await fresh.stop();
    }
  });

  it("stop removes every process and directory", async () => {
    const extra = await LocalCluster.start({ nodeCount: 2, persistence: "none" });
    const pids = extra.nodes.map((n) => n.pid!);
    const ports = extra.nodes.map((n) => n.port);
    // Claimed while the cluster runs (where the system leaves room for claims).
    if (range) assert.deepEqual(ports.map(claimant), [process.pid, process.pid]);
    await extra.stop();
    assert.deepEqual(pids.map(alive), [false, false]);
    assert.equal(existsSync(extra.baseDir), false);
    assert.deepEqual(ports.map(claimant), [undefined, undefined]);
  });

  it("a process that exits without stop() leaves no redis-server or directory behind", async () => {
    const script = `
      import { LocalCluster } from "${libraryUrl}";
      const c = await LocalCluster.start({ nodeCount: 2, persistence: "none" });
      console.log(JSON.stringify({ dir: c.baseDir, pids: c.nodes.map((n) => n.pid), ports: c.nodes.map((n) => n.port) }));
      process.exit(0);
    `;
    const run = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
      encoding: "utf8",
      timeout: 30_000,
    });
    assert.equal(run.status, 0, run.stderr);
    const { dir, pids, ports } = JSON.parse(run.stdout.trim()) as {
      dir: string;
      pids: number[];
      ports: number[];
    };
    assert.equal(existsSync(dir), false);
    assert.deepEqual(await gone(pids), [false, false]);
    assert.deepEqual(ports.map(claimant), [undefined, undefined]);
  });

  it("a process interrupted with SIGTERM leaves nothing behind either", async () => {
    const script = `
      import { LocalCluster } from "${libraryUrl}";
      const c = await LocalCluster.start({ nodeCount: 2, persistence: "none" });
      console.log(JSON.stringify({ dir: c.baseDir, pids: c.nodes.map((n) => n.pid) }));
      process.kill(process.pid, "SIGTERM");
      setTimeout(() => {}, 10_000);
    `;
    const run = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
      encoding: "utf8",
      timeout: 30_000,
    });
    assert.equal(run.signal, "SIGTERM", run.stderr);
    const { dir, pids } = JSON.parse(run.stdout.trim()) as { dir: string; pids: number[] };
    assert.equal(existsSync(dir), false);
    assert.deepEqual(await gone(pids), [false, false]);
  });
});
