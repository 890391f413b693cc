// What redquorum's lock scripts cost Redis, without the client around them:
// acquire → release cycles sent straight over ioredis to 5 local nodes, one
// cycle at a time (as one worker does: every call finds Redis's caches
// cold), with the acquire script as it is (fast path first), with its fast
// path switched off (the general path for every grant), onto a key
// reserved for the caller's instance (a retake within its turn, fast path
// and general path), in parts (the
// floor's SET NX with our release; a grant's bare calls with our release),
// and with the floor's SET NX and compare-and-delete as scripts: where the
// one-worker gap to the floor is. Prints cycles/s and
// Redis µs per cycle (INFO commandstats, EVALSHA, summed over the nodes),
// medians of interleaved repetitions. The numbers behind docs/benchmarks.md's
// "The acquire's fast path".
//
//   node --import tsx bench/script-cost.ts --seconds 1 --reps 9
import { parseArgs } from "node:util";
import { Redis } from "ioredis";
import { fenceFloorKey, fenceKeyPrefix, fenceMaxKey } from "../src/fencing/scripts.js";
import { LocalCluster } from "../src/index.js";
import { acquireFastPathCondition, acquireScript } from "../src/lock/acquire-script.js";
import { heirKeyPrefix } from "../src/lock/queue-keys.js";
import { releaseScript } from "../src/lock/release-script.js";
import { membershipCheckLua, membershipStampLua } from "../src/membership/check.js";
import { markerKey, quarantineKey } from "../src/node/node-state.js";

const { values } = parseArgs({
  options: { seconds: { type: "string", default: "1" }, reps: { type: "string", default: "9" } },
});
const cellMs = Number(values.seconds) * 1_000;
const reps = Number(values.reps);

const generalOnly = acquireScript.source.replace(
  `if ${acquireFastPathCondition} then`,
  "if false then",
);
if (generalOnly === acquireScript.source)
  throw new Error("the fast path's condition was not found");

interface Variant {
  acquire: string;
  release: string;
  acquireArgs: (value: string, proposal: number) => string[];
  releaseArgs: (value: string) => string[];
  /** Made before each cycle's acquire (not counted: a plain command, not EVALSHA). */
  setup?: (node: Redis, key: string) => Promise<unknown>;
}
// As the client sends them: fenced, quarantine on, not a handoff, a retries-0
// caller (no waiter id); the release in the turn's "keep" mode, as an
// uncontended release within turnMs of its grant is.
const fenced = (value: string, proposal: number) => [
  value,
  "10000",
  "300000",
  "1",
  String(proposal),
  "",
];
const kept = (value: string) => [value, "keep", "50", "instance"];
// A retake within the instance's turn (turns.ts): the key reserved for the
// instance, the caller a waiter of it that may wait (registration 1.2 s).
const reservedForUs = (node: Redis, key: string) =>
  node.set(`${heirKeyPrefix}${key}`, "instance", "PX", 50);
const fencedWaiter = (value: string, proposal: number) => [
  ...fenced(value, proposal),
  "instance:1",
  "0",
  "1200",
  "0",
];
const floorSet = "return redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])";
// A fenced grant's two writes, as the fast path makes them (ARGV[5]: the proposal).
const grantCalls = `if not redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end
redis.call('mset', '${fenceKeyPrefix}' .. KEYS[1], ARGV[5], '${fenceMaxKey}', ARGV[5])
return {1, ARGV[5], 1}`;
const variants: Record<string, Variant> = {
  "acquire script": {
    acquire: acquireScript.source,
    release: releaseScript.source,
    acquireArgs: fenced,
    releaseArgs: kept,
  },
  "acquire script, general path only": {
    acquire: generalOnly,
    release: releaseScript.source,
    acquireArgs: fenced,
    releaseArgs: kept,
  },
  "acquire script, key reserved for our instance": {
    acquire: acquireScript.source,
    release: releaseScript.source,
    acquireArgs: fencedWaiter,
    releaseArgs: kept,
    setup: reservedForUs,
  },
  "acquire script, key reserved for our instance, general path only": {
    acquire: generalOnly,
    release: releaseScript.source,
    acquireArgs: fencedWaiter,
    releaseArgs: kept,
    setup: reservedForUs,
  },
  // Where the acquire's Redis time goes, one part at a time: the floor's SET
  // NX with our release (what our release adds), then the grant's calls
  // alone (SET NX and the counter's MSET; then the MGET of the node's
  // state before them) without the script's checks and votes.
  "floor's SET NX, our release": {
    acquire: floorSet,
    release: releaseScript.source,
    acquireArgs: fenced,
    releaseArgs: kept,
  },
  "bare SET NX + MSET, our release": {
    acquire: `${grantCalls}`,
    release: releaseScript.source,
    acquireArgs: fenced,
    releaseArgs: kept,
  },
  "bare MGET + SET NX + MSET, our release": {
    acquire: `redis.call('mget', '${markerKey}', '${quarantineKey}', '${fenceFloorKey}', '${fenceMaxKey}', '${fenceKeyPrefix}' .. KEYS[1], '${heirKeyPrefix}' .. KEYS[1])
${grantCalls}`,
    release: releaseScript.source,
    acquireArgs: fenced,
    releaseArgs: kept,
  },
  "floor's commands as scripts": {
    acquire: floorSet,
    release:
      "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0",
    acquireArgs: (value) => [value, "10000"],
    releaseArgs: (value) => [value],
  },
};

