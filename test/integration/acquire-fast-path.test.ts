import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { Redis } from "ioredis";
import { fenceVoteLua } from "../../src/fencing/scripts.js";
import { LocalCluster } from "../../src/index.js";
import { limits } from "../../src/limits.js";
import { acquireReply } from "../../src/lock/acquire-reply.js";
import {
  acquireBodyLua,
  acquireFastPathCondition,
  acquireScript,
} from "../../src/lock/acquire-script.js";
import { instanceOfWaiter } from "../../src/lock/queue-keys.js";
import { stampKey } from "../../src/membership/record.js";
import { LuaScript } from "../../src/node/lua-script.js";
import { aliveKey } from "../../src/node/memory-check.js";
import { serverIdentityLua } from "../../src/node/server-identity.js";
import { dumpKeys } from "../helpers/key-dump.js";
import { byScale } from "../helpers/scale.js";
import { describeSeed, testSeed } from "../helpers/seed.js";

/**
 * The acquire script's fast path (one free resource on a healthy node, not
 * reserved or reserved for the caller, or one handed over by its holder) is
 * the general path narrowed to that case: for any node state and any
 * arguments, the script with it and the script with it switched off give
 * the same reply and leave the same keys. Both run on one real
 * redis-server, in two databases holding the same state.
 */

const generalOnly = acquireScript.source.replace(
  `if ${acquireFastPathCondition} then`,
  "if false then",
);

/**
 * The script with the general path cut off (it fails saying so): a case the
 * test expects the fast path to serve must get the same reply from it, so
 * that the comparison is known to have run the fast path's code.
 */
const generalStart = acquireBodyLua.indexOf("local function checkQuarantine");
const fastOnly = LuaScript.batchable(
  "acquire, fast path only",
  fenceVoteLua,
  `${acquireBodyLua.slice(0, generalStart)}
return redis.error_reply('took the general path')`,
  { checksMembership: true, readsStamp: true },
).source;

const key = "r";
const counterKey = `redquorum:fence:${key}`;

/** A value a key may start with: absent, a string, or a key of the wrong type. */
type Slot = { absent: true } | { string: string } | { list: string };

/** Absent, or one of `strings`; `common`: a value (or absence) drawn as often as all the others together. */
const slot = (common: Slot, ...strings: string[]) =>
  fc.oneof(
    { arbitrary: fc.constant(common), weight: Math.max(1, strings.length) },
    { arbitrary: fc.constant<Slot>({ absent: true }), weight: 1 },
    ...strings.map((s) => ({ arbitrary: fc.constant<Slot>({ string: s }), weight: 1 })),
  );
const decimal = fc.bigInt({ min: 0n, max: 40n }).map(String);
const decimalSlot = fc.oneof(
  fc.constant<Slot>({ absent: true }),
  decimal.map((s): Slot => ({ string: s })),
);

