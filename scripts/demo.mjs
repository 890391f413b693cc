// `npm start`: the main job, through the command line a user has.
//
//   0. redis-server installed (scripts/ensure-redis.sh), dist/ built (quietly)
//   1. `redquorum dev`: 5 local redis-server nodes (AOF, fsync always), initialised
//   2. 4 workers contend for one lock with `redquorum lock … -- <command>`;
//      halfway, one node is shut down and the lock carries on with 4 of 5
//   3. IDs: `redquorum id next`, and `redquorum serve` answering POST /v1/ids
//   4. `redquorum status`: the stopped node, and the verdict
//   5. the cluster and the ID server stay up until Ctrl-C, with what to try next
//
// `npm start` runs this file alone (`exec node scripts/demo.mjs`), so a
// signal sent to npm reaches this process, which stops every child it
// started (the build, the cluster, the lock workers, the ID server) before
// it exits; so does one sent to this process, or Ctrl-C to the whole
// process group. Every step is a child process of the built CLI
// (dist/cli.js), as it would be from a shell.
import { spawn } from "node:child_process";
import { request } from "node:http";
import { Socket } from "node:net";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { buildIsStale } from "./build-if-stale.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const cli = join(root, "dist", "cli.js");
const workers = 4;
const rounds = 3;
/**
 * Each lock round's bound on one node's answer. The library's default (50
 * ms) is meant for Redis on a network of its own; on a laptop or a shared
 * machine running the 5 nodes, 4 workers and the demo on two cores, a
 * process descheduled for longer fails a round ("could not release the
 * lock … reached 0 of 5 nodes"). 500 ms holds there and is still well
 * inside the 5 s TTL.
 */
const nodeTimeout = "500ms";

const wall = () => new Date().toISOString().slice(11, 23); // display only
const say = (line) => process.stdout.write(`${wall()}  ${line}\n`);
const heading = (line) => process.stdout.write(`\n== ${line}\n`);

/** Thrown where a step would start after a signal: the demo is stopping. */
class Stopping extends Error {}

/** `redquorum <args>` as a child; its output lines go to `onLine` (or are collected). */
function redquorum(args, options = {}) {
  return run(process.execPath, [cli, ...args], options);
}

/**
 * `command <args>` as a child, known to stop() until it exits; its output
 * lines go to `onLine` (or are collected). None starts once stopping.
 */
function run(command, args, { env = {}, onLine, stdin = "ignore" } = {}) {
  if (stopping) throw new Stopping();
  const child = spawn(command, args, {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: [stdin, "pipe", "pipe"],
  });
  children.add(child);
  const lines = [];
  for (const stream of [child.stdout, child.stderr]) {
    createInterface({ input: stream }).on("line", (line) => {
      lines.push(line);
      onLine?.(line, stream === child.stderr);
    });
  }
  child.done = new Promise((resolve) => {
    child.once("error", () => resolve(127));
    child.once("close", (code) => resolve(code));
  });
  child.done.then(() => children.delete(child));
  child.lines = lines;
  return child;
}

/** A step that must succeed (redis-server present, the build): its output only if it fails. */
async function mustRun(what, command, args) {
  const child = run(command, args);
  const code = await child.done;
  if (stopping) throw new Stopping();
  if (code !== 0) {
    for (const line of child.lines) process.stderr.write(`${line}\n`);
    throw new Error(`${what} failed (exit ${code})`);
  }
}

/** The first line of `child`'s stdout that `match` accepts, or an error if it exits first. */
function firstLine(child, match, what) {
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).on("line", (line) => {
      if (match(line)) resolve(line);
    });
    child.once("close", (code) =>
      reject(new Error(`${what} exited with ${code} before it was ready`)),
    );
  });
}

/** One RESP command on a fresh socket: the demo's node fault, without a Redis client. */
function shutdownNode(url) {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = new Socket();
    socket.once("error", () => resolve());
    socket.once("close", () => resolve());
    socket.connect(Number(port), hostname, () =>
      socket.end("*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n"),
    );
  });
}

/** Every child still running; stop() ends them all. */
const children = new Set();
let stopping = false;

