import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InvalidArgumentError, RedquorumError } from "../errors.js";

export type { Persistence } from "./persistence.js";

import { limits } from "../limits.js";
import { markerKey, markNodeLua, runKey } from "../node/node-state.js";
import {
  describe,
  rejectUnknownOptions,
  requireBoolean,
  requireInteger,
  requireOptionsObject,
} from "../validate.js";
import { portHolder, portProblem, probe, send } from "./local-sockets.js";
import {
  type Persistence,
  persistenceArgs,
  requireArgs,
  requirePersistence,
} from "./persistence.js";
import { claimPort, release } from "./port-claims.js";
import { processState, sleepSync } from "./process-state.js";
import { findRedisServer, requireRedisServer } from "./redis-server.js";

export interface LocalClusterOptions {
  /** Number of redis-server processes. Default 5. */
  nodeCount?: number;
  /** Default "aof-always". */
  persistence?: Persistence;
  /** Path of redis-server. Default: $REDQUORUM_REDIS_SERVER, else found on PATH. */
  redisServerPath?: string;
  /** Where the cluster's data directories go. Default: the OS temp directory. */
  baseDir?: string;
  /** How long each node may take to answer PING after it starts, in milliseconds. Default 10000. */
  startTimeoutMs?: number;
  /** Extra redis-server arguments for every node, e.g. ["--maxmemory", "10mb"]. */
  extraArgs?: readonly string[];
  /**
   * Hand out the nodes initialised for locks, as `Redlock.init()` would on
   * a new cluster (they are brand new by construction): the first acquire
   * needs no `init()`. Nodes restarted later without their data are not
   * (they lost their memory). Default true.
   */
  init?: boolean;
  /**
   * Fixed loopback ports, one per node (their number sets `nodeCount`), to
   * keep the nodes' URLs the same from one run to the next. A port that is
   * taken fails the start, naming it. Default: free ports below the
   * system's ephemeral range, which the cluster keeps while a node is down
   * (no other local cluster takes them, and the system never hands them out).
   */
  ports?: readonly number[];
}

export type LocalNodeState = "running" | "paused" | "stopped";

export interface LocalNode {
  readonly index: number;
  readonly port: number;
  readonly url: string;
  readonly dataDir: string;
  readonly state: LocalNodeState;
  readonly pid: number | undefined;
  /** How the node keeps its data now (the cluster's, unless a restart changed it). */
  readonly persistence: Persistence;
}

const live = new Set<LocalCluster>();

/**
 * N independent redis-server processes on free loopback ports (never 6379),
 * each with its own data directory, for tests, benchmarks and local
 * development. Every node can be killed (SIGKILL), paused (SIGSTOP),
 * resumed, and restarted with or without its data. Processes and
 * directories are removed by `stop()`, and also when the process exits or
 * is interrupted.
 */
export class LocalCluster implements AsyncDisposable {
  readonly baseDir: string;
  readonly persistence: Persistence;
  private readonly serverPath: string;
  private readonly startTimeoutMs: number;
  private readonly extraArgs: readonly string[];
  private readonly slots: NodeSlot[] = [];
  private stopped = false;

  private constructor(
    options: Required<Omit<LocalClusterOptions, "nodeCount" | "init" | "ports">>,
  ) {
    this.persistence = options.persistence;
    this.serverPath = options.redisServerPath;
    this.startTimeoutMs = options.startTimeoutMs;
    this.extraArgs = options.extraArgs;
    mkdirSync(options.baseDir, { recursive: true });
    this.baseDir = mkdtempSync(join(options.baseDir, "redquorum-cluster-"));
  }

