// What redquorum's own JavaScript costs per uncontended acquire → release
// cycle, without Redis, the sockets or ioredis: first contact, init and a
// warm-up go to 5 real local nodes, then the transports answer the acquire
// and release scripts in-process with the replies a free key gets (granted,
// the proposal accepted; released, no heir). Prints cycles and the
// process's CPU per cycle (process.cpuUsage). Beside bench/cycle-cost.mjs
// (a real cycle's CPU in the client), it says how much of that is ours.
//
//   node --import tsx bench/client-only.ts [--fencing off] [--seconds 3]
import { parseArgs } from "node:util";
import { Redis } from "ioredis";
import { LocalCluster, type NodeTransport, Redlock } from "../src/index.js";
import { acquireScript } from "../src/lock/acquire-script.js";
import { releaseScript } from "../src/lock/release-script.js";

const { values } = parseArgs({
  options: {
    fencing: { type: "string", default: "on" },
    seconds: { type: "string", default: "3" },
  },
});
const fencing = values.fencing !== "off";
const cluster = await LocalCluster.start({ nodeCount: 5, persistence: "none" });
let inProcess = false;
const clients = cluster.urls.map((url) => new Redis(url));
const transports: NodeTransport[] = clients.map((client, i) => ({
  endpoint: `${cluster.urls[i]!.replace("redis://", "")}`,
  send(args: readonly string[]) {
    if (inProcess && args[0] === "EVALSHA") {
      // EVALSHA sha numkeys key value ttl quarantine fenceCount [proposal] …
      if (args[1] === acquireScript.sha1) {
        if (args[7] !== "1") return Promise.resolve(1);
        return Promise.resolve([1, String(BigInt(args[8]!) - 1n), 1]);
      }
      if (args[1] === releaseScript.sha1) return Promise.resolve([1, ""]);
    }
    const [command, ...rest] = args;
    return client.call(command!, ...rest);
  },
  close: async () => {
    client.disconnect();
  },
}));
const redlock = new Redlock(transports, { fencing });
try {
  await redlock.init();
  const cycle = async () => (await redlock.acquire(["client-only"], 10_000)).release();
  for (let i = 0; i < 200; i++) await cycle();
  inProcess = true;
  for (let i = 0; i < 20_000; i++) await cycle(); // warm up, in-process
  const cpu = process.cpuUsage();
  const end = performance.now() + Number(values.seconds) * 1_000;
  let cycles = 0;
  while (performance.now() < end) {
    await cycle();
    cycles++;
  }
  const used = process.cpuUsage(cpu);
  console.log(
    `fencing ${values.fencing}: ${cycles} cycles, client user / system µs per cycle ` +
      `${(used.user / cycles).toFixed(1)} / ${(used.system / cycles).toFixed(1)}`,
  );
} finally {
  inProcess = false;
  await redlock.close();
  await cluster.stop();
}
