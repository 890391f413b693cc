// Which script calls a contended grant costs, by kind: contenders in
// child processes (one Redlock each, acquire → release in a loop on one
// resource, retries every 10 ± 5 ms as in bench/contention.mjs), and a
// MONITOR on one of the 5 nodes that counts each EVALSHA by script and by
// what its arguments say (an acquire's first attempt or a retry of a
// queued waiter, a handoff, a try-lock; a release that keeps the key for
// its instance's turn or reserves it for the next waiter). Per grant, on
// that node: a grant needs at least one acquire and one release there.
//
//   npm run build && node --import tsx bench/grant-calls.ts [--procs 8] [--seconds 3]
import { fork } from "node:child_process";
import { parseArgs } from "node:util";
import { Redis } from "ioredis";
import { LocalCluster } from "../dist/index.js";
import { acquireScript } from "../src/lock/acquire-script.js";
import { leaveQueueScript, releaseScript } from "../src/lock/release-script.js";

const { values } = parseArgs({
  options: {
    procs: { type: "string", default: "8" },
    seconds: { type: "string", default: "3" },
  },
});
const procs = Number(values.procs);
const ms = Number(values.seconds) * 1_000;

/** What one EVALSHA is, from its script and arguments (acquire-script.ts, release-script.ts). */
function kindOf(args: readonly string[]): string {
  const keyCount = Number(args[2]);
  const argv = args.slice(3 + keyCount);
  switch (args[1]) {
    case acquireScript.sha1: {
      const fences = Number(argv[3]);
      const [from, waiter, , registered, mayBeQueued] = argv.slice(4 + fences);
      if (!waiter || registered === "0") return "acquire, try-lock";
      const handoff = from ? ", handoff" : "";
      return mayBeQueued === "1"
        ? `acquire, a queued waiter's retry${handoff}`
        : `acquire, first attempt${handoff}`;
    }
    case releaseScript.sha1:
      if (argv[4] !== undefined) return "release, undo (requeued)";
      return argv[1] === "keep"
        ? "release, the instance's turn kept"
        : "release, reserved for the next";
    case leaveQueueScript.sha1:
      return "leave the queues";
    default:
      return "other scripts (a node's first contact, fencing repairs)";
  }
}

const cluster = await LocalCluster.start({ nodeCount: 5, persistence: "none" });
const inspect = new Redis(cluster.urls[0]!);
const monitor = await inspect.monitor();
const calls = new Map<string, number>();
let publishes = 0;
monitor.on("monitor", (_time: string, args: string[]) => {
  const command = args[0]!.toLowerCase();
  if (command === "publish") publishes++;
  if (command !== "evalsha") return;
  const kind = kindOf(args);
  calls.set(kind, (calls.get(kind) ?? 0) + 1);
});
const worker = new URL("./grant-calls-worker.mjs", import.meta.url);
const grants = await Promise.all(
  Array.from(
    { length: procs },
    () =>
      new Promise<number>((resolve, reject) => {
        const child = fork(worker, [cluster.urls.join(","), String(ms)], {
          stdio: ["ignore", "ignore", "inherit", "ipc"],
        });
        child.on("message", (n) => resolve(Number(n)));
        child.on("exit", (code) => code !== 0 && reject(new Error(`worker exited ${code}`)));
      }),
  ),
);
await new Promise((resolve) => setTimeout(resolve, 200)); // the monitor's last lines
monitor.disconnect();
inspect.disconnect();
await cluster.stop();

const total = grants.reduce((a, b) => a + b, 0);
console.log(
  `${procs} contenders in ${procs} processes, ${values.seconds} s: ${total} grants ` +
    `(per contender ${Math.min(...grants)}–${Math.max(...grants)}); node 0, per grant:\n`,
);
console.log("| script call | per grant |\n|---|---|");
let all = 0;
for (const [kind, count] of [...calls].sort((a, b) => b[1] - a[1])) {
  all += count;
  console.log(`| ${kind} | ${(count / total).toFixed(2)} |`);
}
console.log(`| all script calls | ${(all / total).toFixed(2)} |`);
console.log(`| PUBLISH (heir notices) | ${(publishes / total).toFixed(2)} |`);
