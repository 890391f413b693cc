/**
 * `redquorum dev`: a local cluster of real redis-server nodes, initialised for
 * locks and IDs, in the foreground. Prints REDQUORUM_NODES=… (its one data
 * line) and stops every node, removing its data, on SIGINT/SIGTERM/SIGHUP.
 */
import { once } from "node:events";
import { existsSync, rmdirSync } from "node:fs";
import { rmdir } from "node:fs/promises";
import { resolve } from "node:path";
import { Command, Option } from "commander";
import { LocalCluster, type LocalClusterOptions } from "../cluster/local-cluster.js";
import { portHolder, portProblem } from "../cluster/local-sockets.js";
import { NextId } from "../id/next-id.js";
import { limits } from "../limits.js";
import { Redlock } from "../lock/redlock.js";
import type { NodeWarning } from "../quorum/node-group.js";
import { diagnose, jsonOption, nodesEnv, printData } from "./common.js";
import { UsageError } from "./errors.js";
import { signalExitCode } from "./exit-codes.js";

const persistenceModes = { always: "aof-always", everysec: "aof-everysec", none: "none" } as const;
type PersistenceFlag = keyof typeof persistenceModes;

/** As LocalCluster's, but baseDir defaults to ".redquorum"; `log` gets the progress lines. */
type ClusterOptions = Pick<LocalClusterOptions, "nodeCount" | "persistence" | "baseDir" | "ports">;
export type DevClusterOptions = ClusterOptions & { log?: (line: string) => void };

export interface DevCluster {
  readonly cluster: LocalCluster;
  readonly urls: string[];
  /** Kills every node and removes its data. Safe to call twice. */
  stop(): Promise<void>;
}

/** Starts the nodes and initialises them for locks (marker) and, if durable, IDs (counter). */
export async function startDevCluster(options: DevClusterOptions = {}): Promise<DevCluster> {
  const log = options.log ?? (() => {});
  const baseDir = resolve(options.baseDir ?? ".redquorum");
  const madeBaseDir = !existsSync(baseDir);
  const startedAt = performance.now();
  log(
    `starting ${options.nodeCount ?? options.ports?.length ?? 5} redis-server nodes under ${baseDir}`,
  );
  // No empty directory left in the project if it was ours (rmdir keeps a non-empty one).
  const removeBaseDir = async () => {
    if (madeBaseDir) await rmdir(baseDir).catch(() => {});
  };
  let cluster: LocalCluster;
  try {
    // init: false, so that Redlock.init() below marks the nodes as `redquorum init` would.
    cluster = await LocalCluster.start({
      nodeCount: options.nodeCount ?? options.ports?.length ?? 5,
      persistence: options.persistence ?? "aof-always",
      baseDir,
      init: false,
      ...(options.ports ? { ports: options.ports } : {}),
    });
  } catch (error) {
    await removeBaseDir(); // the cluster removed its own directory
    throw error;
  }
  const stop = async () => {
    await cluster.stop();
    await removeBaseDir();
  };
  try {
    const onWarning = (w: NodeWarning) => log(`warning: ${w.endpoint}: ${w.message}`);
    // Nodes just started on this machine, which may be busy (the init's
    // writes wait for an fsync each): the longest node timeout allowed, so
    // that a loaded machine does not fail the start ("init reached 0 of 5").
    const nodeTimeoutMs = limits.nodeTimeoutMsMax;
    const redlock = new Redlock(cluster.urls, { onWarning, nodeTimeoutMs });
    const reports = await redlock.init().finally(() => redlock.close());
    // NextId would refuse these nodes (DurabilityError): leave its counter alone.
    const durable = cluster.persistence === "aof-always";
    if (durable) {
      const ids = new NextId(cluster.urls, { onWarning, nodeTimeoutMs });
      await ids.init().finally(() => ids.close());
    }
    const ms = Math.round(performance.now() - startedAt);
    log(`started and initialised in ${ms} ms; data in ${cluster.baseDir}`);
    for (const node of cluster.nodes) {
      const report = reports[node.index]!;
      const locks = report.action === "marked" ? "marked" : `${report.action} (${report.detail})`;
      const ids = durable ? "counter initialised" : "not initialised";
      log(`  node ${node.index}  ${node.url}  pid ${node.pid}  locks: ${locks}  IDs: ${ids}`);
    }
    if (!durable) log(`IDs: persistence ${cluster.persistence}: NextId needs appendfsync always`);
  } catch (error) {
    await stop();
    throw error;
  }
  return { cluster, urls: cluster.urls, stop };
}

