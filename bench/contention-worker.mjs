// One process of the cross-process contention benchmark (bench/contention.mjs):
// `instances` independent lock clients, each with its own connections (as
// separate processes or machines would have), loop acquire → hold → release
// on one resource until told to stop. Every hold is recorded on
// CLOCK_MONOTONIC (process.hrtime.bigint(), shared by all processes on
// Linux), so the coordinator can check mutual exclusion across processes.
//
// Protocol (bench/processes.mjs): argv[2] is a JSON config; the process
// prints "ready" once connected and warmed up, starts on "go", stops
// acquiring on "stop", and prints one JSON line with its results.
import { Redis } from "ioredis";
import NodeRedlock from "redlock";
import { Redlock } from "../dist/index.js";
import { bareRounds, noticeOrPoll } from "./floor.mjs";
import { handoverFloor } from "./handover-floor.mjs";
import { workerProtocol } from "./processes.mjs";
import { queueFloor } from "./queue-floor.mjs";

const config = JSON.parse(process.argv[2]);
const { library, urls, instances, resource, ttlMs, pacing, holdMs, firstContender, contenders } =
  config;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const paced = () => pacing.delayMs + Math.floor((Math.random() * 2 - 1) * pacing.jitterMs);
const nowNs = () => process.hrtime.bigint();

function ioredisClients() {
  return urls.map((url) => {
    const client = new Redis(url);
    client.on("error", () => {});
    return client;
  });
}

/** Each kind of client: { acquire(), release(handle), close() } with retries paced alike. */
const factories = {
  redquorum: () => ours({}),
  "redquorum, fencing off": () => ours({ fencing: false }),
  // Every release hands the key to the next waiter of another process (no turn kept).
  "redquorum, turnMs 0": () => ours({ turnMs: 0 }),
  "redquorum, turnMs 5": () => ours({ turnMs: 5 }),
  "redquorum, turnMs 10": () => ours({ turnMs: 10 }),
  "node-redlock 5.0.0-beta.2": () => {
    const clients = ioredisClients();
    const redlock = new NodeRedlock(clients, {
      retryCount: 1_000_000,
      retryDelay: pacing.delayMs,
      retryJitter: pacing.jitterMs,
      driftFactor: 0.01,
    });
    redlock.on("error", () => {});
    return {
      acquire: (res) => redlock.acquire([res], ttlMs),
      release: (lock) => lock.release(),
      close: async () => {
        for (const c of clients) c.disconnect();
      },
    };
  },
  // The same library with no retries of its own: a failed acquire undoes
  // its partial keys at once, and the caller retries with the same pacing.
  // node-redlock's own retries keep the keys they won (one value for all
  // attempts), which wedges under contention: this is how its users avoid it.
  "node-redlock, caller retries": () => {
    const clients = ioredisClients();
    const redlock = new NodeRedlock(clients, { retryCount: 0, driftFactor: 0.01 });
    redlock.on("error", () => {});
    return {
      acquire: async (res) => {
        for (;;) {
          try {
            return await redlock.acquire([res], ttlMs);
          } catch {
            await sleep(paced());
          }
        }
      },
      release: (lock) => lock.release(),
      close: async () => {
        for (const c of clients) c.disconnect();
      },
    };
  },
  floor: () => floor(),
  "fair floor": (i) => fairFloor(firstContender + i),
  // As long as redquorum's reservation (limits.heirReservationMs).
  "queue floor": (i) => withQueueClients(queueFloor, i, { reserveMs: 200 }),
  "handover floor": (i) => withQueueClients(handoverFloor, i),
};

/** Contender `i` of a queue floor (`makeFloor({ clients, subscriber, … })`) on its own clients, closed with it. */
function withQueueClients(makeFloor, i, options = {}) {
  const clients = ioredisClients();
  const subscriber = new Redis(urls[0]);
  subscriber.on("error", () => {});
  const waiterId = String(firstContender + i);
  return {
    ...makeFloor({ clients, subscriber, waiterId, ttlMs, paced, contenders, ...options }),
    close: async () => {
      subscriber.disconnect();
      for (const c of clients) c.disconnect();
    },
  };
}

function ours(options) {
  const redlock = new Redlock(urls, {
    ...options,
    retry: { retries: 10_000, delayMs: pacing.delayMs, jitterMs: pacing.jitterMs },
  });
  return {
    acquire: (res) => redlock.acquire([res], ttlMs),
    release: (lock) => lock.release(),
    close: () => redlock.close(),
  };
}

/** The least any correct Redlock does: SET NX PX on all nodes, majority; undo and paced retry otherwise. */
function floor() {
  const { acquireRound, release, close } = ownBareRounds();
  return {
    acquire: async (res) => {
      for (;;) {
        const lock = await acquireRound(res);
        if (lock) return lock;
        await sleep(paced());
      }
    },
    release,
    close,
  };
}