  static async start(options: LocalClusterOptions = {}): Promise<LocalCluster> {
    const input = requireOptionsObject("cluster options", options) as LocalClusterOptions;
    // A misspelt option would start a cluster other than the one asked for.
    rejectUnknownOptions("cluster options", input, [
      "nodeCount",
      "persistence",
      "redisServerPath",
      "baseDir",
      "startTimeoutMs",
      "extraArgs",
      "init",
      "ports",
    ]);
    const init = requireBoolean("init", input.init ?? true);
    const ports = input.ports === undefined ? undefined : requirePorts(input.ports);
    const nodeCount = requireInteger(
      "nodeCount",
      input.nodeCount ?? ports?.length ?? 5,
      1,
      limits.nodeCountMax,
    );
    if (ports && ports.length !== nodeCount) {
      throw new InvalidArgumentError(
        "ports",
        `expected one port per node (${nodeCount}), got ${ports.length}`,
      );
    }
    const persistence = requirePersistence(input.persistence ?? "aof-always");
    const cluster = new LocalCluster({
      persistence,
      redisServerPath: requireRedisServer(input.redisServerPath ?? findRedisServer()),
      baseDir: requireDirectory("baseDir", input.baseDir ?? tmpdir()),
      startTimeoutMs: requireInteger("startTimeoutMs", input.startTimeoutMs ?? 10_000, 1, 600_000),
      extraArgs: requireArgs(input.extraArgs ?? []),
    });
    live.add(cluster);
    installExitCleanup();
    try {
      for (let index = 0; index < nodeCount; index++) {
        const dataDir = join(cluster.baseDir, `node-${index}`);
        mkdirSync(dataDir);
        cluster.slots.push({
          index,
          port: ports?.[index] ?? 0,
          dataDir,
          child: undefined,
          state: "stopped",
          log: [],
          persistence: cluster.persistence,
          extraArgs: cluster.extraArgs,
          claimed: false,
        });
      }
      await Promise.all(
        cluster.slots.map((slot) =>
          ports ? cluster.startOnGivenPort(slot) : cluster.startOnFreePort(slot),
        ),
      );
      if (init) {
        await Promise.all(
          cluster.slots.map((slot) =>
            send(slot.port, ["EVAL", markNodeLua("KEYS[1]", "KEYS[2]"), "2", markerKey, runKey]),
          ),
        );
      }
      return cluster;
    } catch (error) {
      await cluster.stop();
      throw error;
    }
  }

  get nodes(): readonly LocalNode[] {
    return this.slots.map((slot) => ({
      index: slot.index,
      port: slot.port,
      url: `redis://127.0.0.1:${slot.port}`,
      dataDir: slot.dataDir,
      state: slot.state,
      pid: slot.child?.pid,
      persistence: slot.persistence,
    }));
  }

  get urls(): string[] {
    return this.slots.map((slot) => `redis://127.0.0.1:${slot.port}`);
  }

  node(index: number): LocalNode {
    const node = this.nodes[this.slot(index).index];
    return node!;
  }

  /** SIGKILL: the process dies at once, as in a crash; resolves when it has exited. */
  async kill(index: number): Promise<void> {
    await killSlot(this.slot(index));
  }

  /**
   * SIGSTOP: the process stops answering but keeps its sockets open, like a
   * stalled machine. Returns once the process is stopped (a signal is
   * delivered asynchronously; on Linux this polls its state in /proc, for
   * at most `startTimeoutMs`), so whatever the caller sends next meets a
   * stopped node. Synchronous, as callers rely on.
   */
  pause(index: number): void {
    const slot = this.slot(index);
    if (slot.state !== "running")
      throw new RedquorumError("ERR_CLUSTER", `node ${index} is ${slot.state}`);
    slot.child?.kill("SIGSTOP");
    slot.state = "paused";
    this.waitForProcessState(slot, "stopped");
  }

  /** SIGCONT; returns once the process runs again (see `pause`). */
  resume(index: number): void {
    const slot = this.slot(index);
    if (slot.state !== "paused")
      throw new RedquorumError("ERR_CLUSTER", `node ${index} is ${slot.state}`);
    slot.child?.kill("SIGCONT");
    slot.state = "running";
    this.waitForProcessState(slot, "running");
  }

