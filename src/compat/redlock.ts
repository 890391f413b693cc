/**
 * node-redlock v5's `Redlock` over redquorum's: the same constructor,
 * methods, settings, errors and "error" event, so that a node-redlock
 * program changes its import line and nothing else; underneath, redquorum's
 * validity on the monotonic clock, node timeouts and restart quarantine.
 *
 * Each attempt is one redquorum attempt (no retries of its own); the
 * attempts, their waits (node-redlock's retryDelay ± retryJitter) and
 * their count (retryCount, -1 for no end) are node-redlock's. Before its
 * first lock call an instance runs redquorum's `init()` (see
 * `RedquorumSettings.init`).
 */
import { EventEmitter } from "node:events";
import {
  ClosedError,
  InvalidArgumentError,
  LockExpiredError,
  LockLostError,
  NodeError,
  QuorumError,
  ResourceLockedError,
} from "../errors.js";
import { requireResources, requireTtl } from "../lock/call-arguments.js";
import type { InitReport } from "../lock/init.js";
import { runKeepingAlive } from "../lock/keep-alive.js";
import { type KeepAliveOptions, usingSchedule } from "../lock/keep-alive-schedule.js";
import type { Lock as CoreLock } from "../lock/lock.js";
import { Redlock as CoreRedlock } from "../lock/redlock.js";
import { IoredisTransport, isIoredisLike } from "../node/ioredis-transport.js";
import { endpointOfUrl } from "../node/resolve.js";
import { callHook, type NodeState, type RedquorumEvent } from "../observe.js";
import { requireFunction, requireOptionsObject } from "../validate.js";
import {
  answeredStats,
  type Client,
  ExecutionError,
  type ExecutionResult,
  type ExecutionStats,
  failedStats,
  isVoteFailure,
  type NodeAnswer,
  nodeErrorsOf,
  retryWindowMessage,
} from "./execution.js";
import { Lock, lockOf, stateOf } from "./lock.js";
import {
  dropInNodeTimeoutMs,
  maxAttemptsOf,
  mergeSettings,
  nodeRedlockDefaults,
  type RedlockSettings,
  resolveRedquorumSettings,
  retryWaitMs,
  type Settings,
} from "./settings.js";

/** node-redlock's signal: an AbortSignal with the error that made it abort. */
export type RedlockAbortSignal = AbortSignal & { error?: Error };

/** Each attempt is one round: the drop-in makes the retries. */
const oneAttempt = { retries: 0, delayMs: 0, jitterMs: 0 } as const;

/**
 * Node states worth an "error" event: the node is out of service for this
 * client. Typed by the states redquorum tells, so that no name here can
 * be one it never sends. A stalled node (it answered nothing for a while)
 * is no state: each call to it fails with a NodeError ("stalled: …"),
 * which the operation's "error" events carry, as node-redlock tells a
 * node's failure once per operation.
 */
const outOfService: ReadonlySet<NodeState> = new Set<NodeState>([
  "unreachable",
  "excluded",
  "quarantined",
  "needs repair",
]);

/** How a call's attempts are judged: which failures another attempt may overcome, which are the call's failure. */
interface AttemptRules {
  /** Try again (if attempts are left). */
  readonly retry: (error: unknown) => boolean;
  /** The call failed: an `ExecutionError`; anything else comes out as it is. */
  readonly failure: (error: unknown) => boolean;
}

/**
 * A node-redlock v5 `Redlock`: `acquire`, `release`, `extend` (resolves to
 * a new `Lock`), `using` (3 or 4 arguments, `signal.error`), `quit` (closes
 * the clients too), the "error" event, per-call settings.
 */