// Any state; a third of them on a healthy node (marker "1", no quarantine,
// no reservation) and a third healthy and reserved for the caller, the fast
// path's cases; otherwise a small corner of them.
const anyNodeState = fc.record({
  marker: fc.oneof(
    { arbitrary: slot({ string: "1" }, "lost:1.2", "restarted:3.4"), weight: 6 },
    fc.constant<Slot>({ list: "x" }),
  ),
  quarantined: fc.oneof({ arbitrary: fc.constant(false), weight: 3 }, fc.constant(true)),
  floor: fc.oneof({ arbitrary: decimalSlot, weight: 4 }, fc.constant<Slot>({ list: "x" })),
  highest: fc.oneof({ arbitrary: decimalSlot, weight: 4 }, fc.constant<Slot>({ list: "x" })),
  counter: fc.oneof(decimalSlot, fc.constant<Slot>({ list: "x" })),
  heir: fc.oneof(
    {
      arbitrary: slot({ absent: true }, "i:1", "i", "other:9", "other", "i:2", "i:10", "ix"),
      weight: 8,
    },
    fc.constant<Slot>({ list: "x" }),
  ),
  // Free, or holding the value of the lock a handoff replaces, most often.
  lock: fc.oneof(
    { arbitrary: fc.constant<Slot>({ absent: true }), weight: 3 },
    { arbitrary: fc.constant<Slot>({ string: "from-value" }), weight: 3 },
    fc.constant<Slot>({ string: "someone-else" }),
    fc.constant<Slot>({ list: "x" }),
  ),
  // In any order: the head is the caller's instance's waiter or another's.
  // In any order, some expired: the head is the caller, another waiter of
  // its instance, or another instance's waiter.
  queued: fc.shuffledSubarray(["i:1", "i:2", "other:9", "other:3"]),
  expired: fc.subarray(["i:2", "other:9"]),
  // Waiters in only one of the queue's two sorted sets, and either set of the wrong type.
  onlyQueue: fc.subarray(["i:1", "ix:1", "other:3"]),
  onlyExpiry: fc.subarray(["i:1", "i:2", "other:3"]),
  wrongQueue: fc.oneof(
    { arbitrary: fc.constant("none"), weight: 8 },
    fc.constantFrom("queue", "expiry"),
  ),
  // The memory identity (node/memory-check.ts): its cache fresh, stale or
  // gone; recorded as it is now, as another count (a replaced memory), as
  // a bare run_id (an older version's record), or not at all.
  cache: fc.oneof(
    { arbitrary: fc.constant<"fresh" | "stale" | "absent">("fresh"), weight: 4 },
    fc.constantFrom<"fresh" | "stale" | "absent">("stale", "absent"),
  ),
  recorded: fc.oneof(
    { arbitrary: fc.constant<"current" | "other" | "bare" | "absent">("current"), weight: 4 },
    fc.constantFrom<"current" | "other" | "bare" | "absent">("other", "bare", "absent"),
  ),
  // The node's membership stamp (membership/check.ts) and the one the
  // caller sends (its last argument, "" for a client that found no
  // record): equal most often, else the call is refused.
  stamp: fc.oneof(
    { arbitrary: fc.constant<Slot>({ absent: true }), weight: 4 },
    fc.constantFrom<Slot>({ string: "c:1" }, { string: "c:2" }, { list: "x" }),
  ),
  callerStamp: fc.oneof({ arbitrary: fc.constant(""), weight: 4 }, fc.constant("c:1")),
});
const nodeState = fc.oneof(
  anyNodeState,
  anyNodeState.map((state) => ({
    ...state,
    marker: { string: "1" } as Slot,
    quarantined: false,
    heir: { absent: true } as Slot,
    cache: "fresh" as const,
    stamp: { string: "c:1" } as Slot,
    callerStamp: "c:1",
  })),
  // Healthy, and reserved for a waiter id or an instance: the caller's
  // (waiter "i:1", instance "i") or one that only looks alike ("i:2",
  // "i:10", "ix": a sibling waiter, a longer number, a longer instance).
  fc
    .tuple(
      anyNodeState,
      fc.constantFrom<Slot>(
        { string: "i:1" },
        { string: "i" },
        { string: "i:2" },
        { string: "i:10" },
        { string: "ix" },
      ),
    )
    .map(([state, heir]) => ({
      ...state,
      marker: { string: "1" } as Slot,
      quarantined: false,
      heir,
      cache: "fresh" as const,
      stamp: { absent: true } as Slot,
      callerStamp: "",
    })),
);

const callArgs = fc.record({
  fenced: fc.boolean(),
  // Now and then a counter count the library never sends: the fast path must leave it alone.
  fenceCount: fc.oneof(
    { arbitrary: fc.constant(undefined), weight: 6 },
    fc.constantFrom("-1", "-4", "2"),
  ),
  proposal: decimal,
  from: fc.constantFrom("", "from-value"),
  // Most often "i:1", the waiter the states above were made around.
  waiter: fc.oneof(
    fc.constant(undefined),
    { arbitrary: fc.constant("i:1"), weight: 4 },
    { arbitrary: fc.constantFrom("i:2", "ix:1", "i:1:x"), weight: 2 },
  ),
  waitMs: fc.constantFrom("0", "1200"),
  mayBeQueued: fc.constantFrom("0", "1"),
  quarantineMs: fc.constantFrom("0", "300000"),
  // Apart from the quarantine's and from each other, so that a mix-up shows in the keys' TTLs.
  ttlMs: fc.constantFrom("10000", "40000"),
});

/** The server's memory identity now (node/server-identity.ts). */
const identityOf = async (client: Redis) =>
  String(await client.eval(`return ${serverIdentityLua}`, 0));

