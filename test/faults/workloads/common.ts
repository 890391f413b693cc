/**
 * What every workload process shares: its options (one JSON document in
 * argv or $FAULTS_WORKLOAD), its history file, the op recorder, the hygiene
 * samples, and the two ways it is driven — a seeded loop for a duration, or
 * commands from the runner over the IPC channel (scripted fault rows need
 * "acquire now", "use now" at exact points of their schedule).
 */

import { membershipTesting } from "../../../src/membership/testing.js";
import { prng } from "../../helpers/seed.js";
import { HistoryWriter, monotonicMs, type OpName } from "../history.js";

export interface WorkloadOptions {
  /** Process name in the history, e.g. "lock-1". */
  readonly name: string;
  /** Where this process writes its JSONL history. */
  readonly historyPath: string;
  readonly urls: readonly string[];
  readonly seed: number;
  /** Loop mode: how long to run (ms); 0 = IPC only (the runner drives every op). */
  readonly durationMs: number;
  readonly ttlMs: number;
  /** Loop mode: the resources to choose from. */
  readonly resources: readonly string[];
  /** Loop mode: pause between operations, ms (a random amount up to this). */
  readonly pacingMs: number;
  /** Loop mode: bound on one acquire, retries included, ms (so a loop ends on time). Default 2000. */
  readonly acquireWaitMs?: number;
  /** How long a lock is held before `use` and release, ms. */
  readonly holdMs: number;
  readonly fencing: boolean;
  /** Library options passed through (quarantine, nodeTimeoutMs, maxTtlMs, retry, unsafe…). */
  readonly library: Record<string, unknown>;
  /** lock-set: URL of the Redis that holds the shared value (not one of the lock nodes). */
  readonly storeUrl?: string;
  /** lock-set: write through the fenced store (fencedSet) instead of a plain SET. */
  readonly fencedStore?: boolean;
  /**
   * ids, test-only (I9's negative control): a deliberately buggy group
   * commit that keeps the rest of a round's IDs and hands them to requests
   * that arrive later, after other instances may have returned higher IDs.
   */
  readonly buggyGroupCommit?: boolean;
  /** ids: concurrent callers in this process. */
  readonly callers?: number;
  /** Sampling interval for memory/handles, ms. */
  readonly sampleMs?: number;
  /** Test-only (membership rows' negative control): the client checks no node list. */
  readonly membershipOff?: boolean;
  /** Test-only (M4's negative control): nodes that all lost the record are taken back by any call. */
  readonly takeBackEmptyLists?: boolean;
}

export function readOptions(): WorkloadOptions {
  const raw = process.argv[2] ?? process.env.FAULTS_WORKLOAD;
  if (!raw)
    throw new Error(
      "usage: node --import tsx <workload>.ts '<options JSON>' (or $FAULTS_WORKLOAD)",
    );
  const options = JSON.parse(raw) as WorkloadOptions;
  if (options.membershipOff) membershipTesting.mode = "off";
  if (options.takeBackEmptyLists) membershipTesting.takeBackEmptyLists = true;
  return options;
}

/** The monotonic clock every process shares, as the library's Clock (so validUntilMs is comparable). */
export const sharedClock = {
  now: monotonicMs,
  sleep: (ms: number, signal?: AbortSignal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const timer = setTimeout(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      }, ms);
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
    }),
};

export function errorOf(error: unknown): { code: string; message: string } {
  const e = error as { code?: unknown; message?: unknown; name?: unknown };
  return {
    code: typeof e?.code === "string" ? e.code : String(e?.name ?? "Error"),
    message: String(e?.message ?? error),
  };
}

/** Errors that certainly mean "did not happen" (a fail); anything else is indeterminate (info). */
const definiteCodes = new Set([
  "ERR_QUORUM",
  "ERR_RESOURCE_LOCKED",
  "ERR_LOCK_EXPIRED",
  "ERR_INVALID_ARGUMENT",
  "ERR_CONTENTION",
  "STALE_FENCE",
  "ERR_ID_OVERFLOW",
  "ERR_MEMBERSHIP",
]);

/**
 * A timer turn every `timerTurnEveryMs` while the process runs: the last
 * one's time bounds when a completion's last synchronous steps began. A
 * reply's callback and every microtask after it (the library's validity
 * check, its return, the `await` here) run after the latest timer turn, so
 * whatever the library checked, it checked no earlier than that turn; a
 * process stopped in between (on a loaded machine the scheduler can leave
 * it out for a long time) delays only the record. Unref'd: it never keeps
 * a workload alive.
 */
const timerTurnEveryMs = 10;
let lastTimerTurnMs = monotonicMs();
setInterval(() => {
  lastTimerTurnMs = monotonicMs();
}, timerTurnEveryMs).unref();

export class Recorder {
  readonly writer: HistoryWriter;
  private nextOpId = 1;
  unhandled = 0;

  constructor(
    readonly process: string,
    path: string,
  ) {
    this.writer = new HistoryWriter(path);
  }