export class Redlock extends EventEmitter {
  /** The clients as given, without duplicates. */
  readonly clients: Set<Client>;
  /** The instance's settings (node-redlock's defaults for those not given). */
  readonly settings: Settings;
  private readonly core: CoreRedlock;
  /** The clients in redquorum's order of its nodes. */
  private readonly nodes: readonly Client[];
  /** Clients by the endpoint redquorum's errors name. */
  private readonly byEndpoint = new Map<string, Client>();
  private readonly autoInit: boolean;
  private initialized = false;
  private initializing: Promise<void> | undefined;
  private lastInitMs = Number.NEGATIVE_INFINITY;
  /** The waits between attempts now running: `quit()` ends them. */
  private readonly waits = new Set<() => void>();
  private quitting = false;

  /**
   * `clients`: one per independent Redis master (an ioredis client, as for
   * node-redlock; also a node-redis client or a redis:// URL). `settings`:
   * node-redlock's, and redquorum's options under `redquorum`. `scripts`
   * (node-redlock's custom Lua) is not supported: redquorum runs its own.
   */
  constructor(clients: Iterable<Client>, settings: RedlockSettings = {}, scripts?: object) {
    super();
    // As node-redlock: an "error" event without a listener of the caller's is not a crash.
    this.on("error", () => {});
    if (scripts !== undefined && (scripts === null || Object.keys(scripts).length > 0)) {
      throw new InvalidArgumentError(
        "scripts",
        "custom scripts are not supported: redquorum runs its own (restart quarantine, " +
          "queues); leave out the third argument",
      );
    }
    const given = requireOptionsObject("settings", settings);
    this.settings = mergeSettings("settings", given, nodeRedlockDefaults, ["redquorum"]);
    const { options, init } = resolveRedquorumSettings(given.redquorum);
    this.autoInit = init;
    if (
      clients === null ||
      typeof clients !== "object" ||
      typeof (clients as Iterable<Client>)[Symbol.iterator] !== "function"
    ) {
      throw new InvalidArgumentError(
        "clients",
        "expected an array of Redis clients, one per independent Redis master",
      );
    }
    this.clients = new Set(clients);
    const onEvent =
      options.onEvent === undefined
        ? undefined
        : requireFunction<(event: RedquorumEvent) => void>(
            "settings.redquorum.onEvent",
            options.onEvent,
          );
    const nodes = [...this.clients];
    this.nodes = nodes;
    this.core = new CoreRedlock(nodes, {
      // node-redlock's Lock has no fencing token to carry.
      fencing: false,
      nodeTimeoutMs: dropInNodeTimeoutMs,
      ...options,
      driftFactor: this.settings.driftFactor,
      onEvent: (event) => {
        this.onCoreEvent(event);
        // Guarded as the core guards its hooks: the wrapper returns nothing,
        // so a promise the application's hook returned would go unwatched.
        if (onEvent) callHook(onEvent, undefined, event);
      },
    });
    nodes.forEach((client, index) => {
      const endpoint = endpointOf(client, index);
      if (endpoint !== undefined) this.byEndpoint.set(endpoint, client);
    });
  }

  /**
   * Closes the connections, as node-redlock's `quit()` does: redquorum's
   * own (after the operations running now end; a wait between attempts
   * ends at once) and then each client's, with its `quit()`.
   */
  async quit(): Promise<void> {
    this.quitting = true;
    for (const wake of [...this.waits]) wake();
    await this.core.close();
    await Promise.all(
      [...this.clients].map((client) => {
        const quit = (client as { quit?: unknown }).quit;
        return typeof quit === "function" ? quit.call(client) : undefined;
      }),
    );
  }

  /**
   * Locks `resources` for `duration` milliseconds: up to `retryCount` + 1
   * attempts, `retryDelay` ± `retryJitter` apart. Rejects with
   * `ExecutionError` once they ran out (its `cause`: redquorum's error for
   * the last attempt), with `InvalidArgumentError` for a bad argument.
   */
  async acquire(
    resources: string[],
    duration: number,
    settings?: Partial<Settings>,
  ): Promise<Lock> {
    const merged = this.callSettings(settings);
    this.checkLockArguments(resources, duration);
    await this.ready();
    const { value, attempts } = await this.attempt(
      merged,
      () => this.core.acquire(resources, duration, { retry: oneAttempt }),
      (lock) => this.statsOf(lock),
      { retry: isVoteFailure, failure: isVoteFailure },
    );
    return lockOf(this, value, this.core.clock, attempts, this.extraDriftMs(merged, duration));
  }