async function setState(
  client: Redis,
  state: typeof nodeState extends fc.Arbitrary<infer T> ? T : never,
) {
  // Each key deleted, not FLUSHDB: a flush would change the server's memory
  // identity between the databases compared.
  const keys = await client.keys("*");
  if (keys.length > 0) await client.del(...keys);
  const identity = await identityOf(client);
  const recorded = {
    current: identity,
    other: `${identity.split("/")[0]}/999`,
    bare: identity.split("/")[0],
    absent: undefined,
  }[state.recorded];
  if (recorded !== undefined) await client.set("redquorum:run", recorded);
  // A fresh cache is written by \`run\`, in the same transaction as the call.
  if (state.cache === "stale") {
    const [seconds, micros] = (await client.time()).map(Number);
    const at = seconds! * 1_000 + Math.floor(micros! / 1_000) - 10 * limits.memoryCheckIntervalMs;
    await client.set(aliveKey, `${at}|${identity}`);
  }
  const put = async (name: string, value: Slot) => {
    if ("string" in value) await client.set(name, value.string);
    if ("list" in value) await client.rpush(name, value.list);
  };
  await put("redquorum:marker", state.marker);
  await put(stampKey, state.stamp);
  if (state.quarantined) await client.set("redquorum:quarantine", "1", "PX", 100_000);
  await put("redquorum:fence-floor", state.floor);
  await put("redquorum:fence-max", state.highest);
  await put(counterKey, state.counter);
  if ("string" in state.heir)
    await client.set(`redquorum:heir:${key}`, state.heir.string, "PX", 100_000);
  if ("list" in state.heir) await client.rpush(`redquorum:heir:${key}`, state.heir.list);
  await put(key, state.lock);
  for (const [i, waiter] of state.queued.entries()) {
    await client.zadd(`redquorum:queue:${key}`, i + 1, waiter);
    const expiresAt = state.expired.includes(waiter) ? Date.now() - 5_000 : Date.now() + 100_000;
    await client.zadd(`redquorum:queue-expiry:${key}`, expiresAt, waiter);
  }
  for (const waiter of state.onlyQueue) {
    if (!state.queued.includes(waiter)) await client.zadd(`redquorum:queue:${key}`, 50, waiter);
  }
  for (const waiter of state.onlyExpiry) {
    if (!state.queued.includes(waiter)) {
      await client.zadd(`redquorum:queue-expiry:${key}`, Date.now() + 100_000, waiter);
    }
  }
  if (state.wrongQueue !== "none") {
    const name = `redquorum:${state.wrongQueue === "queue" ? "queue" : "queue-expiry"}:${key}`;
    await client.del(name);
    await client.rpush(name, "x");
  }
}

/** Caches the memory identity as the scripts do, at the server's time now; answers that time (ms). */
const cacheNow = `local t = redis.call('time')
local ms = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('set', KEYS[1], ms .. '|' .. ${serverIdentityLua})
return ms`;

/**
 * A run meant to meet a fresh cache that may have met a stale one: the
 * server's clock moved `memoryCheckIntervalMs` or more between the cache
 * and the end of the call (a loaded machine can stall the server that
 * long). The case is run again; what it compares is unchanged.
 */
class StaleCache extends Error {
  constructor() {
    super(
      `the memory cache aged ${limits.memoryCheckIntervalMs} ms or more within a run, every time`,
    );
  }
}

/**
 * Runs the script; with \`fresh\`, right after caching the memory identity,
 * in one transaction: the cache is then as fresh as it can be, but a
 * server stalled within the transaction can still see it stale; with
 * \`strict\`, a run that may have throws \`StaleCache\`.
 */
async function run(
  client: Redis,
  sha: string,
  args: string[],
  fresh: boolean,
  keyCount = 1,
  strict = true,
): Promise<string> {
  try {
    let reply: unknown;
    if (fresh) {
      const results = await client
        .multi()
        .eval(cacheNow, 1, aliveKey)
        .evalsha(sha, keyCount, key, ...args)
        .time()
        .exec();
      const cachedMs = Number(results![0]![1]);
      const [seconds, micros] = (results![2]![1] as string[]).map(Number);
      const endMs = seconds! * 1_000 + Math.floor(micros! / 1_000);
      if (strict && endMs - cachedMs >= limits.memoryCheckIntervalMs) throw new StaleCache();
      const [error, value] = results![1]!;
      if (error) throw error;
      reply = value;
    } else {
      reply = await client.evalsha(sha, keyCount, key, ...args);
    }
    return JSON.stringify(reply)
      .replace(/\d+\.\d+/g, "T")
      .replace(/\d{13,}/g, "T");
  } catch (error) {
    if (error instanceof StaleCache) throw error;
    // The same error, whatever line of which script raised it.
    return `error: ${(error as Error).message.replace(/user_script:\d+|script: \w+|@user_script:\d+/g, "")}`;
  }
}