function post(url, body) {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/v1/ids`, { method: "POST" }, (res) => {
      let text = "";
      res.on("data", (chunk) => {
        text += chunk;
      });
      res.on("end", () => resolve(text));
    });
    req.once("error", reject);
    req.end(body);
  });
}

/** Stops every child; a second signal (npm passes on the Ctrl-C the demo got too) waits for the same stop. */
let stopped;
function stop(signal) {
  stopped ??= stopAll(signal);
  return stopped;
}

async function stopAll(signal) {
  stopping = true;
  process.stdout.write("\n");
  say(`${signal}: stopping the ID server, then the cluster`);
  // The ID server drains first, while the nodes it reads are still up.
  const server = [...children].find((c) => c.role === "serve");
  if (server) {
    server.kill("SIGTERM");
    await server.done;
  }
  // Then what runs on the cluster (a lock worker releases its lock), then the cluster.
  const onCluster = [...children].filter((c) => c.role !== "dev");
  for (const child of onCluster) child.kill("SIGTERM");
  await Promise.all(onCluster.map((c) => c.done));
  const rest = [...children];
  for (const child of rest) child.kill("SIGTERM");
  await Promise.all(rest.map((c) => c.done));
  say("stopped; the cluster's data directory is removed");
}

for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => {
    stop(signal).then(() => process.exit(0));
  });
}

async function main() {
  heading("preparing: redis-server, then the build (dist/)");
  const buildStart = performance.now();
  await mustRun("scripts/ensure-redis.sh", "sh", [join(root, "scripts", "ensure-redis.sh")]);
  // Only when a source changed since: a second start does not wait for it,
  // and the tests that run this while others use dist/ never empty it.
  if (buildIsStale()) {
    await mustRun("the build (tsup)", join(root, "node_modules", ".bin", "tsup"), ["--silent"]);
    say(`built dist/ in ${((performance.now() - buildStart) / 1000).toFixed(1)} s`);
  } else {
    say("dist/ is up to date with the sources: no build");
  }

  heading("redquorum dev: a local cluster");
  const dev = redquorum(["dev", "--nodes", "5", "--json"], {
    onLine: (line, isErr) => {
      if (isErr) say(`dev | ${line.replace(/^redquorum: /, "")}`);
    },
  });
  dev.role = "dev";
  const { nodes } = JSON.parse(await firstLine(dev, (l) => l.startsWith("{"), "redquorum dev"));
  const env = { REDQUORUM_NODES: nodes.join(",") };

  heading(`redquorum lock: ${workers} workers, ${rounds} turns each, one lock (demo:printer)`);
  // Each turn: the command prints its fencing token, works ~150 ms, prints again.
  const work =
    "const w=process.env.WORKER,f=process.env.REDQUORUM_FENCE;" +
    "console.log(w+' holds demo:printer, fence '+f);" +
    "setTimeout(()=>console.log(w+' done,            fence '+f),150)";
  let turnsDone = 0;
  let faultDone = false;
  // What the output shows, checked rather than asserted: the lines arrive
  // in the order the workers print them, a "holds" after its predecessor's
  // "done" (released after it), each fence above the last.
  let holder;
  let lastFence = 0n;
  let overlaps = 0;
  let fenceDrops = 0;
  const watch = (line) => {
    const match = /^(worker-\d+) (holds|done).*fence (\d+)$/.exec(line);
    if (!match) return;
    const [, name, what, fence] = match;
    if (what === "holds") {
      if (holder !== undefined) overlaps++;
      if (BigInt(fence) <= lastFence) fenceDrops++;
      holder = name;
      lastFence = BigInt(fence);
    } else if (holder === name) {
      holder = undefined;
    }
  };
  const worker = async (index) => {
    const name = `worker-${index + 1}`;
    for (let turn = 0; turn < rounds; turn++) {
      const child = redquorum(
        [
          "lock",
          "demo:printer",
          "--ttl",
          "5s",
          "--wait",
          "30s",
          "--node-timeout",
          nodeTimeout,
          "--",
          process.execPath,
          "-e",
          work,
        ],
        {
          env: { ...env, WORKER: name },
          onLine: (line) => {
            watch(line);
            say(line);
          },
        },
      );
      const code = await child.done;
      if (stopping) return;
      if (code !== 0) say(`${name}: redquorum lock exited with ${code}`);
      turnsDone++;
      if (!faultDone && turnsDone >= (workers * rounds) / 2) {
        faultDone = true;
        say(`*** SHUTDOWN NOSAVE on node 4 (${nodes[4]}): 4 of 5 left, the lock carries on`);
        await shutdownNode(nodes[4]);
      }
    }
  };
  await Promise.all(Array.from({ length: workers }, (_, i) => worker(i)));
  if (stopping) throw new Stopping();
  say(
    `${workers * rounds} turns: ${overlaps} overlapping holds seen, ` +
      `${fenceDrops === 0 ? "each fence above the one before" : `${fenceDrops} fences not above the one before`}`,
  );
  say(
    "(fences go up, but not one by one: an attempt that lost the race for the lock may still " +
      "have been granted by a few nodes, which raised their counters, so the next fence skips past)",
  );

  heading("redquorum id next --count 5, then the ID server");
  const next = redquorum(["id", "next", "--count", "5"], { env });
  await next.done;
  if (stopping) throw new Stopping();
  say(`ids: ${next.lines.join(" ")}`);
  const serve = redquorum(["serve", "--port", "0"], { env });
  serve.role = "serve";
  const listening = await new Promise((resolve, reject) => {
    createInterface({ input: serve.stderr }).on("line", (line) => {
      if (!line.startsWith("{")) return say(`serve | ${line}`);
      const entry = JSON.parse(line);
      if (entry.msg === "listening") resolve(entry.url);
    });
    serve.once("close", (code) => reject(new Error(`redquorum serve exited with ${code}`)));
  });
  say(`redquorum serve listening on ${listening}`);
  say(`POST /v1/ids {"count": 3} → ${await post(listening, '{"count": 3}')}`);

  heading("redquorum status");
  const status = redquorum(["status"], { env });
  await status.done;
  if (stopping) throw new Stopping();
  for (const line of status.lines) process.stdout.write(`  ${line}\n`);

  heading("the cluster and the ID server stay up; try, in another terminal:");
  process.stdout.write(
    [
      `  export REDQUORUM_NODES=${nodes.join(",")}`,
      "  npx redquorum status",
      "  npx redquorum lock jobs:nightly --ttl 30s -- sh -c 'echo fence $REDQUORUM_FENCE; sleep 5'",
      "  npx redquorum id next --count 3",
      `  curl -s -X POST ${listening}/v1/ids -d '{"count": 5}'`,
      `  curl -s ${listening}/healthz; curl -s ${listening}/metrics | grep redquorum_`,
      "",
      "Press Ctrl-C to stop (the nodes and their data directory go with it).",
      "",
    ].join("\n"),
  );
}

main().catch(async (error) => {
  // A step refused because a signal came: that signal's handler exits.
  if (error instanceof Stopping || stopping) return;
  process.stderr.write(`demo: ${error instanceof Error ? error.message : String(error)}\n`);
  await stop("error");
  process.exit(1);
});