  /**
   * Deletes the lock's keys where they still hold its value, in one round
   * (the keys expire anyway). Rejects with `ExecutionError` when fewer than
   * a majority still held it, or its validity had run out before the call.
   */
  async release(lock: Lock, settings?: Partial<Settings>): Promise<ExecutionResult> {
    const state = this.stateFor(lock);
    this.callSettings(settings);
    state.invalidated = true;
    const { attempts } = await this.attempt(
      this.settings,
      () => state.core.release(),
      () => this.quorumStats(),
      { retry: () => false, failure: isVoteFailure },
    );
    return { attempts };
  }

  /**
   * Sets the lock's keys to `duration` again and resolves to a new `Lock`
   * (this one then reads `expiration` 0). Rejects with `ExecutionError`
   * when the lock has expired, is no longer held, or too few nodes answered
   * while it was still valid, `retryCount` + 1 times.
   */
  async extend(existing: Lock, duration: number, settings?: Partial<Settings>): Promise<Lock> {
    const state = this.stateFor(existing);
    const merged = this.callSettings(settings);
    requireTtl(duration, this.core.options);
    if (existing.expiration < Date.now()) {
      throw new ExecutionError("Cannot extend an already-expired lock.", []);
    }
    const { attempts } = await this.attempt(
      merged,
      () => state.core.extend(duration),
      (core) => this.statsOf(core),
      {
        retry: (error) => error instanceof QuorumError && existing.expiration > Date.now(),
        failure: isVoteFailure,
      },
    );
    state.invalidated = true;
    return lockOf(this, state.core, this.core.clock, attempts, this.extraDriftMs(merged, duration));
  }

  /**
   * Acquires `resources`, runs `routine(signal)`, extends the lock once
   * `automaticExtensionThreshold` of it is left, and releases it at the
   * end; resolves to the routine's result. When the lock cannot be kept,
   * `signal` aborts before its validity ends, with `signal.error` saying
   * why, and `using` rejects with that `ExecutionError`. The routine's own
   * errors come out unchanged.
   */
  using<T>(
    resources: string[],
    duration: number,
    settings: Partial<Settings>,
    routine?: (signal: RedlockAbortSignal) => Promise<T>,
  ): Promise<T>;
  using<T>(
    resources: string[],
    duration: number,
    routine: (signal: RedlockAbortSignal) => Promise<T>,
  ): Promise<T>;
  async using<T>(
    resources: string[],
    duration: number,
    settingsOrRoutine: Partial<Settings> | ((signal: RedlockAbortSignal) => Promise<T>),
    optionalRoutine?: (signal: RedlockAbortSignal) => Promise<T>,
  ): Promise<T> {
    const routine = optionalRoutine ?? settingsOrRoutine;
    const merged =
      typeof settingsOrRoutine === "function"
        ? this.settings
        : this.callSettings(settingsOrRoutine);
    if (typeof routine !== "function") {
      throw new InvalidArgumentError("routine", "expected a function (signal) => Promise");
    }
    this.checkLockArguments(resources, duration);
    if (merged.automaticExtensionThreshold > duration - 100) {
      throw new InvalidArgumentError(
        "duration",
        "A lock `duration` must be at least 100ms greater than the `automaticExtensionThreshold` setting.",
      );
    }
    await this.ready();
    // redquorum's using() made of its parts (acquire, then the keep-alive):
    // its schedule must take the call's driftFactor, which redquorum's
    // using() cannot be given, and the granted lock's nodes go to the
    // "error" event as acquire's do. The call's driftFactor takes its share
    // off the validity using keeps, as it does off acquire's lock: the
    // extensions and the give-up point come that much earlier.
    const extraDriftMs = this.extraDriftMs(merged, duration);
    const schedule = this.usingSchedule(duration, merged, extraDriftMs);
    const { value: core } = await this.attempt(
      merged,
      () => this.core.acquire(resources, duration, { retry: oneAttempt }),
      (lock) => this.statsOf(lock),
      { retry: isVoteFailure, failure: isVoteFailure },
    );
    this.reportExtensions(core);

    let thrown: { error: unknown } | undefined;
    let lost: ExecutionError | undefined;
    let reason: unknown;
    const lostError = (cause: unknown) => {
      lost ??= new ExecutionError(
        "The lock could not be extended, and was given up before its validity ended: " +
          (cause instanceof Error ? cause.message : String(cause)),
        [],
        { cause },
      );
      return lost;
    };
    const run = async (signal: AbortSignal) => {
      Object.defineProperty(signal, "error", {
        configurable: true,
        // Read through `aborted`, which also checks the validity left.
        get: () => (signal.aborted ? lostError(signal.reason) : undefined),
      });
      try {
        return await routine(signal as RedlockAbortSignal);
      } catch (error) {
        thrown = { error };
        if (signal.aborted) reason = signal.reason;
        throw error;
      }
    };
    try {
      return await runKeepingAlive(core, run, schedule, this.core);
    } catch (error) {
      if (thrown && error === thrown.error) {
        // The signal's own reason (`signal.throwIfAborted()`, or an API
        // given the signal, rethrown) is the loss, told as node-redlock
        // tells it: the ExecutionError `signal.error` is.
        if (reason !== undefined && error === reason) throw lostError(error);
        throw error;
      }
      if (error instanceof LockLostError) throw lostError(error);
      // The release at the end failed (the lock was lost meanwhile, or too few nodes answered).
      if (isVoteFailure(error)) {
        this.emitFailure(error);
        throw new ExecutionError(`${retryWindowMessage} (release: ${error.message})`, [], {
          cause: error,
        });
      }
      throw error;
    }
  }