function parseNodeCount(text: string): number {
  const count = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!(count >= 1 && count <= limits.nodeCountMax)) {
    throw new UsageError(
      "--nodes",
      `${JSON.stringify(text)}: expected a node count from 1 to ${limits.nodeCountMax} ` +
        "(odd recommended; dev starts the nodes, so it takes a count, not URLs)",
    );
  }
  return count;
}

/**
 * `--ports 7001,7002,7003`: fixed loopback ports, one per node, so that the
 * nodes' URLs stay the same from one `dev` to the next (an application's
 * configuration can name them). Their number is the node count.
 */
function parsePorts(text: string): number[] {
  const parts = text.split(",");
  const ports = parts.map((part) => (/^\d+$/.test(part) ? Number(part) : Number.NaN));
  const bad = parts.find((_, i) => !(ports[i]! >= 1 && ports[i]! <= 65_535));
  if (bad !== undefined) {
    throw new UsageError(
      "--ports",
      `${JSON.stringify(bad)} in ${JSON.stringify(text)}: expected comma-separated port numbers ` +
        "from 1 to 65535",
    );
  }
  if (new Set(ports).size !== ports.length) {
    throw new UsageError("--ports", `${JSON.stringify(text)}: expected distinct ports`);
  }
  if (ports.length > limits.nodeCountMax) {
    throw new UsageError(
      "--ports",
      `${JSON.stringify(text)}: ${ports.length} ports; expected 1 to ${limits.nodeCountMax} (one per node)`,
    );
  }
  return ports;
}

function parsePersistence(text: string): PersistenceFlag {
  if (Object.hasOwn(persistenceModes, text)) return text as PersistenceFlag;
  const allowed = Object.keys(persistenceModes).join(", ");
  throw new UsageError("--persistence", `${JSON.stringify(text)}: expected one of ${allowed}`);
}

/**
 * Reports a node whose redis-server exited (LocalCluster marks it stopped) and
 * runs on: killing nodes is a way to experiment. The timer also keeps the
 * process alive should every node die.
 */
function watchNodes(cluster: LocalCluster, stopping: () => boolean): NodeJS.Timeout {
  const reported = new Set<number>();
  return setInterval(() => {
    if (stopping()) return;
    const nodes = cluster.nodes;
    const up = nodes.filter((node) => node.state !== "stopped").length;
    for (const node of nodes) {
      if (node.state !== "stopped" || reported.has(node.index)) continue;
      reported.add(node.index);
      const majority = Math.floor(nodes.length / 2) + 1;
      diagnose(`node ${node.index} (${node.url}) exited; ${up} left, a majority is ${majority}`);
    }
  }, 500);
}

/** Removes an empty directory; a non-empty or missing one stays as it is. */
function rmdirSyncQuietly(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {
    // not empty (someone else's files), or gone already
  }
}

type DevOptions = {
  nodes: number;
  ports?: number[];
  persistence: PersistenceFlag;
  dir: string;
  json?: boolean;
};

const stopSignals = ["SIGINT", "SIGTERM", "SIGHUP"] as const;

