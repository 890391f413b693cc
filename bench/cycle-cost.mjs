// What one uncontended acquire → release cycle costs, redquorum (fencing on
// and off) beside the bare floor and the checked floor (the floor with
// redquorum's commands in its scripts), one worker in this process, interleaved
// and repeated on the same 5 local redis-server nodes: cycles/s, the
// client's CPU per cycle (process.cpuUsage: user and system µs), and Redis
// commands and Redis time per cycle (INFO commandstats on every node,
// summed: commands a script runs are counted, and their time is inside the
// script's), and the Redis processes' CPU per cycle (INFO cpu, user and
// system: the network's share, which the commands' time leaves out,
// included). node-redlock v5 runs beside them (bench/'s own dependency:
// `npm run bench` installs it). Then, per cycle, each command's count and
// Redis µs (what a script runs inside it included in its own line). The
// numbers behind docs/benchmarks.md's "One worker".
//
//   npm run build && node bench/cycle-cost.mjs --seconds 2 --reps 3 [--json FILE]
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import NodeRedlock from "redlock";
import { LocalCluster, Redlock } from "../dist/index.js";
import { bareRounds, majorityOf } from "./floor.mjs";
import { benchArgs, fmt, median, writeResults } from "./report.mjs";

const { cellMs, reps, json } = benchArgs();

/**
 * The "checked floor": the floor's rounds with redquorum's commands in its
 * scripts and none of its logic. The acquire reads what a fenced fast path
 * reads (one MGET of 8 keys: node marker, quarantine, fencing floor and
 * highest, the counter, the reservation, the memory cache, the membership
 * stamp), asks the node's TIME, sets the key (SET NX PX) and writes the
 * counter and the highest value (MSET); the release compares and deletes,
 * then asks whether a queue exists (EXISTS). Its own key names, so it
 * touches nothing of redquorum's. What one worker's cycle costs with
 * redquorum's checks, but none of the code that decides on them.
 */
const checkedAcquire = `local s = redis.call('mget', 'checked:marker', 'checked:quarantine', 'checked:floor',
  'checked:highest', 'checked:counter:' .. KEYS[1], 'checked:heir:' .. KEYS[1], 'checked:alive', 'checked:stamp')
local t = redis.call('time')
if not redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end
redis.call('mset', 'checked:counter:' .. KEYS[1], ARGV[3], 'checked:highest', ARGV[3])
return {1, ARGV[3], t[1]}`;
const checkedRelease = `local deleted = 0
if redis.call('get', KEYS[1]) == ARGV[1] then deleted = redis.call('del', KEYS[1]) end
return {deleted, redis.call('exists', 'checked:queue:' .. KEYS[1])}`;

function checkedRounds(clients, ttlMs) {
  for (const client of clients) {
    client.defineCommand("checkedAcquire", { numberOfKeys: 1, lua: checkedAcquire });
    client.defineCommand("checkedRelease", { numberOfKeys: 1, lua: checkedRelease });
  }
  let token = 0;
  return async (resource) => {
    const value = randomBytes(20).toString("hex");
    const proposal = String(++token);
    const won = await majorityOf(
      clients.map((c) => c.checkedAcquire(resource, value, ttlMs, proposal)),
      (reply) => Array.isArray(reply) && reply[0] === 1,
    );
    await majorityOf(
      clients.map((c) => c.checkedRelease(resource, value)),
      () => true,
    );
    if (!won) throw new Error("checked floor: not acquired (the key is not contended here)");
  };
}
/**
 * The commands each cycle sends itself: their time is Redis's time for the
 * cycle (a script's includes the commands it runs, which are counted but
 * not timed again).
 */