  /**
   * Records one operation around `run`: invoke, then ok with `okValue(result)`,
   * or fail/info with the error's code. Rethrows.
   */
  async op<T>(
    op: OpName,
    resource: string | undefined,
    invokeValue: Record<string, unknown> | undefined,
    run: () => Promise<T>,
    okValue: (result: T) => Record<string, unknown> | undefined = () => undefined,
    failType: (error: unknown) => "fail" | "info" = (error) =>
      definiteCodes.has(errorOf(error).code) ? "fail" : "info",
  ): Promise<T> {
    const opId = this.nextOpId++;
    const base = { kind: "op" as const, process: this.process, opId, op, resource };
    this.writer.write({ ...base, type: "invoke", timeMs: monotonicMs(), value: invokeValue });
    try {
      const result = await run();
      this.writer.write({
        ...base,
        type: "ok",
        timeMs: monotonicMs(),
        timerTurnMs: lastTimerTurnMs,
        value: okValue(result),
      });
      return result;
    } catch (error) {
      this.writer.write({
        ...base,
        type: failType(error),
        timeMs: monotonicMs(),
        error: errorOf(error),
      });
      throw error;
    }
  }

  sample(): void {
    const handles: Record<string, number> = {};
    for (const kind of process.getActiveResourcesInfo()) handles[kind] = (handles[kind] ?? 0) + 1;
    const memory = process.memoryUsage();
    this.writer.write({
      kind: "sample",
      process: this.process,
      timeMs: monotonicMs(),
      values: {
        heapUsedBytes: memory.heapUsed,
        rssBytes: memory.rss,
        activeHandles: Object.values(handles).reduce((a, b) => a + b, 0),
        activeTimers: handles.Timeout ?? 0,
        activeSockets: (handles.TCPSocketWrap ?? 0) + (handles.TCPWrap ?? 0),
        unhandledRejections: this.unhandled,
      },
    });
  }
}

export type Commands = Record<string, (args: Record<string, unknown>) => Promise<unknown>>;

/**
 * Runs a workload: sets up sampling and unhandled-rejection counting, serves
 * the runner's IPC commands, runs `loop` (if durationMs > 0) until the
 * duration ends or SIGTERM / "stop" arrives, then `close` and a last sample,
 * and exits by itself (no process.exit: a leaked handle shows as a hang the
 * runner reports).
 */
export async function runWorkload(
  options: WorkloadOptions,
  recorder: Recorder,
  parts: {
    commands: Commands;
    loop: (random: () => number, stopping: () => boolean) => Promise<void>;
    close: () => Promise<void>;
  },
): Promise<void> {
  process.on("unhandledRejection", (reason) => {
    recorder.unhandled++;
    // One line with the stack: the runner reports it with the HY failure.
    const text = reason instanceof Error ? (reason.stack ?? String(reason)) : String(reason);
    process.stderr.write(
      `${options.name}: unhandled rejection: ${text.replace(/\n\s*/g, " ← ")}\n`,
    );
  });
  let stopping = false;
  let wake: () => void = () => {};
  const stopped = new Promise<void>((resolve) => {
    wake = resolve;
  });
  const stop = () => {
    stopping = true;
    wake();
  };
  process.on("SIGTERM", stop);
  const sampler = setInterval(() => recorder.sample(), options.sampleMs ?? 250);
  recorder.sample();
  if (process.send) {
    process.on(
      "message",
      (message: { id: number; cmd: string; args?: Record<string, unknown> }) => {
        if (message.cmd === "stop") return stop();
        const command = parts.commands[message.cmd];
        const reply = (body: Record<string, unknown>) =>
          process.send?.({ id: message.id, ...body });
        if (!command)
          return reply({ error: { code: "ERR_USAGE", message: `no command ${message.cmd}` } });
        command(message.args ?? {}).then(
          (result) => reply({ result: result ?? null }),
          (error) => reply({ error: errorOf(error) }),
        );
      },
    );
    process.send({ ready: true });
  }
  const random = prng(options.seed);
  if (options.durationMs > 0) {
    const timer = setTimeout(stop, options.durationMs);
    await parts.loop(random, () => stopping);
    clearTimeout(timer);
  } else {
    await stopped;
  }
  clearInterval(sampler);
  await parts.close();
  await drained();
  recorder.sample();
  process.removeListener("SIGTERM", stop);
  if (process.connected) process.disconnect();
}

/**
 * After close, sockets finish closing and their timers end on the next
 * turns of the event loop: wait until no timer or TCP handle is left (the
 * polling timer itself is not active while its callback runs), at most
 * 3 s. What remains after that is a leak the last sample shows.
 *
 * Why 3 s: a connection closed while its ready check was unanswered (a
 * first contact that a loaded machine made slow) gets, once its socket has
 * closed, one more 250 ms timer from ioredis (its ready check fails, and
 * the recovery "disconnects" the closed socket again). Bounded, and not
 * redquorum's; at load average 15-20 it outlasted a 1 s wait.
 */
function drained(): Promise<void> {
  const deadline = monotonicMs() + 3_000;
  return new Promise((resolve) => {
    const poll = () => {
      const left = process
        .getActiveResourcesInfo()
        .filter((k) => k === "Timeout" || k.startsWith("TCP"));
      if (left.length === 0 || monotonicMs() > deadline) resolve();
      else setTimeout(poll, 10);
    };
    setTimeout(poll, 0);
  });
}

export function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
