// What one uncontended acquire → release cycle allocates in the client:
// redquorum (fencing on and off) and node-redlock v5, one worker each, on
// the same 5 local nodes. V8's sampling heap profiler (objects later
// collected included) runs over a second run of the measured cycles;
// prints bytes per cycle, the young-generation collections and the client's
// user CPU of the first run (without the profiler, which slows collections),
// and the functions that allocate most (self, per cycle; the profiler
// samples, so a function's share moves a little from run to run). Allocation is steadier than
// cycles/s on a machine whose speed moves from hour to hour, and every
// byte is memory the cores' caches and the collector go through.
//
//   npm run build && node bench/client-alloc.mjs [--cycles 5000] [--top 12]
import { Session } from "node:inspector/promises";
import { PerformanceObserver } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { Redis } from "ioredis";
import NodeRedlock from "redlock";
import { LocalCluster, Redlock } from "../dist/index.js";
import { fmt } from "./report.mjs";

const { values } = parseArgs({
  options: {
    cycles: { type: "string", default: "5000" },
    top: { type: "string", default: "12" },
  },
});
const cycles = Number(values.cycles);
const top = Number(values.top);

/** Minor (young-generation) collections and their ms, counted while `on`. */
const gc = { on: false, count: 0, ms: 0 };
const observer = new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    if (gc.on && entry.detail?.kind === 1) {
      gc.count++;
      gc.ms += entry.duration;
    }
  }
});
observer.observe({ entryTypes: ["gc"] });

const cluster = await LocalCluster.start({ nodeCount: 5, persistence: "none" });
const fenced = new Redlock(cluster.urls);
const unfenced = new Redlock(cluster.urls, { fencing: false });
const clients = cluster.urls.map((url) => new Redis(url));
const nodeRedlock = new NodeRedlock(clients, { retryCount: 0 });
const session = new Session();
session.connect();
try {
  await fenced.init();
  const contenders = {
    redquorum: async () => (await fenced.acquire(["alloc:fenced"], 10_000)).release(),
    "redquorum, fencing off": async () =>
      (await unfenced.acquire(["alloc:unfenced"], 10_000)).release(),
    "node-redlock 5.0.0-beta.2": async () =>
      (await nodeRedlock.acquire(["alloc:node-redlock"], 10_000)).release(),
  };
  await session.post("HeapProfiler.enable");
  const rows = [];
  for (const [name, cycle] of Object.entries(contenders)) {
    for (let i = 0; i < 1_000; i++) await cycle(); // warm up
    await new Promise((resolve) => setTimeout(resolve, 50)); // let the warm-up's GC entries pass
    // Collections and CPU first, without the profiler (it slows collections down).
    Object.assign(gc, { on: true, count: 0, ms: 0 });
    const cpu = process.cpuUsage();
    for (let i = 0; i < cycles; i++) await cycle();
    const used = process.cpuUsage(cpu);
    await new Promise((resolve) => setTimeout(resolve, 50)); // GC entries are delivered late
    gc.on = false;
    const collections = { ...gc };
    await session.post("HeapProfiler.startSampling", {
      samplingInterval: 1024,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
    for (let i = 0; i < cycles; i++) await cycle();
    const { profile } = await session.post("HeapProfiler.stopSampling");
    const bySite = new Map();
    let total = 0;
    const walk = (node) => {
      total += node.selfSize;
      if (node.selfSize > 0) {
        const { functionName, url, lineNumber } = node.callFrame;
        const file = url.replace(/^.*\/node_modules\//, "").replace(/^.*\//, "");
        const site = `${functionName || "(anonymous)"} ${file ? `${file}:${lineNumber + 1}` : ""}`;
        bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize);
      }
      for (const child of node.children) walk(child);
    };
    walk(profile.head);
    rows.push({ name, bytes: total / cycles, gc: collections, userUs: used.user / cycles, bySite });
  }
  console.log(
    "\n| client | bytes allocated per cycle (sampled) | young collections per 1,000 cycles | their ms per 1,000 cycles | client user µs per cycle |",
  );
  console.log("|---|---|---|---|---|");
  for (const row of rows) {
    console.log(
      `| ${row.name} | ${fmt(row.bytes)} | ${fmt((row.gc.count * 1000) / cycles, 1)} | ${fmt((row.gc.ms * 1000) / cycles, 1)} | ${fmt(row.userUs)} |`,
    );
  }
  for (const row of top > 0 ? rows : []) {
    console.log(`\n${row.name}, bytes per cycle by allocating function (self):`);
    const sites = [...row.bySite].sort((a, b) => b[1] - a[1]).slice(0, top);
    for (const [site, bytes] of sites) console.log(`  ${fmt(bytes / cycles).padStart(7)}  ${site}`);
  }
  console.log(`\n${fmt(cycles)} cycles each after 1,000 to warm up, one worker, 5 local nodes`);
} finally {
  observer.disconnect();
  session.disconnect();
  await Promise.all([fenced.close(), unfenced.close()]);
  await nodeRedlock.quit().catch(() => {});
  for (const client of clients) client.disconnect();
  await cluster.stop();
}
