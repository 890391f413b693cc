/**
 * `redquorum lock <resource…> -- <command> [args…]`: a distributed flock(1).
 * Acquires within --wait, runs the command with the lock kept extended
 * (the keep-alive of `redlock.using`), and releases it when the command
 * exits. If the lock cannot be kept, the command gets SIGTERM early enough
 * that the SIGKILL --kill-after later still comes before the lock's
 * validity ends; a guard process (lock-guard.ts) does the same if
 * redquorum is killed or stopped meanwhile.
 */
import { type ChildProcess, spawn } from "node:child_process";
import type { Writable } from "node:stream";
import { Command } from "commander";
import { LockExpiredError, LockLostError, ResourceLockedError } from "../errors.js";
import { defaults, limits } from "../limits.js";
import { runKeepingAlive } from "../lock/keep-alive.js";
import { graceSchedule } from "../lock/keep-alive-schedule.js";
import type { Lock } from "../lock/lock.js";
import { Redlock } from "../lock/redlock.js";
import { commandProblem } from "./command-path.js";
import {
  diagnose,
  type MaxTtlOptions,
  maxTtlOption,
  type NodesOptions,
  nodesFrom,
  nodesOption,
  nodeTimeoutOption,
  onWarning,
} from "./common.js";
import { durationOption, formatDuration } from "./duration.js";
import { InterruptedError, LockNotAcquiredError, UsageError } from "./errors.js";
import { exitCodes, signalExitCode } from "./exit-codes.js";
import { LockGuard } from "./lock-guard.js";
import { monotonicNowMs } from "./monotonic.js";
import { groupRunning, signalGroup } from "./process-group.js";

interface LockOptions extends NodesOptions, MaxTtlOptions {
  ttl: number;
  wait: number;
  killAfter: number;
  nodeTimeout: number;
}

const forwardedSignals: readonly NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"];
const ttlMinMs = 100;
/** How often a process group still running is looked at while it is being stopped. */
const groupPollMs = 20;
/**
 * The longest pause between looks during the grace period, to which they
 * back off (doubling) while the group runs on: a look may stop the group
 * (process-group.ts), and a look every 20 ms on a loaded machine kept a
 * chain of processes that fork and exit stopped most of the time (69
 * generations in a minute, a third of a second's work when quiet). The
 * release then comes at most this much after the group is gone.
 */
const groupPollMaxMs = 250;
/** After SIGKILL, how long the group may take to go (it cannot refuse; only reaping takes time). */
const reapWaitMs = 1_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * `sh -c` script: wait for redquorum's "go" on fd 3 (none: redquorum died
 * before the guard knew the group, so the command must not start), close
 * fd 3, become the command ($0, as given: the shell finds it on PATH).
 */
const gateScript = 'read go <&3 || exit 125; exec 3<&-; exec "$0" "$@"';

/**
 * The command run under the lock, in a process group of its own: every
 * signal goes to the group, so what the command started (a script's
 * children) stops with it, and a terminal's Ctrl-C reaches it once, through
 * redquorum (as `timeout(1)` does). Nothing of the group may outlive the
 * lock: when the command exits, what it left running is stopped before
 * the release.
 */
class ChildRun {
  private child: ChildProcess | undefined;
  private killTimer: ReturnType<typeof setTimeout> | undefined;
  /** When SIGKILL is due if the lock is lost: before its validity ends (monotonic ms). */
  private killAt = Number.POSITIVE_INFINITY;
  lost = false;

  /**
   * `killAfterMs`: the grace for what the command leaves running when it
   * exits; `loss`: the grace when the lock is lost (what --kill-after fits
   * in the validity), and how much validity must be left at the SIGKILL.
   * The guard is started already (before the lock is taken).
   */
  constructor(
    private readonly argv: readonly string[],
    private readonly killAfterMs: number,
    private readonly loss: { graceMs: number; termMarginMs: number; killMarginMs: number },
    private readonly guard: LockGuard,
  ) {}

  /** The lock's validity left (ms), after each extension: the times SIGTERM and SIGKILL are due if it is not kept. */
  schedule(validityLeftMs: number): void {
    const end = monotonicNowMs() + validityLeftMs;
    this.killAt = end - this.loss.killMarginMs;
    this.guard.schedule(end - this.loss.termMarginMs, this.killAt);
  }