  /**
   * When `using` extends a lock of `duration` and gives it up, as
   * redquorum's `using` schedules them, on the validity less `extraDriftMs`
   * (a call's driftFactor above the instance's): node-redlock's
   * `automaticExtensionThreshold` where redquorum can keep it; for a
   * duration too short to extend that late (or that early), redquorum's
   * default.
   */
  private usingSchedule(duration: number, settings: Settings, extraDriftMs: number) {
    const inputs = {
      ...this.core.options,
      driftFactor: Math.max(settings.driftFactor, this.settings.driftFactor),
    };
    let schedule: KeepAliveOptions;
    try {
      schedule = usingSchedule(duration, inputs, Math.floor(settings.automaticExtensionThreshold));
    } catch (error) {
      if (
        !(error instanceof InvalidArgumentError) ||
        error.argument !== "options.extendThresholdMs"
      ) {
        throw error;
      }
      schedule = usingSchedule(duration, inputs, undefined);
    }
    // The keep-alive reads redquorum's validity: both points move up by
    // what the call's drift takes off it.
    return {
      ...schedule,
      extendThresholdMs: schedule.extendThresholdMs + extraDriftMs,
      marginMs: schedule.marginMs + extraDriftMs,
    };
  }

  /**
   * The extensions `using` makes of `core` go to the "error" event as
   * `extend`'s do: node-redlock's `using` extends with its own `extend`,
   * which tells each node that failed.
   */
  private reportExtensions(core: CoreLock): void {
    const extend = core.extend;
    core.extend = (ttlMs, options) =>
      extend.call(core, ttlMs, options).then(
        (extended) => {
          void this.statsOf(core);
          return extended;
        },
        (error: unknown) => {
          if (isVoteFailure(error)) this.emitFailure(error);
          throw error;
        },
      );
  }

  /** A call's settings over the instance's, as node-redlock merges them. */
  private callSettings(settings: unknown): Settings {
    return settings === undefined
      ? this.settings
      : mergeSettings("settings", settings, this.settings);
  }

