/**
 * A paused client fenced off. Client A takes the lock with a 300 ms TTL and
 * then stalls (here a child process stopped with SIGSTOP, as a long GC pause
 * or a frozen VM would); its lock expires, B takes it and writes; A wakes up
 * still believing it holds the lock and writes too. The store checks the
 * fencing token, so A's late write is refused.
 *
 * Run it from the repository root, after `npm run build` (it imports
 * "redquorum", which resolves to the built dist/ through the package's
 * `exports`), with redis-server installed: `npx tsx examples/fencing.ts`.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { Redis } from "ioredis";
import { fencedSet, LocalCluster, Redlock } from "redquorum";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const cluster = await LocalCluster.start({ nodeCount: 5, persistence: "none" });
const setup = new Redlock(cluster.urls);
await setup.init();
await setup.close();
const store = new Redis(cluster.urls[0]!); // the protected resource: any store that checks tokens

const clientA = `
  import { Redis } from "ioredis";
  import { Redlock, fencedSet } from "redquorum";
  const urls = ${JSON.stringify(cluster.urls)};
  const redlock = new Redlock(urls);
  const store = new Redis(urls[0]);
  const lock = await redlock.acquire(["account:7"], 300);
  console.log("A: got the lock with fencing token " + lock.fence + "; now stalling...");
  process.stdin.once("data", async () => {
    console.log("A: woke up; lock.remainingMs() = " + lock.remainingMs() + ", writing anyway");
    const result = await fencedSet(store, "account:7:balance", "100 (A)", lock.fence);
    console.log(result.written ? "A: write accepted" : "A: write REFUSED: token " + lock.fence + " < " + result.seenToken);
    store.disconnect();
    await redlock.close();
    process.stdin.destroy();
  });
`;

try {
  const a = spawn(process.execPath, ["--input-type=module", "-e", clientA], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  let output = "";
  a.stdout.on("data", (chunk: Buffer) => {
    process.stdout.write(chunk);
    output += chunk.toString();
  });
  while (!output.includes("stalling")) await sleep(10); // A has the lock
  a.kill("SIGSTOP");
  console.log("(A is stopped with SIGSTOP for 1 s: its 300 ms lock expires)");
  await sleep(1_000);

  const b = new Redlock(cluster.urls);
  const lock = await b.acquire(["account:7"], 5_000);
  console.log(`B: got the lock with fencing token ${lock.fence}`);
  const written = await fencedSet(store, "account:7:balance", "250 (B)", lock.fence!);
  console.log(`B: write ${written.written ? "accepted" : "refused"}`);

  a.kill("SIGCONT");
  a.stdin.write("wake\n");
  await once(a, "exit");
  await lock.release();
  await b.close();
  console.log(`balance is now: ${await store.get("account:7:balance")}`);
} finally {
  store.disconnect();
  await cluster.stop();
}