  get started(): boolean {
    return this.child !== undefined;
  }

  /** Runs the command; resolves with the exit code redquorum should pass on, once its group is gone. */
  run(env: NodeJS.ProcessEnv): Promise<number> {
    const [command, ...args] = this.argv as [string, ...string[]];
    const problem = commandProblem(command, env.PATH);
    if (problem) {
      diagnose(`cannot run ${JSON.stringify(command)}: ${problem.message}`);
      return Promise.resolve(problem.exitCode);
    }
    return new Promise((resolve) => {
      // Through a shell that waits on fd 3 and then becomes the command
      // (exec: same process, same group). It is let go only once the guard
      // knows the group: killed before that, redquorum leaves nothing
      // running (the read sees the pipe close, and the shell exits).
      // detached: a new session and process group (Node has no setpgid alone).
      const child = spawn("/bin/sh", ["-c", gateScript, command, ...args], {
        stdio: ["inherit", "inherit", "inherit", "pipe"],
        env,
        detached: true,
      });
      this.child = child;
      const gate = child.stdio[3] as Writable;
      gate.on("error", () => {}); // the shell is gone: its exit says why
      if (child.pid !== undefined) {
        this.guard.group(child.pid);
        gate.end("go\n");
      }
      child.once("error", (error: NodeJS.ErrnoException) => {
        if (child.pid !== undefined) return; // a failed kill(): the exit still comes
        diagnose(`cannot run ${JSON.stringify(command)}: ${error.message}`);
        resolve(126);
      });
      child.once("exit", (code, signal) => {
        const exitCode = code ?? signalExitCode(signal ?? "SIGKILL");
        this.stopGroup().then(() => {
          clearTimeout(this.killTimer);
          this.guard.done();
          resolve(exitCode);
        });
      });
    });
  }

  /** Passes a signal on to the command's process group. */
  forward(signal: NodeJS.Signals): void {
    const pid = this.child?.pid;
    if (pid !== undefined) signalGroup(pid, signal);
  }

  /**
   * SIGTERM to the group now, SIGKILL `killInMs` later. The guard sends
   * the SIGTERM while it runs: it may have sent one already (redquorum was
   * stopped), and the command gets one. SIGKILL comes from both (a second
   * one changes nothing).
   */
  private terminate(killInMs: number): void {
    if (this.guard.live) this.guard.terminate(monotonicNowMs() + killInMs);
    else this.forward("SIGTERM");
    clearTimeout(this.killTimer);
    this.killTimer = setTimeout(() => this.forward("SIGKILL"), killInMs);
  }

  /**
   * The lock is going: SIGTERM now, SIGKILL after the grace, and never
   * after the point where the validity left is down to the margin (a
   * lock found lost late, its validity already spent: SIGKILL at once).
   */
  lose(reason: unknown): void {
    this.lost = true;
    const message = reason instanceof Error ? reason.message : String(reason);
    const killInMs = this.killDelay(this.loss.graceMs);
    diagnose(`${message}; sending SIGTERM to the command (SIGKILL in ${formatDuration(killInMs)})`);
    this.terminate(killInMs);
  }

  /** Ms until SIGKILL on a lost lock: at most `capMs`, and not past the point set by the validity. */
  private killDelay(capMs: number): number {
    return Math.round(Math.max(0, Math.min(capMs, this.killAt - monotonicNowMs())));
  }

  private groupRunning(): boolean {
    const pid = this.child?.pid;
    return pid !== undefined && groupRunning(pid);
  }

