import { after, before, beforeEach } from "node:test";
import { Redis } from "ioredis";
import { LocalCluster, type LocalClusterOptions } from "../../src/index.js";
import { markNodeLua } from "../../src/node/node-state.js";

/**
 * Starts a cluster of real redis-server processes for one test suite. The
 * suite's `after` hook must call `stop()`, which also closes every
 * inspection client, so the file ends by itself (`useCluster` registers both).
 */
export async function startCluster(options: LocalClusterOptions = {}): Promise<TestCluster> {
  const cluster = new TestCluster(await LocalCluster.start({ persistence: "none", ...options }));
  await cluster.markAll();
  return cluster;
}

/**
 * One cluster for the enclosing suite: registers a `before` hook that starts
 * it (`startCluster(options)`) and an `after` hook that stops it. Call it in
 * a `describe` body; the accessor it returns gives the cluster in the tests
 * and in hooks registered after it (they run after the start and, for
 * `after` hooks, after the stop).
 */
export function useCluster(options: LocalClusterOptions = {}): () => TestCluster {
  let cluster: TestCluster | undefined;
  before(async () => {
    cluster = await startCluster(options);
  });
  after(() => cluster?.stop());
  return () => {
    if (!cluster) throw new Error("useCluster(): the cluster starts in the suite's before hook");
    return cluster;
  };
}

/**
 * As `useCluster`, and before each test every node is back up and empty
 * (`restoreAll({ keepData: false })`, then `flushAll()`): for suites whose
 * tests kill, pause or fill nodes.
 */
export function useFreshCluster(options: LocalClusterOptions = {}): () => TestCluster {
  const cluster = useCluster(options);
  beforeEach(async () => {
    await cluster().restoreAll({ keepData: false });
    await cluster().flushAll();
  });
  return cluster;
}

/** The node marker of the restart quarantine (what `Redlock.init()` writes). */
export const markerKey = "redquorum:marker";
const runKey = "redquorum:run";

/** Marks one node in service as `Redlock.init()` does: the marker and the run_id it is certified on. */
export function markNode(client: Redis): Promise<unknown> {
  return client.eval(markNodeLua("KEYS[1]", "KEYS[2]"), 2, markerKey, runKey);
}

/** Bound on each call of an inspection client (`TestCluster.client`). */
export const inspectionTimeoutMs = 2_000;

/** redquorum's keys that stay after every lock is gone (see `keysByNode`). */
export function outlivesLocks(key: string): boolean {
  return (
    key === markerKey ||
    key.startsWith("redquorum:fence:") ||
    key === "redquorum:fence-max" ||
    key === "redquorum:fence-floor" ||
    key === "redquorum:run" ||
    key === "redquorum:joins" ||
    key === "redquorum:horizon" ||
    key === "redquorum:alive" ||
    key === "redquorum:node" ||
    key === "redquorum:cluster" ||
    key === "redquorum:members" ||
    key === "redquorum:members-next" ||
    key === "redquorum:id" ||
    key.startsWith("redquorum:id:")
  );
}

export class TestCluster {
  readonly cluster: LocalCluster;
  private readonly clients = new Map<number, Redis>();

  constructor(cluster: LocalCluster) {
    this.cluster = cluster;
  }

  get urls(): string[] {
    return this.cluster.urls;
  }

  /**
   * A plain ioredis connection to node `index`, for setting up and
   * inspecting state. Every call is bounded: on a paused or killed node it
   * fails (after `inspectionTimeoutMs`, or after one reconnect attempt)
   * instead of hanging the test.
   */
  client(index: number): Redis {
    let client = this.clients.get(index);
    if (!client || client.status === "end") {
      client = new Redis(this.cluster.urls[index]!, {
        commandTimeout: inspectionTimeoutMs,
        maxRetriesPerRequest: 1,
        retryStrategy: () => 100,
      });
      client.on("error", () => {});
      this.clients.set(index, client);
    }
    return client;
  }