  /** Checked before anything is sent (also before the first lock call's init). */
  private checkLockArguments(resources: unknown, duration: unknown): void {
    requireResources(resources);
    requireTtl(duration, this.core.options);
  }

  /**
   * A call's `driftFactor` above the instance's: the validity redquorum
   * gives (with the instance's) less the difference, as node-redlock
   * subtracts a call's drift. Below it, the instance's stands.
   */
  private extraDriftMs(settings: Settings, duration: number): number {
    return Math.max(0, (settings.driftFactor - this.settings.driftFactor) * duration);
  }

  private stateFor(lock: Lock) {
    if (!(lock instanceof Lock)) {
      throw new InvalidArgumentError("lock", "expected a Lock from acquire() or extend()");
    }
    const state = stateOf(lock);
    if (!state || lock.redlock !== this) {
      throw new InvalidArgumentError(
        "lock",
        "this Lock was not granted by this Redlock (a Lock made with new Lock() holds nothing)",
      );
    }
    return state;
  }

  /**
   * Runs `attempt` until it succeeds, a failure `rules` do not retry, or
   * the attempts `settings` allow ran out, waiting retryDelay ± retryJitter
   * between them; each failed attempt's errors go to the "error" event.
   */
  private async attempt<T>(
    settings: Settings,
    attempt: () => Promise<T>,
    statsOf: (value: T) => Promise<ExecutionStats>,
    rules: AttemptRules,
  ): Promise<{ value: T; attempts: Promise<ExecutionStats>[] }> {
    const attempts: Promise<ExecutionStats>[] = [];
    const maxAttempts = maxAttemptsOf(settings);
    const { nodeCount, quorum } = this.core;
    for (;;) {
      let value: T;
      try {
        value = await attempt();
      } catch (error) {
        if (!rules.failure(error)) throw error;
        attempts.push(Promise.resolve(failedStats(nodeCount, quorum, error, this.byEndpoint)));
        this.emitFailure(error);
        if (!rules.retry(error) || attempts.length >= maxAttempts || this.quitting) {
          const made = `${attempts.length} attempt${attempts.length === 1 ? "" : "s"}`;
          throw new ExecutionError(
            `${retryWindowMessage} (${made}; the last: ${(error as Error).message})`,
            attempts,
            { cause: error },
          );
        }
        // The instance's random source (injectable, as every other draw).
        const { random } = this.core.options;
        await this.wait(retryWaitMs(settings, () => random.integer(0, 0xffff_fffe) / 0xffff_ffff));
        continue;
      }
      attempts.push(statsOf(value));
      return { value, attempts };
    }
  }

  /**
   * The stats of the round that gave `core` its validity (its grant, or
   * the extension just made), from each node's answer: once every node
   * answered or timed out, at most a node timeout after the grant. The
   * nodes that did not grant go to the "error" event then, as node-redlock
   * tells them.
   */
  private async statsOf(core: CoreLock): Promise<ExecutionStats> {
    // Awaited on the round itself, not on a timer of the same length: on
    // a loaded machine a timer could run before the round had marked a
    // node that never answered as timed out, and left it out of the stats.
    const answers = (await core.allAnswers()) as readonly NodeAnswer[];
    const { resources } = core;
    const nodeCount = this.nodes.length;
    const stats = answeredStats(
      this.nodes,
      this.core.quorum,
      answers,
      () => new ResourceLockedError(resources, 1, nodeCount, 1),
    );
    for (const error of stats.votesAgainst.values()) this.emitError(error);
    return stats;
  }

  /** The stats of a call whose nodes' answers redquorum does not keep (release, using): a majority granted. */
  private quorumStats(): Promise<ExecutionStats> {
    const { quorum } = this.core;
    return Promise.resolve({
      membershipSize: this.nodes.length,
      quorumSize: quorum,
      votesFor: new Set(),
      votesAgainst: new Map(),
      grantedCount: quorum,
      lockedCount: 0,
    });
  }