  /**
   * Kills the node if it runs, then starts it again on the same port (clients
   * hold its URL, so it cannot move). With `keepData` (default) it reloads
   * its AOF; without, it comes back empty. The port may have been taken
   * meanwhile, say by a client's ephemeral socket (a client reconnecting to
   * the dead port can even connect to itself): this waits for it to be free
   * again, for at most `startTimeoutMs`, then fails naming the port.
   *
   * `persistence` and `extraArgs` change how this node runs from now on
   * (until a later restart changes them again), e.g. a node of an AOF
   * cluster restarted with no persistence at all, or with
   * `--auto-aof-rewrite-percentage 0`. `extraArgs` replace the cluster's.
   */
  async restart(index: number, options: RestartOptions = {}): Promise<void> {
    const slot = this.slot(index);
    const input = requireOptionsObject("restart options", options) as RestartOptions;
    // A misspelt or non-boolean keepData kept the data of a restart meant to lose it.
    rejectUnknownOptions("restart options", input, ["keepData", "persistence", "extraArgs"]);
    const keepData = requireBoolean("keepData", input.keepData ?? true);
    const persistence =
      input.persistence === undefined ? slot.persistence : requirePersistence(input.persistence);
    const extraArgs = input.extraArgs === undefined ? slot.extraArgs : requireArgs(input.extraArgs);
    slot.persistence = persistence;
    slot.extraArgs = extraArgs;
    await this.kill(index);
    if (!keepData) {
      rmSync(slot.dataDir, { recursive: true, force: true });
      mkdirSync(slot.dataDir);
    }
    const deadline = performance.now() + this.startTimeoutMs;
    for (;;) {
      let holder = await portHolder(slot.port);
      if (holder === undefined) {
        try {
          await this.startProcess(slot);
          return;
        } catch (error) {
          // Taken between the check and redis-server's bind: wait for it again.
          const inUse = slot.log.some((line) => /address already in use/i.test(line));
          holder = await portHolder(slot.port);
          if (!inUse && holder === undefined) throw error;
        }
      }
      if (performance.now() >= deadline) {
        slot.state = "stopped";
        throw new RedquorumError(
          "ERR_CLUSTER",
          `cannot restart node ${index}: its port ${slot.port} is still in use after ` +
            `${this.startTimeoutMs} ms (${holder ?? "redis-server: address already in use"}); ` +
            "the node must keep its port, since clients hold its URL",
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** Kills every node and removes the data directories. Safe to call twice. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await Promise.all(this.slots.map(killSlot));
    this.releasePorts();
    rmSync(this.baseDir, { recursive: true, force: true });
    live.delete(this);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  /** Synchronous last-resort cleanup, for process exit. */
  killNow(): void {
    for (const slot of this.slots) {
      try {
        slot.child?.kill("SIGKILL");
      } catch {
        // already gone
      }
    }
    this.releasePorts();
    rmSync(this.baseDir, { recursive: true, force: true });
  }

  private releasePorts(): void {
    for (const slot of this.slots) {
      if (slot.claimed) release(slot.port);
      slot.claimed = false;
    }
  }

  /**
   * Waits until the node's process is in `want` state, as /proc/<pid>/stat
   * shows it (Linux); where there is no /proc, returns at once. Bounded by
   * `startTimeoutMs`; a process that exits meanwhile is an error too.
   */
  private waitForProcessState(slot: NodeSlot, want: "stopped" | "running"): void {
    const pid = slot.child?.pid;
    if (pid === undefined) return;
    const deadline = performance.now() + this.startTimeoutMs;
    for (;;) {
      const state = processState(pid);
      if (state === undefined) return; // no /proc here: nothing to poll
      if (state === "gone" || state === "Z" || state === "X") {
        throw new RedquorumError(
          "ERR_CLUSTER",
          `node ${slot.index} (pid ${pid}) exited instead of being ${want}`,
        );
      }
      const stopped = state === "T" || state === "t";
      if (stopped === (want === "stopped")) return;
      if (performance.now() >= deadline) {
        throw new RedquorumError(
          "ERR_CLUSTER",
          `node ${slot.index} (pid ${pid}) is not ${want} ${this.startTimeoutMs} ms after the signal ` +
            `(process state ${state})`,
        );
      }
      sleepSync(1);
    }
  }

  private slot(index: number): NodeSlot {
    if (this.stopped) throw new RedquorumError("ERR_CLUSTER", "the cluster is stopped");
    const slot = this.slots[index];
    if (!slot) {
      throw new InvalidArgumentError("index", `expected 0..${this.slots.length - 1}, got ${index}`);
    }
    return slot;
  }

  /**
   * A port claimed for the cluster's life (port-claims.ts): nothing else
   * takes it while the node is down. It can still be taken by someone else
   * before redis binds it: try a few.
   */
  private async startOnFreePort(slot: NodeSlot): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      slot.port = await claimPort();
      slot.claimed = true;
      try {
        await this.startProcess(slot);
        return;
      } catch (error) {
        release(slot.port);
        slot.claimed = false;
        if (attempt >= 5) throw error;
      }
    }
  }

  /** A port the caller chose: one that is taken fails the start at once, naming it. */
  private async startOnGivenPort(slot: NodeSlot): Promise<void> {
    const holder = await portHolder(slot.port);
    if (holder !== undefined) {
      throw new RedquorumError(
        "ERR_CLUSTER",
        `node ${slot.index}: ${portProblem(slot.port, holder)}: choose another port`,
      );
    }
    await this.startProcess(slot);
  }

  private async startProcess(slot: NodeSlot): Promise<void> {
    const args = [
      "--port",
      String(slot.port),
      "--bind",
      "127.0.0.1",
      "-::1",
      "--dir",
      slot.dataDir,
      "--save",
      "",
      "--daemonize",
      "no",
      "--protected-mode",
      "no",
      "--logfile",
      "",
      "--loglevel",
      "warning",
      ...persistenceArgs[slot.persistence],
      ...slot.extraArgs,
    ];
    const child = spawn(this.serverPath, args, { stdio: ["ignore", "pipe", "pipe"] });
    slot.child = child;
    slot.state = "running";
    slot.log = [];
    const keep = (chunk: Buffer) => {
      slot.log.push(...chunk.toString().split("\n").filter(Boolean));
      if (slot.log.length > 50) slot.log.splice(0, slot.log.length - 50);
    };
    child.stdout?.on("data", keep);
    child.stderr?.on("data", keep);
    child.once("exit", () => {
      if (slot.child === child) slot.state = "stopped";
    });
    const spawnError = new Promise<never>((_, reject) => {
      child.once("error", (error) => {
        slot.state = "stopped";
        reject(
          new RedquorumError("ERR_CLUSTER", `could not start ${this.serverPath}: ${error.message}`),
        );
      });
    });
    spawnError.catch(() => {});
    await Promise.race([this.waitForPing(slot, child), spawnError]);
  }

  private async waitForPing(slot: NodeSlot, child: ChildProcess): Promise<void> {
    const deadline = performance.now() + this.startTimeoutMs;
    while (performance.now() < deadline) {
      if (child.exitCode !== null || child.signalCode !== null || slot.state === "stopped") break;
      const { ready, pid } = await probe(slot.port);
      // An answer proves a server, not ours: another cluster's node may
      // hold the port while ours is still failing to bind it.
      if (pid !== undefined && pid !== child.pid) {
        child.kill("SIGKILL");
        throw new RedquorumError(
          "ERR_CLUSTER",
          `port ${slot.port} is held by another redis-server (pid ${pid}), not this node's (pid ${child.pid})`,
        );
      }
      if (ready) return;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const exited = child.exitCode ?? child.signalCode;
    child.kill("SIGKILL");
    throw new RedquorumError(
      "ERR_CLUSTER",
      (exited !== null
        ? `redis-server on port ${slot.port} exited (${exited}) before it answered PING`
        : `redis-server on port ${slot.port} did not answer PING within ${this.startTimeoutMs} ms`) +
        (slot.log.length ? `; its last output:\n${slot.log.slice(-10).join("\n")}` : ""),
    );
  }
}

async function killSlot(slot: NodeSlot): Promise<void> {
  const child = slot.child;
  // A child that never started (spawn failed) never exits either.
  if (!child || slot.state === "stopped" || child.pid === undefined) {
    slot.state = "stopped";
    return;
  }
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGKILL");
  await exited;
}

function requireDirectory(name: string, value: unknown): string {
  if (typeof value !== "string" || value.length === 0) {
    throw new InvalidArgumentError(name, `expected a directory path, got ${describe(value)}`);
  }
  return value;
}

function requirePorts(value: unknown): readonly number[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw new InvalidArgumentError("ports", "expected a non-empty array of port numbers");
  }
  const ports = value.map((port, i) => requireInteger(`ports[${i}]`, port, 1, 65_535));
  if (new Set(ports).size !== ports.length) {
    throw new InvalidArgumentError("ports", `expected distinct ports, got ${ports.join(", ")}`);
  }
  return ports;
}

interface NodeSlot {
  index: number;
  port: number;
  dataDir: string;
  child: ChildProcess | undefined;
  state: LocalNodeState;
  log: string[];
  /** The cluster's, unless a restart changed them for this node. */
  persistence: Persistence;
  extraArgs: readonly string[];
  /** Its port is claimed by this process (port-claims.ts), until the cluster stops. */
  claimed: boolean;
}

export interface RestartOptions {
  /** Reload the node's data (default true); false: it comes back empty. */
  keepData?: boolean;
  /** How the node keeps data from now on. Default: as before. */
  persistence?: Persistence;
  /** redis-server arguments for this node from now on, instead of the cluster's. Default: as before. */
  extraArgs?: readonly string[];
}

let exitCleanupInstalled = false;

function installExitCleanup(): void {
  if (exitCleanupInstalled) return;
  exitCleanupInstalled = true;
  process.once("exit", () => {
    for (const cluster of live) cluster.killNow();
  });
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    // Only where nobody else handles the signal: then its default is to
    // exit, and we keep that, after removing our processes.
    if (process.listenerCount(signal) > 0) continue;
    const onSignal = () => {
      for (const cluster of live) cluster.killNow();
      live.clear();
      process.removeListener(signal, onSignal);
      process.kill(process.pid, signal);
    };
    process.on(signal, onSignal);
  }
}