/**
 * The least a FAIR lock across processes does: the floor's rounds, with the
 * turn passed around a fixed ring. A release PUBLISHes to the next
 * contender's channel on one node (no queue, no Lua beyond the floor's
 * compare-and-delete, one notice); a contender that lost tries again when
 * it is told, or after n paced delays (so the ring cannot stall). Every
 * grant crosses to another contender, as in any fair queue: the cost of
 * fairness itself, which the barging floor does not pay.
 */
function fairFloor(place) {
  const { acquireRound, release, close, clients } = ownBareRounds();
  const channel = (n) => `${resource}:turn:${n}`;
  const subscriber = new Redis(urls[0]);
  subscriber.on("error", () => {});
  const { subscribed, forget, turn } = noticeOrPoll(
    subscriber,
    channel(place),
    () => paced() * contenders,
  );
  // After a release the turn is the next contender's: no barging back in.
  let released = false;
  return {
    acquire: async (res) => {
      await subscribed;
      if (released) await turn();
      for (;;) {
        forget();
        const lock = await acquireRound(res);
        if (lock) return lock;
        await turn();
      }
    },
    release: async (lock) => {
      released = true;
      await release(lock);
      await clients[0].publish(channel((place + 1) % contenders), "turn");
    },
    close: async () => {
      subscriber.disconnect();
      await close();
    },
  };
}

/** The floor's rounds (floor.mjs) on connections of this contender's own. */
function ownBareRounds() {
  const clients = ioredisClients();
  return {
    ...bareRounds(clients, ttlMs),
    clients,
    close: async () => {
      for (const c of clients) c.disconnect();
    },
  };
}

// "redquorum, turnMs N": another turn than the default (the trade between
// grants/s and how long a waiter waits per instance ahead of it).
const turnMs = /^redquorum, turnMs (\d+)$/.exec(library)?.[1];
const factory = factories[library] ?? (turnMs && (() => ours({ turnMs: Number(turnMs) })));
const clients = Array.from({ length: instances }, (_, i) => factory(i));
// Connect and warm up each client on a resource of its own (no contention yet).
await Promise.all(
  clients.map(async (client, i) => {
    for (let n = 0; n < 3; n++) {
      try {
        await client.release(await client.acquire(`${resource}:warm:${process.pid}:${i}`));
      } catch {
        // A slow warm-up round on a loaded machine: the connections are open either way.
      }
    }
  }),
);
// Every hold from "go" on, for the mutual-exclusion check (the warm-up's
// too); the counts from "mark" on when the cell has a warm-up.
const holds = []; // [startNs, endNs, instance] as strings (bigint)
const acquireMs = [];
const grants = new Array(instances).fill(0);
let errors = 0;
let errorKinds = {};

let stopping = false;
// On "stop" the results so far are the results: waiters still in acquire()
// are abandoned (node-redlock has no way to cancel one, and draining 64
// waiters of a slow library would take longer than the cell). The process
// exits without releasing; each cell uses a fresh resource, and the keys
// expire by their TTL.
// CPU time (user + system) from "go" (or "mark", after a warm-up) to "stop":
// what the counted cell cost this process.
let cpuAtGo;
await workerProtocol(
  () => {
    stopping = true;
    const cpu = process.cpuUsage(cpuAtGo);
    return {
      pid: process.pid,
      holds,
      acquireMs,
      grants,
      errors,
      errorKinds,
      cpuUs: cpu.user + cpu.system,
    };
  },
  () => {
    grants.fill(0);
    acquireMs.length = 0;
    errors = 0;
    errorKinds = {};
    cpuAtGo = process.cpuUsage();
  },
);
cpuAtGo = process.cpuUsage();

await Promise.all(
  clients.map(async (client, i) => {
    while (!stopping) {
      const t0 = performance.now();
      let handle;
      try {
        handle = await client.acquire(resource);
      } catch (error) {
        errors++;
        const key = String(error?.message ?? error).slice(0, 120);
        errorKinds[key] = (errorKinds[key] ?? 0) + 1;
        continue;
      }
      if (stopping) return;
      const start = nowNs();
      acquireMs.push(performance.now() - t0);
      grants[i]++;
      if (holdMs > 0) await sleep(holdMs);
      const end = nowNs();
      holds.push([String(start), String(end), i]);
      try {
        await client.release(handle);
      } catch (error) {
        errors++;
        const key = `release: ${String(error?.message ?? error).slice(0, 100)}`;
        errorKinds[key] = (errorKinds[key] ?? 0) + 1;
      }
    }
  }),
);
// (Never reached: "stop" reports and exits.)