  /** A wait between attempts; `quit()` ends it at once. */
  private wait(ms: number): Promise<void> {
    if (this.quitting) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waits.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waits.add(done);
    });
  }

  /**
   * A failed attempt on the "error" event, as node-redlock emits each
   * node's: the refusal (a `ResourceLockedError`, once per attempt), and
   * each node that failed.
   */
  private emitFailure(error: unknown): void {
    const nodeErrors = nodeErrorsOf(error);
    if (
      error instanceof ResourceLockedError ||
      error instanceof LockExpiredError ||
      nodeErrors.length === 0
    ) {
      this.emitError(error);
    }
    for (const nodeError of nodeErrors) this.emitError(nodeError);
  }

  /** A node going out of service for this client, as an "error" event. */
  private onCoreEvent(event: RedquorumEvent): void {
    if (event.type !== "node" || !outOfService.has(event.state)) return;
    this.emitError(new NodeError(event.endpoint, new Error(`${event.state}: ${event.detail}`)));
  }

  /**
   * Each "error" listener, called as `emit` would (in order, `once`
   * listeners removed), through the hooks' guard: a listener that throws,
   * or an `async` one whose promise rejects, must not break the lock call
   * nor leave an unhandled rejection. No listener: nothing (node-redlock's
   * "error" events are for those who listen).
   */
  private emitError(error: unknown): void {
    for (const listener of this.rawListeners("error")) {
      callHook(listener as (error: unknown) => unknown, this, error);
    }
  }

  /**
   * redquorum's `init()` before the first lock call: it marks the nodes of
   * a new cluster (otherwise each would serve a restart quarantine, as a
   * node that restarted empty must) and leaves a cluster in use alone.
   * Until a majority is in service it runs again at the next lock call, at
   * most every `recheckIntervalMs`; what it could not do goes to the
   * "error" event, and the lock calls go on (their own errors tell).
   */
  private async ready(): Promise<void> {
    if (!this.autoInit || this.initialized) return;
    if (this.initializing) return this.initializing;
    if (this.core.clock.now() - this.lastInitMs < this.core.options.recheckIntervalMs) return;
    this.initializing = this.initialize().finally(() => {
      this.initializing = undefined;
    });
    return this.initializing;
  }

  private async initialize(): Promise<void> {
    this.lastInitMs = this.core.clock.now();
    let reports: InitReport[];
    try {
      reports = await this.core.init();
    } catch (error) {
      if (!(error instanceof ClosedError)) this.emitError(error);
      return;
    }
    // The drop-in has no fencing: nodes that all serve from a lost: marker
    // (init leaves them unmarked, as their counters are lost everywhere)
    // serve its locks as they are, and init has nothing more to do for it.
    const serving = reports.filter((report) => report.serves !== "none yet");
    if (serving.length >= this.core.quorum) {
      this.initialized = true;
      return;
    }
    const others = reports
      .filter((report) => !serving.includes(report))
      .map(
        (report) => new NodeError(report.endpoint, new Error(`${report.found}: ${report.detail}`)),
      );
    this.emitError(
      new QuorumError("init", this.core.quorum, reports.length, serving.length, others),
    );
  }
}

// Bundled beside redquorum's own Redlock, the bundler renames this class
// ("Redlock2"), which constructor.name and util.inspect would show:
// node-redlock's is "Redlock". (Not esbuild's keepNames: that wraps every
// named closure, on the hot path too.)
Object.defineProperty(Redlock, "name", { value: "Redlock" });

/** The endpoint redquorum names `client` by in its errors, where it can be told. */
function endpointOf(client: Client, index: number): string | undefined {
  if (typeof client === "string") return endpointOfUrl(client, index);
  if (isIoredisLike(client)) return IoredisTransport.endpointOf(client);
  const endpoint = (client as { endpoint?: unknown }).endpoint;
  return typeof endpoint === "string" ? endpoint : undefined;
}