export function devCommand(): Command {
  return new Command("dev")
    .description(
      "start a local cluster of redis-server nodes, initialised for locks and IDs, in the " +
        "foreground until Ctrl-C",
    )
    .addOption(
      new Option("--nodes <count>", `how many nodes, 1 to ${limits.nodeCountMax} (odd recommended)`)
        .default(5)
        .argParser(parseNodeCount),
    )
    .addOption(
      new Option(
        "--ports <list>",
        "fixed loopback ports, comma-separated, one per node (their number is the node count): " +
          "the same URLs on every run",
      ).argParser(parsePorts),
    )
    .addOption(
      new Option(
        "--persistence <mode>",
        "AOF fsync: always, everysec or none (IDs refuse the last two)",
      )
        .default("always")
        .argParser(parsePersistence),
    )
    .addOption(
      new Option("--dir <path>", "where the data goes (removed on stop)").default(".redquorum"),
    )
    .addOption(jsonOption())
    .addHelpText(
      "after",
      `\nstdout gets one line, ${nodesEnv}=redis://127.0.0.1:<port>,… (--json: one JSON object);\n` +
        `the rest goes to stderr. --nodes is a count here, and $${nodesEnv} is not read.\n` +
        "SIGINT (Ctrl-C), SIGTERM or SIGHUP stops every node, removes the data and exits 0;\n" +
        "a second one while still starting exits at once (128 + signal), the nodes killed.\n",
    )
    .action(async (options: DevOptions, command: Command) => {
      const countGiven = command.getOptionValueSource("nodes") !== "default";
      if (options.ports && countGiven && options.nodes !== options.ports.length) {
        throw new UsageError(
          "--nodes",
          `${options.nodes} nodes, but --ports names ${options.ports.length}: give one port per ` +
            "node, or leave --nodes out",
        );
      }
      // A taken port is the caller's to change, as `serve --port` (exit 2),
      // said before any node starts.
      for (const port of options.ports ?? []) {
        const holder = await portHolder(port);
        if (holder !== undefined) {
          throw new UsageError("--ports", `${portProblem(port, holder)}: choose another`);
        }
      }
      const dir = resolve(options.dir);
      const madeDir = !existsSync(dir);
      let dev: DevCluster | undefined;
      const stopping = new AbortController(); // aborted with the first signal
      const onSignal = (signal: NodeJS.Signals) => {
        if (!stopping.signal.aborted) {
          stopping.abort(signal);
          if (dev === undefined) {
            diagnose(`${signal}: stopping once the nodes have started (${signal} again: now)`);
          }
        } else if (dev === undefined) {
          // Impatient while starting: process.exit runs LocalCluster's exit
          // handler, which SIGKILLs the nodes started so far and removes the
          // data; then (registered after it) the directory dev made for it.
          diagnose(`${signal} again while starting: exiting now`);
          if (madeDir) process.once("exit", () => rmdirSyncQuietly(dir));
          process.exit(signalExitCode(signal));
        } else {
          // stop() SIGKILLed every node at once; only waiting for them is left.
          diagnose(`${signal}: already stopping`);
        }
      };
      // Listening before the cluster starts also keeps LocalCluster from installing
      // its own handlers (it only does where nobody listens): one owner of the signals.
      for (const signal of stopSignals) process.on(signal, onSignal);
      let watch: NodeJS.Timeout | undefined;
      try {
        dev = await startDevCluster({
          nodeCount: options.ports ? options.ports.length : options.nodes,
          ...(options.ports ? { ports: options.ports } : {}),
          persistence: persistenceModes[options.persistence],
          baseDir: options.dir,
          log: diagnose,
        });
        const { urls, cluster } = dev;
        const line = `${nodesEnv}=${urls.join(",")}`;
        if (!stopping.signal.aborted) {
          const json = { nodes: urls, dir: cluster.baseDir, persistence: options.persistence };
          printData(options.json ? JSON.stringify(json) : line);
          diagnose(`in another shell: export ${line}`);
          diagnose("  then: redquorum status");
          diagnose("press Ctrl-C to stop the nodes and remove their data");
        }
        watch = watchNodes(cluster, () => stopping.signal.aborted);
        if (!stopping.signal.aborted) await once(stopping.signal, "abort");
        diagnose(
          `${stopping.signal.reason}: stopping ${urls.length} nodes, removing ${cluster.baseDir}`,
        );
      } finally {
        clearInterval(watch);
        await dev?.stop();
        for (const signal of stopSignals) process.off(signal, onSignal);
      }
      diagnose("stopped");
    });
}
