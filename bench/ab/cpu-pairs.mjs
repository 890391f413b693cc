// A/B of two builds in one process on one 5-node cluster: uncontended
// acquire → release by 1 and by 8 workers of one Redlock (each on its own
// key), the two builds alternating cell by cell (A B, then B A, …).
// Prints, per worker count, each build's median cycles/s and client CPU
// (user + system) per cycle, and the paired ratios B/A: a pair is measured
// seconds apart, so the machine's drift between runs cancels in it. Where
// interleaved.mjs compares throughput, this compares what a cycle costs
// the client, which moves less from run to run.
//   node bench/ab/cpu-pairs.mjs <built worktree A> <built worktree B> [--workers 1,8] [--seconds 2] [--reps 10]
import { parseArgs } from "node:util";
import { median } from "../report.mjs";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    workers: { type: "string", default: "1,8" },
    seconds: { type: "string", default: "2" },
    reps: { type: "string", default: "10" },
  },
});
if (positionals.length !== 2) {
  throw new Error("usage: cpu-pairs.mjs <built worktree A> <built worktree B> [--workers 1,8]");
}
const cellMs = Number(values.seconds) * 1_000;
const reps = Number(values.reps);
const workerCounts = values.workers.split(",").map(Number);
const builds = {
  A: await import(`${positionals[0]}/dist/index.js`),
  B: await import(`${positionals[1]}/dist/index.js`),
};
const cluster = await builds.B.LocalCluster.start({ nodeCount: 5, persistence: "none" });
const locks = { A: new builds.A.Redlock(cluster.urls), B: new builds.B.Redlock(cluster.urls) };
try {
  await locks.B.init();
  for (const name of ["A", "B"]) {
    for (let i = 0; i < 500; i++)
      await (await locks[name].acquire([`warm:${name}`], 10_000)).release();
  }
  const cell = async (name, workers) => {
    const redlock = locks[name];
    let cycles = 0;
    const endMs = performance.now() + cellMs;
    const cpu = process.cpuUsage();
    const startMs = performance.now();
    await Promise.all(
      Array.from({ length: workers }, async (_, worker) => {
        while (performance.now() < endMs) {
          await (await redlock.acquire([`pairs:${name}:${worker}`], 10_000)).release();
          cycles++;
        }
      }),
    );
    const used = process.cpuUsage(cpu);
    return {
      perSecond: (cycles * 1_000) / (performance.now() - startMs),
      cpuUs: (used.user + used.system) / cycles,
    };
  };
  const runs = {};
  for (let rep = 0; rep < reps; rep++) {
    for (const workers of workerCounts) {
      for (const name of rep % 2 ? ["B", "A"] : ["A", "B"]) {
        const key = `${name}${workers}`;
        runs[key] ??= [];
        runs[key].push(await cell(name, workers));
      }
    }
  }
  const f = (x, digits = 0) => x.toFixed(digits);
  console.log(`A: ${positionals[0]}\nB: ${positionals[1]}\n${reps} pairs of ${values.seconds} s\n`);
  console.log(
    "| workers | A cycles/s | B cycles/s | paired B/A cycles/s | A client CPU µs/cycle | B | paired B/A CPU (min–max) |",
  );
  console.log("|---|---|---|---|---|---|---|");
  for (const workers of workerCounts) {
    const a = runs[`A${workers}`];
    const b = runs[`B${workers}`];
    const speed = a.map((x, i) => b[i].perSecond / x.perSecond);
    const cpu = a.map((x, i) => b[i].cpuUs / x.cpuUs);
    console.log(
      `| ${workers} | ${f(median(a.map((x) => x.perSecond)))} | ${f(median(b.map((x) => x.perSecond)))} | ${f(median(speed), 3)} | ` +
        `${f(median(a.map((x) => x.cpuUs)), 1)} | ${f(median(b.map((x) => x.cpuUs)), 1)} | ` +
        `${f(median(cpu), 3)} (${f(Math.min(...cpu), 2)}–${f(Math.max(...cpu), 2)}) |`,
    );
  }
} finally {
  await locks.A.close();
  await locks.B.close();
  await cluster.stop();
}
