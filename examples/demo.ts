/**
 * The main job for now: a local 5-node cluster and 5 workers contending for
 * one lock, printing who held it when, while nodes fail underneath.
 *
 * Run it from the repository root with `npm start` (installs redis-server if
 * missing, builds dist/, runs this for 6 s), or after `npm run build`:
 * `npx tsx examples/demo.ts [seconds]`. It imports "redquorum" as a user
 * would: the package's own name resolves to the built dist/ through `exports`.
 */
import { LocalCluster, QuorumError, Redlock, ResourceLockedError } from "redquorum";

const seconds = Number(process.argv[2] ?? 6);
const workerCount = 5;
const resource = "demo:printer";
const ttlMs = 2_000;

const wall = () => new Date().toISOString().slice(11, 23); // display only
const log = (line: string) => console.log(`${wall()}  ${line}`);

const cluster = await LocalCluster.start({ nodeCount: 5, persistence: "aof-always" });
log(`started 5 redis-server nodes (AOF always): ${cluster.urls.join(" ")}`);
const redlocks = Array.from(
  { length: workerCount },
  () => new Redlock(cluster.urls, { retry: { retries: 200, delayMs: 40, jitterMs: 30 } }),
);
// A brand-new cluster: mark its nodes so the first acquire need not wait out
// the restart quarantine.
await redlocks[0]!.init();

interface Stats {
  grants: number;
  heldMs: number;
  waitMaxMs: number;
}
const stats: Stats[] = redlocks.map(() => ({ grants: 0, heldMs: 0, waitMaxMs: 0 }));
let holder: number | undefined;
let overlaps = 0;
const endAt = performance.now() + seconds * 1_000;

async function worker(index: number): Promise<void> {
  const name = `worker-${index + 1}`;
  while (performance.now() < endAt) {
    const asked = performance.now();
    try {
      const lock = await redlocks[index]!.acquire([resource], ttlMs, { waitMs: 3_000 });
      const waited = performance.now() - asked;
      if (holder !== undefined) overlaps++;
      holder = index;
      const holdMs = 80 + Math.floor(Math.random() * 120);
      log(
        `${name} holds ${resource}  (fence ${lock.fence}, waited ${waited.toFixed(1)} ms, ` +
          `valid ${lock.remainingMs().toFixed(0)} ms, working ${holdMs} ms)`,
      );
      await new Promise((r) => setTimeout(r, holdMs));
      holder = undefined;
      stats[index]!.grants++;
      stats[index]!.heldMs += holdMs;
      stats[index]!.waitMaxMs = Math.max(stats[index]!.waitMaxMs, waited);
      await lock.release();
    } catch (error) {
      if (error instanceof ResourceLockedError || error instanceof QuorumError) {
        log(`${name} gave up this round: ${error.message}`);
      } else {
        throw error;
      }
    }
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function faults(): Promise<void> {
  const at = (fraction: number) =>
    new Promise((r) =>
      setTimeout(r, Math.max(0, endAt - seconds * 1_000 * (1 - fraction) - performance.now())),
    );
  await at(0.3);
  log("*** kill -9 node 5: 4 of 5 left, the lock carries on");
  await cluster.kill(4);
  await at(0.5);
  log(
    "*** SIGSTOP node 4: 3 of 5 answer, still a majority; each call to node 4 times out in 50 ms",
  );
  cluster.pause(3);
  await at(0.75);
  log("*** SIGCONT node 4 and restart node 5 from its AOF");
  cluster.resume(3);
  await cluster.restart(4);
}

try {
  await Promise.all([...redlocks.map((_, i) => worker(i)), faults()]);
  console.log("\nworker     grants  held ms  longest wait ms");
  for (const [i, s] of stats.entries()) {
    console.log(
      `worker-${i + 1}  ${String(s.grants).padStart(7)}  ${String(s.heldMs).padStart(7)}  ` +
        s.waitMaxMs.toFixed(1).padStart(15),
    );
  }
  console.log(`\noverlapping holders seen: ${overlaps}`);
  if (overlaps > 0) process.exitCode = 1;
} finally {
  await Promise.all(redlocks.map((r) => r.close()));
  await cluster.stop();
}
