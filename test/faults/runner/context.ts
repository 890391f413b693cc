/**
 * What a row's schedule works with: a fresh LocalCluster (and a store node
 * for lock-set), bounded admin clients per node, the workload processes it
 * spawns, the fault log, and `expect` for the row's own expectations. Every
 * process, socket and timer it makes is undone by `dispose()`, which the
 * runner always calls (also on Ctrl-C).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { isRunning } from "../../../src/cluster/process-state.js";
import { LocalCluster } from "../../../src/index.js";
import { prng } from "../../helpers/seed.js";
import { HistoryWriter, monotonicMs } from "../history.js";
import { NodeClock } from "../tools/clock.js";
import { FaultLog } from "../tools/fault-log.js";
import { type AofSample, sampleAof, truncateAof } from "../tools/power-loss.js";
import { type FaultProxy, startProxies } from "../tools/proxy.js";
import type { WorkloadOptions } from "../workloads/common.js";
import type { RowSetup } from "./types.js";

const workloadsDir = fileURLToPath(new URL("../workloads/", import.meta.url));
const adminTimeoutMs = 2_000;
const workloadKinds = ["lock", "lock-set", "ids"] as const;

/**
 * The workloads bundled once per runner process (esbuild, which tsx runs
 * on): a workload then starts in ~0.3 s instead of ~1.5 s through the tsx
 * loader, which decides whether the matrix fits the CI budget on two
 * cores. Same sources (src/ and test/faults/workloads/), ioredis left
 * external. FAULTS_NO_BUNDLE=1 runs them through tsx instead.
 */
let bundling: Promise<string | null> | undefined;

/** Bundles left by runners that were killed (no exit handler ran): their pid is gone. */
function removeOrphanBundles(root: string): void {
  for (const name of readdirSync(root)) {
    const pid = Number(/^\.build-(\d+)-/.exec(name)?.[1] ?? Number.NaN);
    const orphan = name.startsWith(".build-") && (!Number.isInteger(pid) || !isRunning(pid));
    if (orphan) rmSync(join(root, name), { recursive: true, force: true });
  }
}

async function workloadArgs(kind: WorkloadKind): Promise<string[]> {
  const source = join(workloadsDir, `${kind}.ts`);
  if (process.env.FAULTS_NO_BUNDLE === "1") return ["--import", "tsx", source];
  // One build shared by workloads spawned together (a row's Promise.all):
  // each used to start its own.
  bundling ??= bundleWorkloads();
  const dir = await bundling;
  return dir === null ? ["--import", "tsx", source] : [join(dir, `${kind}.mjs`)];
}

/** The bundle's directory, or null when esbuild failed (the workloads then run through tsx). */
async function bundleWorkloads(): Promise<string | null> {
  try {
    const { build } = await import("esbuild");
    // Inside the repository, so the bundle's bare imports (ioredis) resolve from its node_modules.
    const root = join(workloadsDir, "../../../.faults");
    mkdirSync(root, { recursive: true });
    removeOrphanBundles(root);
    const dir = mkdtempSync(join(root, `.build-${process.pid}-`));
    process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
    await build({
      entryPoints: workloadKinds.map((k) => join(workloadsDir, `${k}.ts`)),
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      outdir: dir,
      packages: "external",
      outExtension: { ".js": ".mjs" },
      logLevel: "error",
    });
    return dir;
  } catch {
    return null;
  }
}

export type WorkloadKind = "lock" | "lock-set" | "ids";

export interface WorkloadSpec
  extends Partial<Omit<WorkloadOptions, "name" | "historyPath" | "urls">> {
  /** Default: the cluster's URLs. */
  readonly urls?: readonly string[];
}

export interface RowParams {
  readonly seed: number;
  /** Loop workloads' duration, ms (the CI matrix keeps it to seconds). */
  readonly durationMs: number;
  readonly ttlMs: number;
  readonly outDir: string;
  /** The CI form: rows that repeat a step per node (rolling restarts) do fewer. */
  readonly quick?: boolean;
}

export class Workload {
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { resolve: (v: unknown) => void; reject: (e: Error) => void }
  >();
  readonly exited: Promise<{ code: number | null; signal: string | null }>;
  stderr = "";
  paused = false;