  /**
   * The command exited; processes it started may still run in its group
   * (a backgrounded job, a script killed before its children). They would
   * work on after the release, outside the lock: SIGTERM, SIGKILL after the
   * grace period (on a lost lock, when the loss's SIGKILL is due), and wait
   * until they are gone.
   */
  private async stopGroup(): Promise<void> {
    if (this.groupRunning()) {
      const killInMs = this.lost ? this.killDelay(this.killAfterMs) : this.killAfterMs;
      diagnose(
        "the command exited but processes it started are still running: sending them SIGTERM " +
          `(SIGKILL in ${formatDuration(killInMs)}) before the lock is released`,
      );
      this.terminate(killInMs);
      const killAt = performance.now() + killInMs;
      for (let pauseMs = groupPollMs; this.groupRunning() && performance.now() < killAt; ) {
        await sleep(Math.min(pauseMs, Math.max(1, killAt - performance.now())));
        pauseMs = Math.min(2 * pauseMs, groupPollMaxMs);
      }
    }
    // SIGKILL whether or not anything was seen: a member forked while /proc
    // was read, whose parent exited before it was looked at, is missed (a
    // chain of processes that each fork and exit), and would run on past
    // the release. A signal to the group reaches every member, one being
    // forked included (the kernel restarts a fork that a group signal
    // meets); a group that is gone gets nothing, and zombies ignore it.
    this.forward("SIGKILL");
    const giveUpAt = performance.now() + reapWaitMs;
    while (this.groupRunning() && performance.now() < giveUpAt) await sleep(groupPollMs);
    if (this.groupRunning())
      diagnose(
        "warning: the command's process group is still not gone after SIGKILL (processes " +
          "redquorum may not signal, another user's? they run on after the release)",
      );
  }
}

export function lockCommand(childArgv: () => readonly string[]): Command {
  return new Command("lock")
    .description(
      "run a command while holding a lock on the resources (a distributed flock): the command " +
        "gets REDQUORUM_RESOURCES (comma-separated), REDQUORUM_FENCES (each one's fencing token, " +
        "in that order) and REDQUORUM_FENCE (the first one's)",
    )
    .usage("[options] <resource...> -- <command> [args...]")
    .argument("<resource...>", "the resources to lock, all or none")
    .addOption(nodesOption())
    .addOption(
      durationOption(
        "--ttl <duration>",
        // The range is checked against --max-ttl in the action (it is another option).
        `lock TTL, renewed while the command runs, ${formatDuration(ttlMinMs)} to --max-ttl (a shorter --max-ttl lowers the default)`,
        "30s",
      ),
    )
    .addOption(maxTtlOption(ttlMinMs))
    .addOption(durationOption("--wait <duration>", "how long to wait for the lock", "10s"))
    .addOption(
      durationOption(
        "--kill-after <duration>",
        "grace period between SIGTERM and SIGKILL (on a lost lock, shortened to end before the lock's validity)",
        "5s",
      ),
    )
    .addOption(nodeTimeoutOption(defaults.nodeTimeoutMs, " (longer on a busy or shared machine)"))
    .action(async (resources: string[], options: LockOptions, command: Command) => {
      const argv = childArgv();
      if (argv.length === 0) {
        throw new UsageError(
          "<command>",
          "give the command to run after --, e.g. `lock jobs -- ./job.sh`",
        );
      }
      // REDQUORUM_RESOURCES and REDQUORUM_FENCES are comma-separated: a
      // name holding a comma would read as two, and the command would pair
      // resources with the wrong tokens.
      const withComma = resources.find((resource) => resource.includes(","));
      if (withComma !== undefined) {
        throw new UsageError(
          "<resource>",
          `${JSON.stringify(withComma)} holds a comma, which REDQUORUM_RESOURCES uses between ` +
            "names: give each resource as its own argument (`lock a b -- …`), without commas",
        );
      }
      // The default TTL fits any --max-ttl: a shorter one is the TTL then.
      if (command.getOptionValueSource("ttl") === "default") {
        options.ttl = Math.min(options.ttl, options.maxTtl);
      }
      if (options.ttl < ttlMinMs || options.ttl > options.maxTtl) {
        throw new UsageError(
          "--ttl",
          `${formatDuration(options.ttl)}: expected ${formatDuration(ttlMinMs)} to ${formatDuration(options.maxTtl)} ` +
            "(--max-ttl; the lock is renewed while the command runs)",
        );
      }
      // The default grace, shortened by a short TTL, is no news; one asked for is.
      const killAfterGiven = command.getOptionValueSource("killAfter") !== "default";
      process.exitCode = await runLocked(resources, argv, options, killAfterGiven);
    });
}

