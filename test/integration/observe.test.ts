import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { freePort } from "../../src/cluster/local-sockets.js";
import {
  type Logger,
  NextId,
  Redlock,
  type RedquorumEvent,
  ResourceLockedError,
} from "../../src/index.js";
import { defaults } from "../../src/limits.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";
import { sleep } from "../helpers/sleep.js";
import { notAboutTimeouts } from "../helpers/timeouts.js";

/** A logger in console's shape that records what it was told: level, message, fields. */
function recordingLogger(): Logger & {
  lines: Array<[string, string]>;
  calls: Array<{ level: string; message: string; fields: unknown; argCount: number }>;
} {
  const lines: Array<[string, string]> = [];
  const calls: Array<{ level: string; message: string; fields: unknown; argCount: number }> = [];
  const at =
    (level: string) =>
    (...args: unknown[]) => {
      const [message, fields] = args as [string, unknown];
      lines.push([level, message]);
      calls.push({ level, message, fields, argCount: args.length });
    };
  return {
    lines,
    calls,
    debug: at("debug"),
    info: at("info"),
    warn: at("warn"),
    error: at("error"),
  };
}

/** These tests are not about node timeouts: not on the 50 ms default, which a loaded machine exceeds. */

type NodeEvent = Extract<RedquorumEvent, { type: "node" }>;

/**
 * Each node event is logged once, in the same call: at its state's level,
 * as "redquorum: <endpoint> <state>: <detail>", with the same three as
 * fields (what pino and winston index).
 */