const cluster = await LocalCluster.start({ nodeCount: 5, persistence: "none" });
const nodes = cluster.urls.map((url) => new Redis(url));
try {
  for (const node of nodes) await node.set("redquorum:marker", "1");
  const shas = new Map<string, string>();
  for (const variant of Object.values(variants)) {
    for (const source of [variant.acquire, variant.release]) {
      for (const node of nodes) shas.set(source, (await node.script("LOAD", source)) as string);
    }
  }
  const runs = new Map<string, { perSecond: number[]; redisUs: number[] }>();
  let sequence = 0;
  for (let rep = 0; rep < reps; rep++) {
    // A B C, then C B A: the machine's drift and a cell's place in the rep fall on each alike.
    const order = rep % 2 === 0 ? Object.entries(variants) : Object.entries(variants).reverse();
    for (const [name, variant] of order) {
      const acquireSha = shas.get(variant.acquire)!;
      const releaseSha = shas.get(variant.release)!;
      // The acquire script's last argument: the membership stamp ("" on nodes without a record).
      // (The clock's snippet comes first in every script: lua-script.ts.)
      const checks = [membershipCheckLua, membershipStampLua].some((m) =>
        variant.acquire.includes(m),
      );
      const stamp = checks ? [""] : [];
      const key = `script-cost:${name}`;
      for (const node of nodes) await node.config("RESETSTAT");
      let cycles = 0;
      const end = performance.now() + cellMs;
      while (performance.now() < end) {
        const value = `v${++sequence}`;
        if (variant.setup) await Promise.all(nodes.map((n) => variant.setup!(n, key)));
        await Promise.all(
          nodes.map((n) =>
            n.evalsha(acquireSha, 1, key, ...variant.acquireArgs(value, sequence), ...stamp),
          ),
        );
        await Promise.all(
          nodes.map((n) => n.evalsha(releaseSha, 1, key, ...variant.releaseArgs(value))),
        );
        cycles++;
      }
      let us = 0;
      for (const node of nodes) {
        const stats = await node.info("commandstats");
        us += Number(/cmdstat_evalsha:calls=\d+,usec=(\d+)/.exec(stats)?.[1] ?? 0);
      }
      const run = runs.get(name) ?? { perSecond: [], redisUs: [] };
      run.perSecond.push((cycles * 1_000) / cellMs);
      run.redisUs.push(us / cycles);
      runs.set(name, run);
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const fmt = (x: number) => Math.round(x).toLocaleString("en-US");
  console.log("\n| scripts | cycles/s (median, min–max) | Redis µs per cycle (5 nodes, median) |");
  console.log("|---|---|---|");
  for (const [name, run] of runs) {
    const range = `${fmt(Math.min(...run.perSecond))}–${fmt(Math.max(...run.perSecond))}`;
    console.log(
      `| ${name} | ${fmt(median(run.perSecond))} (${range}) | ${fmt(median(run.redisUs))} |`,
    );
  }
  console.log(
    `\n${reps} interleaved runs of ${cellMs / 1_000} s per cell, one cycle at a time, 5 local nodes`,
  );
} finally {
  for (const node of nodes) node.disconnect();
  await cluster.stop();
}