const sent = {
  floor: ["set", "evalsha"],
  "checked floor": ["evalsha"],
  redquorum: ["evalsha"],
  "redquorum, fencing off": ["evalsha"],
  "node-redlock 5.0.0-beta.2": ["evalsha"],
};
const cluster = await LocalCluster.start({ nodeCount: 5, persistence: "none" });
const inspect = cluster.urls.map((url) => new Redis(url));
const clients = cluster.urls.map((url) => new Redis(url));
const fenced = new Redlock(cluster.urls);
const unfenced = new Redlock(cluster.urls, { fencing: false });
const redlockClients = cluster.urls.map((url) => new Redis(url));
const nodeRedlock = new NodeRedlock(redlockClients, { retryCount: 0 });
try {
  await fenced.init();
  const floor = bareRounds(clients, 10_000);
  const checked = checkedRounds(clients, 10_000);
  const cycles = {
    floor: async () => {
      const lock = await floor.acquireRound("cost:floor");
      if (!lock) throw new Error("floor: not acquired (the key is not contended here)");
      await floor.release(lock);
    },
    "checked floor": () => checked("cost:checked"),
    redquorum: async () => (await fenced.acquire(["cost:fenced"], 10_000)).release(),
    "redquorum, fencing off": async () =>
      (await unfenced.acquire(["cost:unfenced"], 10_000)).release(),
    "node-redlock 5.0.0-beta.2": async () =>
      (await nodeRedlock.acquire(["cost:node-redlock"], 10_000)).release(),
  };
  // Commands, the µs Redis spent in those a cycle sends, and the Redis
  // processes' CPU time (INFO cpu: user and system, network included), over all nodes.
  const commands = async (cycle) => {
    let count = 0;
    let us = 0;
    let cpuUs = 0;
    const byName = {};
    for (const client of inspect) {
      const cpu = await client.info("cpu");
      for (const [, seconds] of cpu.matchAll(/used_cpu_(?:sys|user):([\d.]+)/g)) {
        cpuUs += Number(seconds) * 1e6;
      }
      const stats = await client.info("commandstats");
      for (const [, name, calls, usec] of stats.matchAll(
        /cmdstat_([\w|]+):calls=(\d+),usec=(\d+)/g,
      )) {
        if (name === "info") continue;
        count += Number(calls);
        if (sent[cycle].includes(name)) us += Number(usec);
        byName[name] ??= { calls: 0, us: 0 };
        byName[name].calls += Number(calls);
        byName[name].us += Number(usec);
      }
    }
    return { count, us, cpuUs, byName };
  };
  const runs = Object.fromEntries(Object.keys(cycles).map((name) => [name, []]));
  // Each cycle runs 2 s before any is counted: the first seconds of a
  // process are its JIT compiling the code (bench/warmup.mjs).
  for (const cycle of Object.values(cycles)) {
    const warmUntil = performance.now() + 2_000;
    while (performance.now() < warmUntil) await cycle();
  }
  for (let rep = 0; rep < reps; rep++) {
    const names = Object.keys(cycles);
    for (const name of rep % 2 === 0 ? names : names.reverse()) {
      const before = await commands(name);
      const cpu = process.cpuUsage();
      const start = performance.now();
      let n = 0;
      while (performance.now() - start < cellMs) {
        await cycles[name]();
        n++;
      }
      const elapsedMs = performance.now() - start;
      const used = process.cpuUsage(cpu);
      const after = await commands(name);
      runs[name].push({
        perSecond: (n / elapsedMs) * 1_000,
        userUs: used.user / n,
        systemUs: used.system / n,
        commands: (after.count - before.count) / n,
        redisUs: (after.us - before.us) / n,
        redisCpuUs: (after.cpuUs - before.cpuUs) / n,
        byName: Object.fromEntries(
          Object.entries(after.byName).map(([name, { calls, us }]) => [
            name,
            {
              calls: (calls - (before.byName[name]?.calls ?? 0)) / n,
              us: (us - (before.byName[name]?.us ?? 0)) / n,
            },
          ]),
        ),
      });
    }
  }
  const floorRate = median(runs.floor.map((r) => r.perSecond));
  console.log(
    "\n| cycle | cycles/s (median) | vs floor | client user / system µs per cycle | Redis commands per cycle | Redis µs per cycle in commands (5 nodes) | Redis CPU µs per cycle (5 processes) |",
  );
  console.log("|---|---|---|---|---|---|---|");
  for (const [name, cells] of Object.entries(runs)) {
    const m = (field) => median(cells.map((c) => c[field]));
    console.log(
      `| ${name} | ${fmt(m("perSecond"))} | ${fmt(m("perSecond") / floorRate, 2)}× | ` +
        `${fmt(m("userUs"))} / ${fmt(m("systemUs"))} | ${fmt(m("commands"), 1)} | ${fmt(m("redisUs"))} | ${fmt(m("redisCpuUs"))} |`,
    );
  }
  console.log(
    `\n${reps} interleaved runs of ${cellMs / 1000} s per cycle, one worker, 5 local nodes`,
  );
  if (json) {
    const summary = Object.entries(runs).map(([name, cells]) => {
      const m = (field) => median(cells.map((c) => c[field]));
      const fields = ["perSecond", "userUs", "systemUs", "commands", "redisUs", "redisCpuUs"];
      return { cycle: name, ...Object.fromEntries(fields.map((f) => [f, m(f)])) };
    });
    writeResults({
      setup: "one worker, 5 local redis-server nodes (no persistence)",
      file: json,
      cellMs,
      reps,
      summary,
      results: runs,
    });
  }
  // Per cycle, over the 5 nodes: each command's calls and Redis µs (medians).
  console.log("\n| cycle | commands per cycle: calls (Redis µs) |\n|---|---|");
  for (const [name, cells] of Object.entries(runs)) {
    const names = [...new Set(cells.flatMap((c) => Object.keys(c.byName)))];
    const parts = names
      .map((command) => ({
        command,
        calls: median(cells.map((c) => c.byName[command]?.calls ?? 0)),
        us: median(cells.map((c) => c.byName[command]?.us ?? 0)),
      }))
      .filter((p) => p.calls >= 0.05)
      .sort((a, b) => b.calls - a.calls || b.us - a.us)
      .map((p) => `${p.command} ${fmt(p.calls, 1)} (${fmt(p.us)})`);
    console.log(`| ${name} | ${parts.join(", ")} |`);
  }
} finally {
  await Promise.all([fenced.close(), unfenced.close()]);
  await nodeRedlock.quit().catch(() => {});
  for (const client of [...clients, ...inspect, ...redlockClients]) client.disconnect();
  await cluster.stop();
}