  constructor(
    readonly name: string,
    readonly child: ChildProcess,
  ) {
    child.stderr?.on("data", (chunk: Buffer) => {
      this.stderr = (this.stderr + chunk.toString()).slice(-4_000);
    });
    child.stdout?.on("data", () => {});
    child.on(
      "message",
      (message: { id?: number; result?: unknown; error?: { code: string; message: string } }) => {
        const waiter = message.id === undefined ? undefined : this.pending.get(message.id);
        if (!waiter) return;
        this.pending.delete(message.id!);
        if (message.error)
          waiter.reject(
            Object.assign(new Error(message.error.message), { code: message.error.code }),
          );
        else waiter.resolve(message.result);
      },
    );
    this.exited = new Promise((resolve) => {
      child.once("exit", (code, signal) => {
        for (const waiter of this.pending.values()) waiter.reject(new Error(`${name} exited`));
        this.pending.clear();
        resolve({ code, signal });
      });
    });
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Runs a command in the workload (it records the op); rejects with the op's error. Bounded. */
  call<T = unknown>(
    cmd: string,
    args: Record<string, unknown> = {},
    timeoutMs = 15_000,
  ): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${this.name}: ${cmd} did not answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, {
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v as T);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.child.send({ id, cmd, args });
    });
  }

  /** Like `call`, but resolves to the error instead of rejecting. */
  async attempt(cmd: string, args: Record<string, unknown> = {}, timeoutMs?: number) {
    try {
      return { ok: true as const, result: await this.call(cmd, args, timeoutMs) };
    } catch (error) {
      return {
        ok: false as const,
        code: (error as { code?: string }).code ?? "ERR",
        message: (error as Error).message,
      };
    }
  }
}

export class RowContext {
  readonly random: () => number;
  cluster!: LocalCluster;
  store: LocalCluster | undefined;
  readonly workloads: Workload[] = [];
  /** Row-specific expectations that did not hold. */
  readonly failures: string[] = [];
  readonly notes: string[] = [];
  faultCount = 0;
  private readonly faults: HistoryWriter;
  private readonly admins = new Map<number, Redis>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private disposed = false;

  constructor(
    readonly params: RowParams,
    readonly setup: RowSetup,
  ) {
    this.random = prng(params.seed ^ 0x0fa17);
    this.faults = new HistoryWriter(join(params.outDir, "faults.jsonl"));
  }

  get ttlMs(): number {
    return this.params.ttlMs;
  }

  get urls(): string[] {
    return this.cluster.urls;
  }

  async start(): Promise<void> {
    this.cluster = await LocalCluster.start({
      nodeCount: this.setup.nodeCount ?? 5,
      persistence: this.setup.persistence ?? "none",
      extraArgs: this.setup.extraArgs,
    });
    if (this.setup.store)
      this.store = await LocalCluster.start({ nodeCount: 1, persistence: "none" });
  }

  // ---- the fault log -------------------------------------------------

  private nextFaultId = 1;

