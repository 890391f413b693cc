import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { describe, it } from "node:test";
import { libraryUrl } from "../helpers/built.js";
import { notAboutTimeouts } from "../helpers/timeouts.js";

// A whole session in a child process that never calls process.exit(): it
// must end by itself, with no socket or timer left, even after timeouts on
// a paused node and an aborted acquire. The node timeout is 1 s (the test
// is not about it: on the 50 ms default a loaded machine's extend could
// miss every node), and node 0 stays paused past it, so the calls to it
// time out.
const session = `
  import { LocalCluster, Redlock } from "${libraryUrl}";
  const cluster = await LocalCluster.start({ nodeCount: 5, persistence: "none" });
  const redlock = new Redlock(cluster.urls, {
    ...${JSON.stringify(notAboutTimeouts)},
    retry: { retries: 2, delayMs: 10, jitterMs: 5 },
  });
  await redlock.init();
  const lock = await redlock.acquire(["r"], 5_000);
  await lock.extend(5_000);
  cluster.pause(0);
  await lock.release();
  const other = await redlock.acquire(["r2"], 5_000);
  await other.release();
  await redlock.acquire(["r"], 5_000, { signal: AbortSignal.abort() }).catch(() => {});
  await new Promise((r) => setTimeout(r, ${notAboutTimeouts.nodeTimeoutMs + 200}));
  cluster.resume(0);
  // Kept or lost (on a loaded machine the 300 ms lock's extensions can miss
  // the 50 ms node timeout: LockLostError), using() must leave no timer.
  await redlock
    .using(["u"], 300, async () => new Promise((r) => setTimeout(r, 700)))
    .catch((error) => {
      if (error?.code !== "ERR_LOCK_LOST") throw error;
    });
  await redlock.close();
  await cluster.stop();
  // beforeExit fires only once the event loop has nothing left to do.
  process.once("beforeExit", () => console.log(JSON.stringify(process.getActiveResourcesInfo())));
`;

describe("resource hygiene", () => {
  it("a session ends by itself with no socket or timer left open", () => {
    const run = spawnSync(process.execPath, ["--input-type=module", "-e", session], {
      encoding: "utf8",
      timeout: 60_000,
    });
    assert.equal(run.signal, null, `killed: the process did not end by itself\n${run.stderr}`);
    assert.equal(run.status, 0, run.stderr);
    const resources = JSON.parse(run.stdout.trim().split("\n").at(-1)!) as string[];
    const leaked = resources.filter((r) => r !== "TTYWrap" && r !== "PipeWrap");
    assert.deepEqual(leaked, []);
  });

  it("when close() resolves, its sockets and timers are already gone", () => {
    // Seen by the fault suite's hygiene check: the sockets closed in the
    // background after close(), and a caller that checks (or a test runner
    // that reports open handles) found them still open.
    const run = spawnSync(process.execPath, ["--input-type=module", "-e", closeSession], {
      encoding: "utf8",
      timeout: 60_000,
    });
    assert.equal(run.status, 0, run.stderr);
    const open = JSON.parse(run.stdout.trim().split("\n").at(-1)!) as Record<string, string[]>;
    assert.deepEqual(open, { redlock: [], nextId: [] });
  });
});

// Open handles right after close() resolves, beyond those open before the
// client was made (the cluster's own, the inspection sockets). Not about node
// timeouts: NextId's init needs every node within the bound, and on a loaded
// machine an fsync-always write missed its 200 ms default.
const closeSession = `
  import { LocalCluster, NextId, Redlock } from "${libraryUrl}";
  const notAboutTimeouts = ${JSON.stringify(notAboutTimeouts)};
  const cluster = await LocalCluster.start({ nodeCount: 3, persistence: "aof-always" });
  const count = () => {
    const counts = new Map();
    for (const r of process.getActiveResourcesInfo()) counts.set(r, (counts.get(r) ?? 0) + 1);
    return counts;
  };
  const added = (before) => {
    const out = [];
    for (const [r, n] of count()) for (let i = before.get(r) ?? 0; i < n; i++) out.push(r);
    return out;
  };
  const open = {};
  {
    const before = count();
    const holder = new Redlock(cluster.urls, notAboutTimeouts);
    const waiter = new Redlock(cluster.urls, {
      ...notAboutTimeouts,
      retry: { retries: 1000, delayMs: 20, jitterMs: 5 },
    });
    await holder.init();
    const lock = await holder.acquire(["c"], 5_000);
    const waiting = waiter.acquire(["c"], 5_000); // subscribes, queues on the nodes
    await new Promise((r) => setTimeout(r, 200));
    await lock.release();
    await (await waiting).release();
    await Promise.all([holder.close(), waiter.close()]);
    open.redlock = added(before);
  }
  {
    const before = count();
    const ids = new NextId(cluster.urls, { ...notAboutTimeouts, key: "close-session" });
    await ids.init();
    await ids.next();
    await ids.close();
    open.nextId = added(before);
  }
  await cluster.stop();
  console.log(JSON.stringify(open));
`;