function assertLoggedAsEmitted(
  logger: ReturnType<typeof recordingLogger>,
  events: readonly RedquorumEvent[],
): void {
  const nodeEvents = events.filter((e): e is NodeEvent => e.type === "node");
  const levelOf: Record<string, string> = {
    unreachable: "warn",
    "in service": "info",
    excluded: "error",
    quarantined: "warn",
    "needs repair": "warn",
    repaired: "info",
  };
  assert.deepEqual(
    logger.calls.map((c) => [c.level, c.message, c.fields, c.argCount]),
    nodeEvents.map((e) => [
      levelOf[e.state],
      `redquorum: ${e.endpoint} ${e.state}: ${e.detail}`,
      { endpoint: e.endpoint, state: e.state, detail: e.detail },
      2,
    ]),
  );
  for (const e of nodeEvents) assert.ok(e.detail.length > 0, `${e.state}: no detail`);
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
      ...notAboutTimeouts,
      retry: { retries: 0 },
      logger,
      onEvent: (event) => events.push(event),
    });
    const rival = new Redlock(cluster.urls, { ...notAboutTimeouts, retry: { retries: 0 } });
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
      // What each call was, on which resources, with what outcome: only this
      // instance's calls (the rival has no hooks), in the order they ended.
      assert.deepEqual(
        ops.map((e) => [e.type, e.resources, e.outcome]),
        [
          ["acquire", ["observed"], "ok"],
          ["extend", ["observed"], "ok"],
          ["acquire", ["busy"], "ERR_RESOURCE_LOCKED"],
          ["release", ["observed"], "ok"],
        ],
      );
      for (const e of ops) assert.ok(Number.isFinite(e.durationMs) && e.durationMs >= 0);
      // Nothing happened to a node yet: no node event, nothing logged.
      assert.deepEqual(
        events.filter((e) => e.type === "node"),
        [],
      );
      assert.deepEqual(logger.calls, []);

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
      // Every node event was logged, and nothing else was.
      assertLoggedAsEmitted(logger, events);
      // Each probe's acquire was counted as well, whatever its outcome.
      const probes = events.filter(
        (e) => e.type === "acquire" && e.resources[0]?.startsWith("probe-"),
      );
      assert.ok(probes.length >= 2, `${probes.length} probe acquires counted`);
    } finally {
      await Promise.all([redlock.close(), rival.close()]);
    }
  });

  it("NextId rounds are counted; a node restarted empty is logged as needing repair, then repaired", async () => {
    const events: RedquorumEvent[] = [];
    const logger = recordingLogger();
    const ids = new NextId(cluster.urls, {
      ...notAboutTimeouts,
      key: "observed:id",
      unsafeAllowNonDurableNodes: true,
      logger,
      onEvent: (event) => events.push(event),
      onRepair: () => {},
    });
    try {
      await ids.init();
      await ids.nextBatch(3);
      // One round served the call: counted once, won, with the IDs it claimed.
      const rounds = events.filter((e) => e.type === "id-round");
      assert.equal(rounds.length, 1, JSON.stringify(rounds));
      const [round] = rounds;
      assert.ok(round?.type === "id-round");
      assert.equal(round.outcome, "won");
      assert.equal(round.ids, 3);
      assert.ok(Number.isFinite(round.durationMs) && round.durationMs >= 0);
      assert.deepEqual(logger.calls, [], "logged before any node changed");
      const endpoint = `127.0.0.1:${cluster.cluster.node(1).port}`;
      await cluster.cluster.restart(1, { keepData: false });
      const by = performance.now() + 1_000 + defaults.repairDelayMs + 3_000;
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
      // Only the restarted node changed state.
      assert.deepEqual(
        events.filter((e) => e.type === "node" && e.endpoint !== endpoint),
        [],
      );
      assertLoggedAsEmitted(logger, events);
      const repaired = events.filter((e) => e.type === "node").at(-1);
      assert.ok(repaired?.type === "node");
      assert.match(repaired.detail, /^ID counter raised to \d+$/);
      // Rounds after the first were counted too, each won or lost.
      for (const e of events) {
        if (e.type === "id-round") assert.ok(e.outcome === "won" || e.outcome === "lost");
      }
    } finally {
      await ids.close();
    }
  });

  it("a hook that throws does not break an operation, and is still called for every event", async () => {
    // A fourth node that refuses connections: its failed check is a node
    // event (logged as a warning), and three of four nodes still grant.
    const dead = `redis://127.0.0.1:${await freePort()}`;
    const told: string[] = [];
    const warned: string[] = [];
    const redlock = new Redlock([...cluster.urls, dead], {
      ...notAboutTimeouts,
      retry: { retries: 0 },
      onEvent: (event) => {
        told.push(event.type === "node" ? `node:${event.state}` : `${event.type}:${event.outcome}`);
        throw new Error("metrics down");
      },
      logger: {
        warn: (message: string) => {
          warned.push(message);
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
    assert.deepEqual(
      told.filter((t) => !t.startsWith("node:")),
      ["acquire:ok", "release:ok"],
    );
    assert.ok(told.includes("node:unreachable"), JSON.stringify(told));
    const deadEndpoint = new URL(dead).host;
    assert.ok(
      warned.some((m) => m.startsWith(`redquorum: ${deadEndpoint} unreachable: `)),
      JSON.stringify(warned),
    );
  });

  it("a logger whose method is a getter that throws loses no event: onEvent is still told of the node", async () => {
    const dead = `redis://127.0.0.1:${await freePort()}`;
    const told: string[] = [];
    const logger = {
      get warn(): never {
        throw new Error("logger proxy down");
      },
    };
    const redlock = new Redlock([...cluster.urls, dead], {
      ...notAboutTimeouts,
      retry: { retries: 0 },
      logger,
      onEvent: (event) => told.push(event.type === "node" ? `node:${event.state}` : event.type),
    });
    try {
      await (await redlock.acquire(["getter"], 1_000)).release();
    } finally {
      await redlock.close();
    }
    // Before, the getter's exception ended the node's report before its
    // event: the node's state was recorded, and the event never told.
    assert.ok(told.includes("node:unreachable"), JSON.stringify(told));
  });

  it("async hooks that reject leave no unhandled rejection, and locks and IDs go on", async () => {
    // Each hook an application may write as an async function: onEvent,
    // the logger's methods, onWarning (onRepair goes through the same
    // guard as onWarning). Before, only a throw was
    // caught; each rejected promise was an unhandled rejection in the
    // application's process (Node's default: the process exits).
    await cluster.onAll((client) => client.config("SET", "maxmemory", "100mb"));
    await cluster.onAll((client) => client.config("SET", "maxmemory-policy", "volatile-lru"));
    const dead = `redis://127.0.0.1:${await freePort()}`;
    const unhandled: unknown[] = [];
    const seen = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", seen);
    const called = new Set<string>();
    const rejecting =
      (name: string) =>
      async (..._args: unknown[]): Promise<void> => {
        called.add(name);
        throw new Error(`${name} down`);
      };
    const hooks = {
      onEvent: rejecting("onEvent"),
      logger: { warn: rejecting("logger.warn"), info: rejecting("logger.info") },
      onWarning: rejecting("onWarning"),
    };
    const redlock = new Redlock([...cluster.urls, dead], {
      ...notAboutTimeouts,
      retry: { retries: 0 },
      ...hooks,
    });
    const ids = new NextId(cluster.urls, {
      ...notAboutTimeouts,
      key: "rejecting:id",
      unsafeAllowNonDurableNodes: true,
      ...hooks,
    });
    try {
      const lock = await redlock.acquire(["rejecting"], 1_000);
      await lock.release();
      await ids.init();
      assert.ok((await ids.next()) > 0n);
      // Rejections are reported after the microtasks that follow them.
      await sleep(50);
      for (const name of ["onEvent", "logger.warn", "onWarning"]) {
        assert.ok(called.has(name), `${name} was never called: ${[...called]}`);
      }
      assert.deepEqual(unhandled, []);
    } finally {
      process.off("unhandledRejection", seen);
      await redlock.close();
      await ids.close();
      await cluster.onAll((client) => client.config("SET", "maxmemory", "0"));
      await cluster.onAll((client) => client.config("SET", "maxmemory-policy", "noeviction"));
    }
  });

  it("an onWarning hook that throws takes no node out of service: locks and IDs go on, and it is still told", async () => {
    // Every node evicts keys with a TTL: each check warns, and before, the
    // hook's exception failed the check, so every node was out of service.
    await cluster.onAll((client) => client.config("SET", "maxmemory", "100mb"));
    await cluster.onAll((client) => client.config("SET", "maxmemory-policy", "volatile-lru"));
    const warned: string[] = [];
    const onWarning = (warning: { code: string }) => {
      warned.push(warning.code);
      throw new Error("hook broke");
    };
    const redlock = new Redlock(cluster.urls, { ...notAboutTimeouts, onWarning });
    const ids = new NextId(cluster.urls, {
      ...notAboutTimeouts,
      key: "hooked:id",
      unsafeAllowNonDurableNodes: true,
      onWarning,
    });
    try {
      const lock = await redlock.acquire(["hooked"], 1_000);
      await lock.release();
      await ids.init();
      assert.ok((await ids.next()) > 0n);
      assert.deepEqual(warned, Array(6).fill("REDQUORUM_EVICTION"));
    } finally {
      await redlock.close();
      await ids.close();
      await cluster.onAll((client) => client.config("SET", "maxmemory", "0"));
      await cluster.onAll((client) => client.config("SET", "maxmemory-policy", "noeviction"));
    }
  });
});