describe("the acquire script's fast path", () => {
  let cluster: LocalCluster;
  let fast: Redis;
  let general: Redis;
  let onlyFast: Redis;
  let shas: { fast: string; general: string; fastOnly: string };

  before(async () => {
    cluster = await LocalCluster.start({ nodeCount: 1, persistence: "none" });
    fast = new Redis(cluster.urls[0]!, { db: 0 });
    general = new Redis(cluster.urls[0]!, { db: 1 });
    onlyFast = new Redis(cluster.urls[0]!, { db: 2 });
    shas = {
      fast: (await fast.script("LOAD", acquireScript.source)) as string,
      general: (await general.script("LOAD", generalOnly)) as string,
      fastOnly: (await onlyFast.script("LOAD", fastOnly)) as string,
    };
  });
  after(async () => {
    fast.disconnect();
    general.disconnect();
    onlyFast.disconnect();
    await cluster.stop();
  });

  it("can be switched off for the comparison", () => {
    assert.notEqual(generalOnly, acquireScript.source, "the fast path's condition was not found");
    assert.ok(generalStart > 0, "the general path's start was not found");
  });

  it("gives the same reply and leaves the same keys as the general path, for any state and call", async () => {
    const seed = testSeed();
    // Cases compared: 750 at the fast scale, 1,500 at the full one; each
    // kind of fast-path case must come up at least `atLeast` times (about
    // 1 in 70 cases leaves the caller's place in the queue, the rarest).
    const runs = byScale(750, 1_500);
    const atLeast = Math.ceil((5 * runs) / 1_500);
    let fastCases = 0;
    let fastHandoffs = 0;
    let othersWait = 0;
    let fastMine = 0;
    let fastLeaves = 0;
    await fc
      .assert(
        fc.asyncProperty(nodeState, callArgs, async (state, call) => {
          // Run again while a run meant to meet a fresh cache may not have.
          for (let attempt = 1; ; attempt++) {
            try {
              return await compareCase();
            } catch (error) {
              if (!(error instanceof StaleCache) || attempt === 10) throw error;
            }
          }
          async function compareCase() {
            const args = [
              `v-${call.proposal}`,
              call.ttlMs,
              call.quarantineMs,
              call.fenceCount ?? (call.fenced ? "1" : "0"),
              ...(call.fenced ? [call.proposal] : []),
              call.from,
              ...(call.waiter ? [call.waiter, "0", call.waitMs, call.mayBeQueued] : []),
              // The membership stamp, always the last argument (membership/check.ts).
              state.callerStamp,
            ];
            await setState(fast, state);
            await setState(general, state);
            const replies = {
              fast: await run(fast, shas.fast, args, state.cache === "fresh"),
              general: await run(general, shas.general, args, state.cache === "fresh"),
            };
            assert.equal(
              replies.fast,
              replies.general,
              `reply for ${JSON.stringify({ state, call })}`,
            );
            assert.deepEqual(
              await dumpKeys(fast),
              await dumpKeys(general),
              `keys after ${JSON.stringify({ state, call })}`,
            );
            // The cases the fast path serves alone (the general path cut off
            // gives the same reply): grants of a free key, and handoffs onto
            // the handed-off value or an expired key.
            // Not reserved, or reserved for the caller or its instance (the waiter id up to its first colon).
            const mine =
              call.waiter !== undefined &&
              "string" in state.heir &&
              (state.heir.string === call.waiter ||
                state.heir.string === instanceOfWaiter(call.waiter));
            const member =
              "string" in state.stamp
                ? state.stamp.string === state.callerStamp
                : "absent" in state.stamp && state.callerStamp === "";
            const healthy =
              member &&
              state.cache === "fresh" &&
              call.fenceCount === undefined &&
              "string" in state.marker &&
              state.marker.string === "1" &&
              !state.quarantined &&
              ("absent" in state.heir || mine) &&
              !("list" in state.counter);
            const grant = healthy && call.from === "" && "absent" in state.lock;
            const handoff =
              healthy &&
              call.from !== "" &&
              ("absent" in state.lock ||
                ("string" in state.lock && state.lock.string === call.from));
            if (grant || handoff) {
              await setState(onlyFast, state);
              assert.equal(
                await run(onlyFast, shas.fastOnly, args, state.cache === "fresh"),
                replies.fast,
                `the fast path alone, for ${JSON.stringify({ state, call })}`,
              );
            }
            if (grant) fastCases++;
            if ((grant || handoff) && mine) fastMine++;
            const code = replies.fast.replace(/^\[/, "").split(",")[0];
            const granted = [
              acquireReply.granted,
              acquireReply.replaced,
              acquireReply.replacedOthersWait,
            ]
              .map(String)
              .includes(code ?? "");
            // A grant that leaves the caller's place in the queue (an earlier attempt queued it).
            const leaves =
              call.waiter !== undefined &&
              call.mayBeQueued === "1" &&
              state.queued.includes(call.waiter);
            if ((grant || handoff) && granted && leaves) fastLeaves++;
            if (handoff) {
              fastHandoffs++;
              if (code === String(acquireReply.replacedOthersWait)) othersWait++;
            }
          }
        }),
        { seed, numRuns: runs, endOnFailure: true },
      )
      .catch((error: Error) => {
        throw new Error(
          `${describeSeed(seed)}: ${error.message}\n${String((error as { cause?: unknown }).cause)}`,
        );
      });
    // The comparison covered grants the fast path makes, not only its fall-throughs.
    assert.ok(
      fastCases >= atLeast,
      `only ${fastCases} of ${runs} cases were fast-path grants (${describeSeed(seed)})`,
    );
    assert.ok(
      fastHandoffs >= atLeast,
      `only ${fastHandoffs} of ${runs} cases were fast-path handoffs (${describeSeed(seed)})`,
    );
    // …and handoffs that say another instance's waiter heads the queue.
    assert.ok(
      othersWait >= 1,
      `only ${othersWait} fast-path handoffs saw another instance's waiter first (${describeSeed(seed)})`,
    );
    // …and grants onto a reservation of the caller's, and grants that leave its place in the queue.
    assert.ok(
      fastMine >= atLeast,
      `only ${fastMine} fast-path cases were reserved for the caller (${describeSeed(seed)})`,
    );
    assert.ok(
      fastLeaves >= atLeast,
      `only ${fastLeaves} fast-path cases left the caller's place in the queue (${describeSeed(seed)})`,
    );
    console.log(
      `fast-path grants ${fastCases}, handoffs ${fastHandoffs} (another instance's waiter first: ${othersWait}), ` +
        `reserved for the caller ${fastMine}, leaving its place ${fastLeaves}`,
    );
  });

  it("refuses a call whose membership stamp is not the node's, on the fast and the general path, writing nothing", async () => {
    // A client that missed a change of members (membership/check.ts): the
    // node moved on to "c:2", the caller sends "c:1".
    for (const [path, keys] of [
      ["fast", [key]],
      ["general", [key, `${key}-2`]],
    ] as const) {
      for (const fenced of [false, true]) {
        const keysBefore = await fast.keys("*");
        if (keysBefore.length > 0) await fast.del(...keysBefore);
        await fast.set("redquorum:marker", "1");
        await fast.set(stampKey, "c:2");
        const counters = fenced ? keys.map(() => "7") : [];
        const args = ["v-1", "10000", "300000", String(counters.length), ...counters, "", "c:1"];
        // Fresh or not, it refuses before anything is written.
        const reply = await run(
          fast,
          shas.fast,
          [...keys.slice(1), ...args],
          true,
          keys.length,
          false,
        );
        assert.match(reply, /REDQUORUM_MEMBERSHIP c:2/, `${path} path, fenced ${fenced}`);
        assert.deepEqual(
          (await fast.keys("*")).sort(),
          [aliveKey, "redquorum:marker", stampKey].sort(),
          `${path} path, fenced ${fenced}: nothing but the memory check's cache written`,
        );
      }
    }
  });
});