  /** Records a fault that lasts; returns its end. */
  faultStart(fault: string, target: string, detail?: string): () => void {
    const faultId = this.nextFaultId++;
    this.faultCount++;
    this.faults.write({
      kind: "fault",
      phase: "start",
      faultId,
      fault,
      target,
      timeMs: monotonicMs(),
      detail,
    });
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.faults.write({
        kind: "fault",
        phase: "end",
        faultId,
        fault,
        target,
        timeMs: monotonicMs(),
      });
    };
  }

  /** Records an instant fault. */
  faultNow(fault: string, target: string, detail?: string): void {
    this.faultCount++;
    this.faults.write({
      kind: "fault",
      phase: "start",
      faultId: this.nextFaultId++,
      fault,
      target,
      timeMs: monotonicMs(),
      detail,
    });
  }

  // ---- node faults (LocalCluster) ------------------------------------

  private pauseEnds = new Map<number, () => void>();

  /**
   * SIGSTOP. The fault's window is conservative for the liveness checker:
   * it starts once every node is stopped (LocalCluster waits for /proc to
   * say so; a command sent before may still be answered) and ends before
   * the first is resumed.
   */
  pause(...nodes: number[]): void {
    for (const i of nodes) this.cluster.pause(i);
    for (const i of nodes) this.pauseEnds.set(i, this.faultStart("pause", `node-${i}`));
  }

  resume(...nodes: number[]): void {
    for (const i of nodes) {
      this.pauseEnds.get(i)?.();
      this.pauseEnds.delete(i);
    }
    for (const i of nodes) this.cluster.resume(i);
  }

  async kill(node: number): Promise<void> {
    this.faultNow("kill", `node-${node}`, "SIGKILL");
    await this.cluster.kill(node);
  }

  async restart(node: number, keepData: boolean): Promise<void> {
    this.faultNow(keepData ? "restart-keep" : "restart-empty", `node-${node}`);
    await this.cluster.restart(node, { keepData });
    this.dropAdmin(node);
  }

  /** The node's AOF as it is now (faults-tools' sampleAof), for a later power loss. */
  aofSize(node: number): AofSample {
    return sampleAof(this.cluster, node);
  }

  /**
   * Power loss: SIGKILL, then the AOF cut back to a sample taken earlier
   * (what an unsynced page cache would have lost; faults-tools'
   * truncateAof), then restart.
   */
  async powerLoss(node: number, sampled: AofSample): Promise<void> {
    const end = this.faultStart("power-loss", `node-${node}`, "AOF cut back to an earlier sample");
    await this.cluster.kill(node);
    truncateAof(this.cluster, node, sampled);
    await this.cluster.restart(node, { keepData: true });
    this.dropAdmin(node);
    end();
  }

  /** The node's clock (faults-tools' NodeClock: TTL shifts, libfaketime hangs this redis-server). */
  clock(node: number): NodeClock {
    const clock = NodeClock.of(this.cluster, node, { log: this.toolLog() });
    this.closers.push(() => clock.close());
    return clock;
  }

  /** A forward (positive) or backward clock jump on a node. */
  async clockJump(node: number, jumpMs: number): Promise<void> {
    await this.clock(node).jump(jumpMs);
  }

  /**
   * A copy of a stopped node's data directory (a backup or disk snapshot),
   * for `restoreSnapshot` later (I13: a node back with an older counter).
   */
  snapshot(node: number): string {
    const from = this.cluster.node(node).dataDir;
    const to = `${from}.snapshot`;
    rmSync(to, { recursive: true, force: true });
    cpSync(from, to, { recursive: true });
    return to;
  }

  /** Kills the node, puts the snapshot back as its data, restarts it. */
  async restoreSnapshot(node: number, snapshot: string): Promise<void> {
    const end = this.faultStart("restore-snapshot", `node-${node}`, "older data, marker intact");
    await this.cluster.kill(node);
    const dir = this.cluster.node(node).dataDir;
    rmSync(dir, { recursive: true, force: true });
    cpSync(snapshot, dir, { recursive: true });
    await this.cluster.restart(node, { keepData: true });
    this.dropAdmin(node);
    end();
  }

  private toolLogs = 0;

  /** A FaultLog for one faults-tools tool, into this row's fault log (ids offset: no collisions). */
  private toolLog(): FaultLog {
    const offset = ++this.toolLogs * 100_000;
    return new FaultLog((event) => {
      if (event.phase === "start") this.faultCount++;
      this.faults.write({ ...event, faultId: event.faultId + offset });
    });
  }

  /**
   * One faults-tools proxy per node for one client (pass `urls(proxies)`
   * to its workload): faults on a proxy act on that client's link to that
   * node only. Their faults go to the fault log (ids offset per set, so
   * they never collide with the runner's own); closed at dispose.
   */
  async proxies(client?: string): Promise<FaultProxy[]> {
    const proxies = await startProxies(this.cluster, {
      ...(client ? { client } : {}),
      log: this.toolLog(),
      seed: this.params.seed,
    });
    this.closers.push(async () => {
      await Promise.all(proxies.map((p) => p.close()));
    });
    return proxies;
  }

  /** Things to close at dispose (proxies a row started). */
  readonly closers: Array<() => Promise<void>> = [];

  /** A plain client to node `index` for setup and inspection; every call bounded. */
  admin(index: number): Redis {
    let client = this.admins.get(index);
    if (!client || client.status === "end") {
      client = new Redis(this.cluster.urls[index]!, {
        commandTimeout: adminTimeoutMs,
        maxRetriesPerRequest: 1,
        retryStrategy: () => 50,
      });
      client.on("error", () => {});
      this.admins.set(index, client);
    }
    return client;
  }

  private dropAdmin(index: number): void {
    this.admins.get(index)?.disconnect();
    this.admins.delete(index);
  }

  /** Keys on each node other than those that legitimately outlive locks. */
  async leftoverKeys(): Promise<string[][]> {
    const keep = (k: string) => k.startsWith("redquorum:") && !k.startsWith("redquorum:quarantine");
    return Promise.all(
      this.cluster.nodes.map(async (n) =>
        n.state === "running"
          ? (await this.admin(n.index).keys("*")).filter((k) => !keep(k)).sort()
          : [],
      ),
    );
  }

  // ---- workloads -------------------------------------------------------

  /** Starts a workload process; resolves once it serves commands. */
  async spawn(kind: WorkloadKind, name: string, spec: WorkloadSpec = {}): Promise<Workload> {
    const options: WorkloadOptions = {
      name,
      historyPath: join(this.params.outDir, `${name}.jsonl`),
      urls: spec.urls ?? this.urls,
      seed: (spec.seed ?? this.params.seed) * 31 + this.workloads.length,
      durationMs: spec.durationMs ?? 0,
      ttlMs: spec.ttlMs ?? this.ttlMs,
      resources: spec.resources ?? ["r"],
      pacingMs: spec.pacingMs ?? 20,
      holdMs: spec.holdMs ?? 30,
      fencing: spec.fencing ?? true,
      library: spec.library ?? {},
      storeUrl: spec.storeUrl ?? this.store?.urls[0],
      fencedStore: spec.fencedStore ?? false,
      callers: spec.callers,
      acquireWaitMs: spec.acquireWaitMs,
      buggyGroupCommit: spec.buggyGroupCommit,
      sampleMs: spec.sampleMs,
      membershipOff: spec.membershipOff,
      takeBackEmptyLists: spec.takeBackEmptyLists,
    };
    const child = spawn(
      process.execPath,
      [...(await workloadArgs(kind)), JSON.stringify(options)],
      {
        stdio: ["ignore", "pipe", "pipe", "ipc"],
        cwd: join(workloadsDir, "../../.."),
      },
    );
    const workload = new Workload(name, child);
    this.workloads.push(workload);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${name} not ready in 30 s: ${workload.stderr}`)),
        30_000,
      );
      child.on("message", (m: { ready?: boolean }) => {
        if (m.ready) {
          clearTimeout(timer);
          resolve();
        }
      });
      workload.exited.then(({ code, signal }) => {
        clearTimeout(timer);
        reject(new Error(`${name} exited (${code ?? signal}) before ready: ${workload.stderr}`));
      });
    });
    return workload;
  }

  /** SIGSTOP a client process (a GC pause the process cannot see coming). */
  stopClient(workload: Workload): () => void {
    const end = this.faultStart("pause", `client ${workload.name}`, "SIGSTOP");
    workload.child.kill("SIGSTOP");
    workload.paused = true;
    return () => {
      workload.child.kill("SIGCONT");
      workload.paused = false;
      end();
    };
  }

  /**
   * Ends a workload: "stop" over IPC (SIGTERM if it has no channel), then
   * waits up to `graceMs` for it to exit by itself; one that does not is a
   * hygiene failure (a leaked handle keeps it alive) and is killed.
   */
  async stopWorkload(workload: Workload, graceMs = 10_000): Promise<void> {
    if (!workload.running) return;
    if (workload.paused) workload.child.kill("SIGCONT");
    if (workload.child.connected) workload.child.send({ cmd: "stop" });
    else workload.child.kill("SIGTERM");
    const timer = { id: undefined as NodeJS.Timeout | undefined };
    const late = new Promise<"late">((resolve) => {
      timer.id = setTimeout(() => resolve("late"), graceMs);
    });
    const outcome = await Promise.race([workload.exited, late]);
    clearTimeout(timer.id);
    if (outcome === "late") {
      this.failures.push(
        `HY: ${workload.name} did not exit within ${graceMs} ms of stop (a leaked handle?)`,
      );
      workload.child.kill("SIGKILL");
      await workload.exited;
    } else if (outcome.code !== 0 && outcome.signal !== "SIGKILL") {
      this.failures.push(
        `HY: ${workload.name} exited with ${outcome.code ?? outcome.signal}: ${workload.stderr.trim().split("\n").slice(-3).join(" | ")}`,
      );
    }
    // What the HY checker counts, with its reason (the workload prints each).
    for (const line of workload.stderr.split("\n")) {
      if (line.includes("unhandled rejection:")) this.failures.push(`HY: ${line.slice(0, 1_500)}`);
    }
  }

  /** SIGKILL a client process (a crash). */
  async killClient(workload: Workload): Promise<void> {
    this.faultNow("kill", `client ${workload.name}`, "SIGKILL");
    workload.child.kill("SIGKILL");
    await workload.exited;
  }

  // ---- schedule helpers -------------------------------------------------

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        resolve();
      }, ms);
      this.timers.add(timer);
    });
  }

  /** A row-specific expectation; a false one fails the row with `message`. */
  expect(condition: boolean, message: string): void {
    if (!condition) this.failures.push(message);
  }

  note(message: string): void {
    this.notes.push(message);
  }

  /** Polls `probe` every 10 ms until it is true or `timeoutMs` passed; returns whether it held. */
  async waitFor(probe: () => Promise<boolean> | boolean, timeoutMs: number): Promise<boolean> {
    const deadline = monotonicMs() + timeoutMs;
    for (;;) {
      try {
        if (await probe()) return true;
      } catch {
        // a node in a fault: try again
      }
      if (monotonicMs() > deadline) return false;
      await this.sleep(10);
    }
  }

  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    for (const timer of this.timers) clearTimeout(timer);
    await Promise.all(this.workloads.map((w) => this.stopWorkload(w)));
    for (const client of this.admins.values()) client.disconnect();
    this.admins.clear();
    for (const close of this.closers) await close().catch(() => {});
    for (const i of this.pauseEnds.keys()) {
      try {
        this.cluster.resume(i);
      } catch {
        // gone already
      }
    }
    await this.cluster?.stop();
    await this.store?.stop();
  }

  /** Synchronous last resort (process exit / second Ctrl-C). */
  killNow(): void {
    for (const w of this.workloads) if (w.running) w.child.kill("SIGKILL");
    this.cluster?.killNow();
    this.store?.killNow();
  }
}
