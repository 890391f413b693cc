/**
 * Process faults, logged: on nodes through LocalCluster (kill -9,
 * SIGSTOP/SIGCONT, restarts keeping or losing data, power loss), and on
 * client (workload) processes (SIGSTOP for a while, SIGKILL).
 */
import type { ChildProcess } from "node:child_process";
import { sleep } from "../../../src/clock.js";
import { processState, sleepSync } from "../../../src/cluster/process-state.js";
import type { LocalCluster, Persistence } from "../../../src/index.js";
import { monotonicMs } from "../history.js";
import { FaultLog } from "./fault-log.js";
import { type AofSample, truncateAof } from "./power-loss.js";

const nodeName = (index: number) => `node-${index}`;

export class NodeFaults {
  readonly log: FaultLog;

  constructor(
    readonly cluster: LocalCluster,
    options: { log?: FaultLog } = {},
  ) {
    this.log = options.log ?? new FaultLog();
  }

  /** SIGKILL: a crash. Resolves once the process is gone. */
  async kill(index: number): Promise<void> {
    this.log.instant({ fault: "kill", target: nodeName(index) });
    await this.cluster.kill(index);
  }

  /** SIGSTOP; returns the function that resumes it (SIGCONT) and logs the end. */
  pause(index: number): () => void {
    this.cluster.pause(index);
    const end = this.log.start({ fault: "pause", target: nodeName(index) });
    return () => {
      // Killed or restarted while paused: nothing to resume.
      if (this.cluster.node(index).state === "paused") this.cluster.resume(index);
      end();
    };
  }

  /** SIGSTOP for `durationMs`, then SIGCONT. */
  async pauseFor(index: number, durationMs: number, signal?: AbortSignal): Promise<void> {
    const resume = this.pause(index);
    try {
      await sleep(durationMs, signal);
    } finally {
      resume();
    }
  }

  /**
   * Kill and start again on the same port. `keepData` (default true):
   * reload what the node persisted; false: come back empty. `persistence`:
   * how it runs from now on — "none" is L4's `--save '' --appendonly no`.
   */
  async restart(
    index: number,
    options: { keepData?: boolean; persistence?: Persistence; extraArgs?: readonly string[] } = {},
  ): Promise<void> {
    const fault =
      options.keepData === false
        ? "restart-empty"
        : options.persistence === "none"
          ? "restart-no-persistence"
          : "restart";
    const detail = [
      options.persistence && `persistence ${options.persistence}`,
      options.extraArgs && `args ${options.extraArgs.join(" ")}`,
    ]
      .filter(Boolean)
      .join(", ");
    const end = this.log.start({ fault, target: nodeName(index), ...(detail && { detail }) });
    try {
      await this.cluster.restart(index, options);
    } finally {
      end();
    }
  }

  /**
   * Power loss: SIGKILL, then cut the AOF back to `sample` (taken earlier
   * with `sampleAof`), then — unless `restart: false` — start it again
   * with what is left. Returns the bytes cut.
   */
  async powerLoss(
    index: number,
    sample: AofSample,
    options: { restart?: boolean } = {},
  ): Promise<{ cutBytes: number }> {
    const end = this.log.start({
      fault: "power-loss",
      target: nodeName(index),
      detail: `AOF cut back to its size ${Math.round(monotonicMs() - sample.timeMs)} ms earlier`,
    });
    try {
      await this.cluster.kill(index);
      const cutBytes = truncateAof(this.cluster, index, sample);
      if (options.restart ?? true) await this.cluster.restart(index);
      return { cutBytes };
    } finally {
      end();
    }
  }
}

/** A process to signal: a child we started or a pid. */
export type ProcessTarget = ChildProcess | number;

function pidOf(target: ProcessTarget): number {
  const pid = typeof target === "number" ? target : target.pid;
  if (pid === undefined || !Number.isInteger(pid) || pid <= 0) {
    throw new TypeError(`not a running process: pid ${String(pid)}`);
  }
  return pid;
}

/**
 * SIGSTOP a client process for `durationMs`, then SIGCONT — a GC pause
 * (L15, I12) as long as asked, whatever the process was doing. `name` is
 * how the log calls it ("lock-1").
 */
export async function pauseProcessFor(
  target: ProcessTarget,
  durationMs: number,
  options: { name?: string; log?: FaultLog; signal?: AbortSignal } = {},
): Promise<void> {
  const pid = pidOf(target);
  process.kill(pid, "SIGSTOP");
  waitUntilStopped(pid);
  const end = options.log?.start({
    fault: "pause",
    target: `client ${options.name ?? pid}`,
    detail: `${durationMs} ms`,
  });
  try {
    await sleep(durationMs, options.signal);
  } finally {
    try {
      process.kill(pid, "SIGCONT");
    } catch {
      // It died meanwhile (killed by the runner): nothing to resume.
    }
    end?.();
  }
}

/** SIGKILL a client process; resolves once it exited (for a ChildProcess) or at once (a pid). */
export async function killProcess(
  target: ProcessTarget,
  options: { name?: string; log?: FaultLog } = {},
): Promise<void> {
  const pid = pidOf(target);
  options.log?.instant({ fault: "kill", target: `client ${options.name ?? pid}` });
  if (typeof target !== "number" && (target.exitCode !== null || target.signalCode !== null))
    return;
  const exited =
    typeof target === "number"
      ? Promise.resolve()
      : new Promise<void>((resolve) => target.once("exit", () => resolve()));
  process.kill(pid, "SIGKILL");
  await exited;
}

/**
 * A signal is delivered asynchronously: wait (at most a second) until
 * /proc shows the process stopped, so the pause starts when the log says.
 */
function waitUntilStopped(pid: number): void {
  const deadlineMs = performance.now() + 1_000;
  for (;;) {
    const state = processState(pid);
    if (state === undefined || state === "T" || state === "t" || state === "gone") return;
    if (performance.now() > deadlineMs) {
      throw new Error(`process ${pid} is not stopped 1 s after SIGSTOP (state ${state})`);
    }
    sleepSync(1);
  }
}