  /** Runs one command on every running node. */
  /**
   * Waits until node `index`'s restart quarantine, if any, has had its
   * length judged (lock/quarantine-judge.ts: the client that met the loss
   * does it right after); throws after `timeoutMs`. A judgement that fails
   * (too few nodes answered in time, as on a loaded machine) is tried again
   * only when a later call meets the loss: `meet`, when given, makes such a
   * call every 250 ms while it waits.
   */
  async quarantineJudged(
    index: number,
    timeoutMs = 15_000,
    meet?: () => Promise<unknown>,
  ): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    let metAt = performance.now();
    for (;;) {
      const value = await this.client(index).get("redquorum:quarantine");
      if (!value?.startsWith("unjudged:")) return;
      if (performance.now() > deadline) {
        throw new Error(`node ${index}'s quarantine not judged within ${timeoutMs} ms (${value})`);
      }
      if (meet && performance.now() - metAt >= 250) {
        await meet().catch(() => {});
        metAt = performance.now();
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  async onAll<T>(run: (client: Redis, index: number) => Promise<T>): Promise<T[]> {
    return Promise.all(this.cluster.nodes.map((node) => run(this.client(node.index), node.index)));
  }

  /** EVALSHA calls each node has run since it started or was flushed (its commandstats). */
  evalshaCallsByNode(): Promise<number[]> {
    return this.onAll(async (c) => {
      const stats = await c.info("commandstats");
      return Number(/cmdstat_evalsha:calls=(\d+)/.exec(stats)?.[1] ?? 0);
    });
  }

  /** EVALSHA calls of all the nodes together. */
  async evalshaCalls(): Promise<number> {
    return (await this.evalshaCallsByNode()).reduce((a, b) => a + b, 0);
  }

  /** Per node: connections subscribed to an instance's heir notices (lock/heir-notice.ts). */
  heirSubscribers(): Promise<number[]> {
    return this.onAll(async (c) => {
      const channels = (await c.pubsub("CHANNELS", "redquorum:heir-of:*")) as string[];
      if (channels.length === 0) return 0;
      const counts = (await c.pubsub("NUMSUB", ...channels)) as unknown[];
      return counts.filter((_, i) => i % 2 === 1).reduce<number>((a, b) => a + Number(b), 0);
    });
  }

  /**
   * Every key on every node, by node, leaving out only the keys that
   * legitimately outlive every lock: the node marker, the fencing counters
   * and fencing state, and NextId's keys under "redquorum:id". Any other
   * key, redquorum's own included (a quarantine left behind, say), shows.
   */
  async keysByNode(): Promise<string[][]> {
    return this.onAll(async (client) =>
      (await client.keys("*")).filter((key) => !outlivesLocks(key)).sort(),
    );
  }

  /**
   * Writes the node marker on every running node, as `Redlock.init()` does
   * on a new cluster: without it, a node's first lock script would put it in
   * the restart quarantine.
   */
  async markAll(): Promise<void> {
    await Promise.all(
      this.cluster.nodes
        .filter((node) => node.state === "running")
        .map((node) => markNode(this.client(node.index))),
    );
  }

  /**
   * Waits until no node holds any key. A release resolves once a majority
   * deleted; the other nodes' deletes are already sent and land just after.
   */
  async waitForNoKeys(timeoutMs = 2_000): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const keys = await this.keysByNode();
      if (keys.every((k) => k.length === 0)) return;
      if (performance.now() > deadline) {
        throw new Error(`keys left after ${timeoutMs} ms: ${JSON.stringify(keys)}`);
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  /** Resumes paused nodes and restarts stopped ones (with or without their data). */
  async restoreAll(options: { keepData: boolean }): Promise<void> {
    for (const node of this.cluster.nodes) {
      if (node.state === "paused") this.cluster.resume(node.index);
      if (node.state === "stopped") await this.cluster.restart(node.index, options);
    }
  }

  /** Empties every node, then marks it (a flushed node would otherwise be quarantined). */
  async flushAll(): Promise<void> {
    await this.onAll((client) => client.flushall());
    await this.markAll();
  }

  async stop(): Promise<void> {
    for (const client of this.clients.values()) client.disconnect();
    this.clients.clear();
    await this.cluster.stop();
  }
}
