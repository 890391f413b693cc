import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import {
  type Logger,
  NextId,
  Redlock,
  type RedquorumEvent,
  ResourceLockedError,
} from "../../src/index.js";
import { limits } from "../../src/limits.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";
import { sleep } from "../helpers/sleep.js";

/** A logger in console's shape that records what it was told. */
function recordingLogger(): Logger & { lines: Array<[string, string]> } {
  const lines: Array<[string, string]> = [];
  const at = (level: string) => (message: string) => {
    lines.push([level, message]);
  };
  return { lines, debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

/**
 * Issue 10, item 11: a logger hook (console / pino / winston shape) for node
 * state changes, and events a metrics library can count.
 */
describe("logger and events", () => {
  let cluster: TestCluster;

  before(async () => {
    cluster = await startCluster({ nodeCount: 3 });
  });
  after(() => cluster.stop());
  beforeEach(() => cluster.flushAll());

  it("lock operations are counted with outcome and duration; a node that goes and comes back is logged once each way", async () => {
    const events: RedquorumEvent[] = [];
    const logger = recordingLogger();
    const redlock = new Redlock(cluster.urls, {
      retry: { retries: 0 },
      logger,
      onEvent: (event) => events.push(event),
    });
    const rival = new Redlock(cluster.urls, { retry: { retries: 0 } });
    try {
      const lock = await redlock.acquire(["observed"], 5_000);
      await lock.extend(5_000);
      const held = await rival.acquire(["busy"], 5_000);
      await assert.rejects(redlock.acquire(["busy"], 5_000), ResourceLockedError);
      await held.release();
      await lock.release();
      await sleep(10);
      const ops = events.flatMap((e) =>
        e.type === "acquire" || e.type === "extend" || e.type === "release" ? [e] : [],
      );
      assert.deepEqual(
        ops.map((e) => `${e.type}:${e.outcome}`),
        ["acquire:ok", "extend:ok", "acquire:ERR_RESOURCE_LOCKED", "release:ok"],
      );
      for (const e of ops) assert.ok(e.durationMs >= 0);

      // Node 2 goes away, then comes back (empty: no persistence here), so
      // it is told once each: unreachable, in service, quarantined.
      const endpoint = `127.0.0.1:${cluster.cluster.node(2).port}`;
      await cluster.cluster.kill(2);
      const downBy = performance.now() + 3_000;
      while (!logger.lines.some(([level, m]) => level === "warn" && m.includes(endpoint))) {
        assert.ok(performance.now() < downBy, JSON.stringify(logger.lines));
        await redlock.acquire([`probe-${Math.random()}`], 1_000).then(
          (l) => l.release(),
          () => {},
        );
        await sleep(20);
      }
      await cluster.cluster.restart(2);
      // The client reconnects within its backoff (at most 1 s).
      const backBy = performance.now() + 1_000 + 3_000;
      while (!logger.lines.some(([, m]) => m.includes(endpoint) && /quarantined/.test(m))) {
        assert.ok(performance.now() < backBy, JSON.stringify(logger.lines));
        await redlock.acquire([`probe-${Math.random()}`], 1_000).then(
          (l) => l.release(),
          () => {},
        );
        await sleep(20);
      }
      const about = logger.lines.filter(([, m]) => m.includes(endpoint));
      assert.deepEqual(
        about.map(([level]) => level),
        ["warn", "info", "warn"],
        JSON.stringify(about),
      );
      const nodeEvents = events.flatMap((e) =>
        e.type === "node" && e.endpoint === endpoint ? [e.state] : [],
      );
      assert.deepEqual(nodeEvents, ["unreachable", "in service", "quarantined"]);
    } finally {
      await Promise.all([redlock.close(), rival.close()]);
    }
  });

  it("NextId rounds are counted; a node restarted empty is logged as needing repair, then repaired", async () => {
    const events: RedquorumEvent[] = [];
    const logger = recordingLogger();
    const ids = new NextId(cluster.urls, {
      key: "observed:id",
      unsafeAllowNonDurableNodes: true,
      logger,
      onEvent: (event) => events.push(event),
      onRepair: () => {},
    });
    try {
      await ids.init();
      await ids.nextBatch(3);
      const round = events.find((e) => e.type === "id-round");
      assert.ok(round?.type === "id-round" && round.outcome === "won" && round.ids === 3);
      const endpoint = `127.0.0.1:${cluster.cluster.node(1).port}`;
      await cluster.cluster.restart(1, { keepData: false });
      const by = performance.now() + 1_000 + limits.repairDelayMs + 3_000;
      while (!events.some((e) => e.type === "node" && e.state === "repaired")) {
        assert.ok(performance.now() < by, JSON.stringify(events.filter((e) => e.type === "node")));
        await ids.next().catch(() => {});
        await sleep(20);
      }
      const states = events
        .filter((e) => e.type === "node" && e.endpoint === endpoint)
        .map((e) => (e.type === "node" ? e.state : ""));
      assert.ok(states.includes("needs repair"), JSON.stringify(states));
      assert.equal(states.at(-1), "repaired");
      assert.ok(logger.lines.some(([level, m]) => level === "info" && /repaired/.test(m)));
    } finally {
      await ids.close();
    }
  });

  it("a hook that throws does not break an operation", async () => {
    const redlock = new Redlock(cluster.urls, {
      onEvent: () => {
        throw new Error("metrics down");
      },
      logger: {
        warn: () => {
          throw new Error("logger down");
        },
      },
    });
    try {
      const lock = await redlock.acquire(["robust"], 1_000);
      await lock.release();
    } finally {
      await redlock.close();
    }
  });
});
