// Where one acquire script call's Redis time goes: redquorum's own acquire
// call (captured from a real acquire, so its arguments are the client's),
// replayed on one local node, then the same script cut short at points
// along its fast path (each cut returns a granted-shaped reply there).
// Each call's key is deleted with a plain DEL before the next; its
// proposal grows, so every full call raises the fencing counter as a grant
// does. Prints the median Redis µs per acquire call (INFO commandstats,
// EVALSHA) of interleaved repetitions, and a cut that returns at once
// from a script of one line: what any EVALSHA with these arguments costs.
//
//   node --import tsx bench/script-parts.ts --seconds 1.5 --reps 5
import { parseArgs } from "node:util";
import { Redis } from "ioredis";
import { LocalCluster, Redlock } from "../src/index.js";
import { acquireScript } from "../src/lock/acquire-script.js";

const { values } = parseArgs({
  options: { seconds: { type: "string", default: "1.5" }, reps: { type: "string", default: "5" } },
});
const cellMs = Number(values.seconds) * 1_000;
const reps = Number(values.reps);

const granted = "do return {1, '0', 1} end\n";
/** The acquire script returning just before `marker` (a line of its fast path). */
const cutBefore = (marker: string) => {
  if (!acquireScript.source.includes(marker)) throw new Error(`not in the script: ${marker}`);
  return acquireScript.source.replace(marker, `${granted}${marker}`);
};
const variants: Record<string, string> = {
  "a one-line script (any EVALSHA with these arguments)": "return {1, '0', 1}",
  "the script's preludes, then return": cutBefore("local fenceCount = tonumber(ARGV[4])"),
  "… and the MGET of the node's state": cutBefore(
    "  -- The membership check (membership/check.ts), before anything is",
  ),
  "… and the membership, reservation and memory checks (TIME)": cutBefore(
    "  if fresh and early[1] == '1' and not early[2]",
  ),
  "… and the SET NX": acquireScript.source.replace(
    "if redis.call('set', key, ARGV[1], 'NX', 'PX', ARGV[2]) then code = 1 end",
    "if redis.call('set', key, ARGV[1], 'NX', 'PX', ARGV[2]) then return {1, '0', 1} end",
  ),
  "the whole call (the fencing vote, its MSET, the reply)": acquireScript.source,
};

const cluster = await LocalCluster.start({ nodeCount: 1, persistence: "none" });
const redlock = new Redlock(cluster.urls);
const node = new Redis(cluster.urls[0]!);
try {
  await redlock.init();
  // The client's own acquire call, as the node got it (MONITOR).
  const monitor = await node.monitor();
  const sent: string[][] = [];
  monitor.on("monitor", (_time: string, args: string[]) => {
    if (args[0]?.toLowerCase() === "evalsha" && args[1] === acquireScript.sha1) sent.push(args);
  });
  await (await redlock.acquire(["parts"], 10_000)).release();
  await new Promise((resolve) => setTimeout(resolve, 100)); // the monitor's last lines
  monitor.disconnect();
  const captured = sent[0];
  if (!captured) throw new Error("no acquire call was captured");
  // EVALSHA, sha1, 1, key, value, ttl, quarantine, counters, proposal, …
  const proposalAt = 8;
  if (captured[7] !== "1") throw new Error("expected a fenced call with one counter");
  const shas = new Map<string, string>();
  for (const [name, source] of Object.entries(variants)) {
    shas.set(name, (await node.script("LOAD", source)) as string);
  }
  const evalsha = async () => {
    const stats = await node.info("commandstats");
    const match = stats.match(/cmdstat_evalsha:calls=(\d+),usec=(\d+)/);
    return match ? { calls: Number(match[1]), us: Number(match[2]) } : { calls: 0, us: 0 };
  };
  let proposal = 10n ** 9n;
  const perCall: Record<string, number[]> = {};
  for (let rep = 0; rep < reps; rep++) {
    const names = [...shas.keys()];
    for (const name of rep % 2 ? names.reverse() : names) {
      // A real acquire first: the node's memory check stays fresh (its cache
      // lasts 100 ms), as it is for a client that acquires now and then.
      await (await redlock.acquire(["parts"], 10_000)).release();
      const args = [...captured];
      args[1] = shas.get(name)!;
      const before = await evalsha();
      const endMs = performance.now() + cellMs;
      while (performance.now() < endMs) {
        args[proposalAt] = String(proposal++);
        const reply = (await node.call(...(args as [string, ...string[]]))) as unknown[];
        if (!Array.isArray(reply) || reply[0] !== 1) {
          throw new Error(`${name}: not granted: ${JSON.stringify(reply)}`);
        }
        await node.del(captured[3]!);
      }
      const after = await evalsha();
      perCall[name] ??= [];
      perCall[name].push((after.us - before.us) / (after.calls - before.calls));
    }
  }
  console.log(`\n| acquire call, cut after | Redis µs per call (median, min–max) |\n|---|---|`);
  for (const [name, samples] of Object.entries(perCall)) {
    const sorted = [...samples].sort((a, b) => a - b);
    const mid = sorted[(sorted.length - 1) >> 1]!;
    console.log(
      `| ${name} | ${mid.toFixed(2)} (${sorted[0]!.toFixed(2)}–${sorted.at(-1)!.toFixed(2)}) |`,
    );
  }
  console.log(
    `\n${reps} interleaved runs of ${values.seconds} s per row, one call at a time, 1 local node`,
  );
} finally {
  node.disconnect();
  await redlock.close();
  await cluster.stop();
}