async function runLocked(
  resources: string[],
  argv: readonly string[],
  options: LockOptions,
  killAfterGiven: boolean,
): Promise<number> {
  const redlock = new Redlock(nodesFrom(options), {
    onWarning,
    maxTtlMs: options.maxTtl,
    nodeTimeoutMs: options.nodeTimeout,
  });
  // On a lost lock, --kill-after's grace must end before the validity does:
  // the command is told that much earlier, and extensions start earlier.
  const { schedule, graceMs, endMarginMs } = graceSchedule(
    options.ttl,
    redlock.options,
    options.killAfter,
  );
  if (killAfterGiven && graceMs < options.killAfter) {
    diagnose(
      `note: --kill-after ${formatDuration(options.killAfter)} does not fit in --ttl ${formatDuration(options.ttl)}: ` +
        `if the lock cannot be kept, the command gets SIGKILL ${formatDuration(graceMs)} after SIGTERM, ` +
        "before the lock's validity ends (a longer --ttl leaves more)",
    );
  }
  // Started now, beside the acquire: it must be running before the command is.
  const guard = new LockGuard();
  guard.start(graceMs);
  const run = new ChildRun(
    argv,
    options.killAfter,
    { graceMs, termMarginMs: schedule.marginMs, killMarginMs: endMarginMs },
    guard,
  );
  const interrupted = new AbortController();
  const onSignal = (signal: NodeJS.Signals) => {
    if (run.started) run.forward(signal);
    else interrupted.abort(new InterruptedError(signal));
  };
  for (const signal of forwardedSignals) process.on(signal, onSignal);
  let exitCode: number | undefined;
  try {
    const lock = await redlock.acquire(resources, options.ttl, {
      // --wait 0 is one attempt, as `flock -n` (waitMs counts from first
      // contact with the nodes, which the check timeout bounds).
      waitMs: options.wait,
      // --wait bounds the waiting, not a count of attempts.
      retry: { retries: options.wait > 0 ? limits.retriesMax : 0 },
      signal: interrupted.signal,
    });
    await runKeepingAlive(
      lock,
      async (signal: AbortSignal, lock: Lock) => {
        interrupted.signal.throwIfAborted();
        signal.throwIfAborted();
        signal.addEventListener("abort", () => run.lose(signal.reason), { once: true });
        exitCode = await run.run({
          ...process.env,
          REDQUORUM_FENCE: lock.fence?.toString() ?? "",
          // Tokens count per resource: the first one's means nothing to a
          // store of another. Each resource's, in REDQUORUM_RESOURCES' order.
          REDQUORUM_FENCES: resources.map((r) => lock.fences.get(r)?.toString() ?? "").join(","),
          REDQUORUM_RESOURCES: resources.join(","),
        });
      },
      { ...schedule, onDeadline: (validityLeftMs) => run.schedule(validityLeftMs) },
    );
    return exitCode!;
  } catch (error) {
    if (!run.started) {
      if (error instanceof ResourceLockedError) {
        throw new LockNotAcquiredError(
          options.wait > 0
            ? `could not get the lock within ${formatDuration(options.wait)}: ${error.message}`
            : `could not get the lock at once (--wait 0s): ${error.message}`,
          { cause: error },
        );
      }
      // Granted with too little validity to keep it (slow nodes for this
      // TTL): the command never ran, so this is no loss of a running job
      // (exit 5) but a cluster too slow for --ttl, as an acquire round
      // slower than the TTL is (exit 3).
      if (error instanceof LockLostError) {
        throw new LockExpiredError(
          "acquire",
          resources,
          "the lock was granted with too little validity left to keep it, and given up before " +
            "the command started (it was not run): the nodes answer too slowly to keep a lock " +
            `of --ttl ${formatDuration(options.ttl)}`,
        );
      }
      throw error;
    }
    if (run.lost) return exitCodes.lockLost; // already said why
    if (error instanceof LockExpiredError) {
      diagnose(`the lock ran out before the command ended: ${error.message}`);
      return exitCodes.lockLost;
    }
    // The command ran under the lock; only the release failed (nodes down):
    // the keys expire by themselves within the TTL.
    diagnose(`warning: could not release the lock (it expires within --ttl): ${String(error)}`);
    return exitCode!;
  } finally {
    guard.done();
    for (const signal of forwardedSignals) process.off(signal, onSignal);
    await redlock.close();
  }
}
