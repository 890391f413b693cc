import { raceAbort, type Timer, timerOf } from "../clock.js";
import {
  ClosedError,
  InvalidArgumentError,
  LockExpiredError,
  QueueFullError,
  RedquorumError,
  ResourceLockedError,
} from "../errors.js";
import { FenceIssuer } from "../fencing/issuer.js";
import {
  fenceCertifyKeys,
  fenceCertifyScript,
  fenceKeyOf,
  fenceScript,
} from "../fencing/scripts.js";
import { limits } from "../limits.js";
import {
  initNodeScript,
  internalKeyPrefix,
  markerKey,
  quarantineKey,
} from "../node/lock-scripts.js";
import { createNodes, type NodeInput } from "../node/resolve.js";
import { type NodeStatus, readNodeStatus } from "../node/status.js";
import { Observer } from "../observe.js";
import { NodeGroup } from "../quorum/node-group.js";
import { nodeErrorsOf, type RoundResult } from "../quorum/round.js";
import { validUntilMs } from "../quorum/validity.js";
import { requireInteger } from "../validate.js";
import type { LockContext } from "./context.js";
import { extendLock } from "./extend.js";
import { handoffOutcome } from "./handoff.js";
import { type InitReport, initNodes } from "./init.js";
import { runKeepingAlive } from "./keep-alive.js";
import { Lock, type LockOwner } from "./lock.js";
import {
  type AcquireOptions,
  type RedlockOptions,
  type ResolvedRedlockOptions,
  requireResources,
  requireTtl,
  resolveAcquireOptions,
  resolveRedlockOptions,
  type UsingOptions,
} from "./options.js";
import { releaseKeys, releaseLock } from "./release.js";
import { Courtesy, ReleaseWatch } from "./release-watch.js";
import {
  acquireArgs,
  acquireKeys,
  acquireScript,
  extendScript,
  guardedRunner,
  isGrantedBy,
  releaseScript,
  type ScriptRunner,
} from "./scripts.js";
import { type Handoff, Waiter, WaitQueues } from "./wait-queue.js";

/**
 * The Redis key of a resource. redquorum keeps its own state (node marker,
 * quarantine, fencing counters, IDs) under "redquorum:": a lock key there
 * could quarantine nodes or corrupt a counter, so such names are refused.
 */
function lockKeyOf(keyPrefix: string, resource: string, index: number): string {
  const key = keyPrefix + resource;
  if (key.startsWith(internalKeyPrefix)) {
    throw new InvalidArgumentError(
      `resources[${index}]`,
      `the key ${JSON.stringify(key)} is in redquorum's own namespace ("${internalKeyPrefix}…": node ` +
        "markers, quarantine, fencing counters, IDs); choose another resource name or keyPrefix",
    );
  }
  return key;
}

function toHex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex");
}

/**
 * Redlock (seed 1) over N independent Redis masters: a lock is granted when
 * a majority set the key within the validity window, measured on the
 * monotonic clock from the start of the round.
 */
export class Redlock implements LockOwner {
  readonly options: ResolvedRedlockOptions;
  private readonly group: NodeGroup;
  private closed = false;
  private closing: Promise<void> | undefined;
  /** Operations running now; `close()` waits for them. */
  private readonly active = new Set<Promise<unknown>>();
  private readonly observer: Observer;
  /** Fencing tokens, and repairs of nodes that lost their counters. */
  private readonly fences: FenceIssuer;
  /** Callers of this instance waiting for a lock, first come first served per key. */
  private readonly waits: WaitQueues;
  /** Keys this instance just released to waiters elsewhere: its next acquire waits a moment. */
  private readonly courtesy: Courtesy;
  /** Fallback timers of parked waiters, on the instance's clock. */
  private readonly timer: Timer;
  /** Releases by other instances, heard through pub/sub for the keys waited for. */
  private readonly watch: ReleaseWatch;
  /** Runs the lock and fencing scripts. */
  private readonly run: ScriptRunner;
  /** What the lock operations use of this instance. */
  private readonly context: LockContext;

  constructor(nodes: readonly NodeInput[], options: RedlockOptions = {}) {
    this.options = resolveRedlockOptions(options);
    this.observer = new Observer(this.options.observe);
    this.group = new NodeGroup(createNodes(nodes), {
      observer: this.observer,
      checkTimeoutMs: this.options.checkTimeoutMs,
      recheckIntervalMs: this.options.recheckIntervalMs,
      graceMs: this.options.nodeTimeoutMs,
      onWarning: this.options.onWarning,
      certify: this.options.fencing
        ? { script: fenceCertifyScript, keys: fenceCertifyKeys }
        : undefined,
      scripts: [acquireScript, extendScript, releaseScript, initNodeScript, fenceScript],
    });
    this.timer = timerOf(this.options.clock);
    this.courtesy = new Courtesy(this.options.clock, limits.courtesyMs);
    const instanceId = toHex(this.options.random.bytes(8));
    // Redis delivers a message to subscribers in the order they subscribed:
    // woken at once, the same instance would win every race for a lock
    // released by another. A random delay of up to a few milliseconds
    // makes the winner random instead.
    this.watch = new ReleaseWatch(this.group.nodes, instanceId, (key) => this.wakeLater(key));
    this.run = guardedRunner({
      observer: this.observer,
      maxTtlMs: this.options.maxTtlMs,
      onMemoryLoss: (index, marker) => this.fences.scheduleRepair(index, marker),
    });
    this.fences = new FenceIssuer({
      group: this.group,
      clock: this.options.clock,
      observer: this.observer,
      nodeTimeoutMs: this.options.nodeTimeoutMs,
      enabled: this.options.fencing,
      quarantineArg: this.quarantineArg,
      run: this.run,
    });
    this.waits = new WaitQueues({
      onWatch: (key) => this.watch.watch(key),
      onUnwatch: (key) => this.watch.unwatch(key),
    });
    this.context = {
      owner: this,
      options: this.options,
      group: this.group,
      run: this.run,
      fences: this.fences,
      quarantineArg: this.quarantineArg,
      waits: this.waits,
      watch: this.watch,
      courtesy: this.courtesy,
      timer: this.timer,
      isClosed: () => this.closed,
      assertOpen: () => this.assertOpen(),
      wakeLater: (key) => this.wakeLater(key),
      track: (operation) => this.track(operation),
    };
  }

  get clock() {
    return this.options.clock;
  }

  get nodeCount(): number {
    return this.group.nodes.length;
  }

  /** Callers of this instance waiting (queued) for a lock now. */
  get waitingCount(): number {
    return this.waits.size;
  }

  /** Majority size: floor(N / 2) + 1. */
  get quorum(): number {
    return this.group.quorum;
  }

  /**
   * Takes all `resources` for `ttlMs`, retrying up to the retry budget,
   * `waitMs` and the signal. Rejects with `ResourceLockedError` when another
   * holder has it, `QuorumError` when too few nodes answered, the signal's
   * reason when aborted, `InvalidArgumentError` before anything is sent.
   */
  acquire(
    resources: readonly string[],
    ttlMs: number,
    options: AcquireOptions = {},
  ): Promise<Lock> {
    return this.track(
      this.counted("acquire", resources, this.acquireLock(resources, ttlMs, options)),
    );
  }

  /** Reports an operation's outcome and duration to `onEvent`, if anyone listens. */
  private counted<T>(
    type: "acquire" | "extend" | "release",
    resources: readonly string[],
    operation: Promise<T>,
  ): Promise<T> {
    if (!this.observer.counting) return operation;
    const startMs = this.options.clock.now();
    const report = (outcome: string) =>
      this.observer.emit({
        type,
        resources,
        outcome,
        durationMs: this.options.clock.now() - startMs,
      });
    operation.then(
      () => report("ok"),
      (error: unknown) => report(error instanceof RedquorumError ? error.code : "error"),
    );
    return operation;
  }

  private async acquireLock(
    resources: readonly string[],
    ttlMs: number,
    options: AcquireOptions,
  ): Promise<Lock> {
    this.assertOpen();
    const names = requireResources(resources);
    const ttl = requireTtl(ttlMs, this.options);
    const { signal, waitMs, retry } = resolveAcquireOptions(options, this.options.retry);
    const { clock, random } = this.options;
    signal?.throwIfAborted();
    const keys = names.map((name, i) => lockKeyOf(this.options.keyPrefix, name, i));
    const fenceKeys = this.options.fencing
      ? names.map((name) => fenceKeyOf(this.options.keyPrefix, name))
      : [];
    const scriptKeys = acquireKeys(keys, fenceKeys);
    const quarantineArg = this.quarantineArg;
    const deadlineMs = waitMs === undefined ? Number.POSITIVE_INFINITY : clock.now() + waitMs;
    // First contact may take up to checkTimeoutMs: the signal and waitMs bound it too.
    await raceAbort(this.group.ready(), signal, deadlineMs - clock.now(), () =>
      this.group.quorumError("acquire (first contact)", undefined),
    );

    // Made on the first wait only: an acquire that never waits (the common
    // case) allocates nothing for the queue.
    let waiter: Waiter | undefined;
    let handoff: Handoff | undefined;
    let failure: Error | undefined;
    let attempt = 0;
    let granted = false;
    // Until it is this caller's turn for a round: woken by a release, handed
    // a release, or its fallback timer (a poll, if no waiter of this
    // instance is ahead; else the turn passes and counts as an attempt).
    const awaitTurn = async (): Promise<void> => {
      if (!waiter) {
        if (this.waits.size >= limits.waitersMax) {
          throw new QueueFullError("Redlock", limits.waitersMax);
        }
        waiter = new Waiter(keys);
        this.waits.add(waiter);
      }
      for (;;) {
        const jitter = retry.jitterMs === 0 ? 0 : random.integer(-retry.jitterMs, retry.jitterMs);
        const delayMs = retry.delayMs + jitter;
        if (clock.now() + delayMs >= deadlineMs) {
          if (failure) throw failure;
          return; // queued from the start: one round before giving up
        }
        this.assertOpen(); // close() ends parks; none may start after it
        const wake = await waiter.park(delayMs, this.timer, signal);
        if (wake.kind === "handoff") {
          handoff = wake.handoff;
          return;
        }
        if (wake.kind === "released" || this.waits.isFirst(waiter)) return;
        if (attempt >= retry.retries) return; // the last attempt is always a round
        attempt++;
      }
    };

    try {
      // A caller that may wait joins the queue behind this instance's
      // waiters for these keys instead of racing them for the next release.
      // After this instance released a lock that waiters elsewhere heard of,
      // its own next acquire of it lets them go first (no barging).
      const courtesyMs = retry.retries > 0 ? this.courtesy.remainingMs(keys[0]!) : 0;
      if (courtesyMs > 0) await clock.sleep(Math.min(courtesyMs, deadlineMs - clock.now()), signal);
      if (retry.retries > 0 && this.waits.hasWaiters(keys)) await awaitTurn();
      for (;;) {
        attempt++;
        const from = handoff;
        handoff = undefined;
        let round: RoundResult<unknown> | undefined;
        try {
          this.assertOpen();
          const value = toHex(random.bytes(limits.lockValueBytes));
          const proposals = this.fences.proposals(fenceKeys);
          // The same arguments go to every node: built once per attempt.
          const args = acquireArgs(value, ttl, quarantineArg, proposals, from?.fromValue);
          const startMs = clock.now();
          round = await this.group.round(
            (node, index) => this.run(node, index, acquireScript, scriptKeys, args),
            {
              isYes: isGrantedBy(fenceKeys.length > 0),
              stop: "decided",
              signal,
              timeoutMs: this.options.nodeTimeoutMs,
            },
          );
          const validUntil = validUntilMs(
            startMs,
            ttl,
            this.options.driftFactor,
            this.options.driftMs,
          );
          const majority = round.yesCount >= this.group.quorum;
          let fences: Map<string, bigint> | undefined = new Map();
          try {
            if (majority && fenceKeys.length > 0 && !round.aborted) {
              fences = await this.fences.commit(
                { names, counterKeys: fenceKeys, scriptKeys, value, proposals },
                round,
                signal,
              );
            }
          } catch (error) {
            // Whatever went wrong, no key of this attempt may outlive it.
            await releaseKeys(this.context, keys, value, "all");
            throw error;
          }
          const valid = validUntil > clock.now();
          if (majority && valid && fences && !this.group.refused && !this.closed) {
            granted = true;
            return new Lock(this, names, keys, value, validUntil, round.yesCount, fences);
          }
          // Seed 1, step 5: undo on every node, also those that seemed to fail
          // (a timed-out SET may have executed). Never cancelled by the signal.
          await releaseKeys(this.context, keys, value, "all");
          if (round.aborted || signal?.aborted) throw signal?.reason;
          if (this.group.refused) throw this.group.refused;
          this.assertOpen();
          failure = !fences
            ? this.group.quorumError("fence", undefined)
            : majority
              ? new LockExpiredError(
                  "acquire",
                  names,
                  `a majority granted ${JSON.stringify(names[0])} but the validity ran out during the ` +
                    `round (TTL ${ttl} ms): nodes answered too slowly for this TTL`,
                )
              : this.acquireFailure(names, round, attempt);
        } finally {
          from?.settle(handoffOutcome(round, granted, this.nodeCount));
        }
        if (attempt > retry.retries) throw failure;
        await awaitTurn();
      }
    } finally {
      if (waiter) this.waits.remove(waiter, !granted);
      handoff?.settle(handoffOutcome(undefined, false, this.nodeCount));
    }
  }

  /**
   * Acquires `resources`, runs `routine(signal, lock)`, extends the lock
   * before it runs out while the routine runs, and releases it at the end,
   * whatever happens; returns the routine's result. If the lock cannot be
   * kept, `signal` aborts with `LockLostError` before its validity ends (and
   * `using` rejects with it); errors thrown by the routine come out unchanged.
   */
  async using<T>(
    resources: readonly string[],
    ttlMs: number,
    routine: (signal: AbortSignal, lock: Lock) => Promise<T>,
    options: UsingOptions = {},
  ): Promise<T> {
    if (typeof routine !== "function") {
      throw new InvalidArgumentError("routine", "expected a function (signal, lock) => Promise");
    }
    const { extendThresholdMs, ...acquireOptions } = options;
    const ttl = requireTtl(ttlMs, this.options);
    // Give up with two node timeouts of validity left, so the abort always
    // comes before the validity ends; extend at half the TTL by default.
    const marginMs = Math.min(
      Math.floor(ttl / 4),
      2 * this.options.nodeTimeoutMs + this.options.driftMs,
    );
    const threshold =
      extendThresholdMs === undefined
        ? Math.floor(ttl / 2)
        : requireInteger("options.extendThresholdMs", extendThresholdMs, marginMs + 1, ttl - 1);
    const lock = await this.acquire(resources, ttl, acquireOptions);
    return runKeepingAlive(lock, routine, {
      ttlMs: ttl,
      extendThresholdMs: Math.max(threshold, marginMs + 1),
      marginMs,
      retryDelayMs: Math.max(1, this.options.nodeTimeoutMs),
    });
  }

  /**
   * Each node as it is now: reachable, PING latency, role, run_id,
   * persistence, eviction policy, marker and quarantine. Never rejects for
   * a failing node: that node is reported unreachable, with the reason.
   */
  status(): Promise<NodeStatus[]> {
    this.assertOpen();
    return this.track(
      Promise.all(
        this.group.nodes.map((node) =>
          readNodeStatus(node, this.options.clock, this.options.checkTimeoutMs, {
            marker: markerKey,
            quarantine: quarantineKey,
          }),
        ),
      ),
    );
  }

  /**
   * Makes a cluster that redquorum has never used ready for its first lock:
   * a client cannot tell a brand-new node from one that restarted empty,
   * whose quarantine it must serve. Safe to call at every start.
   *
   * If no node is in service yet (no node has the marker), every node is
   * marked and any quarantine lifted: this needs every node, and whatever
   * else the nodes hold (application keys, other clients' locks, NextId's
   * keys) does not matter. If some node is in service, the cluster is in
   * use: a node without the marker there lost its memory and must serve its
   * quarantine (and have its fencing counters repaired), so init leaves it
   * alone. Resolves with what it found and did on each node.
   */
  init(): Promise<InitReport[]> {
    this.assertOpen();
    // Tracked: close() waits for it instead of closing connections under it.
    return this.track(initNodes(this.group, this.options.checkTimeoutMs, () => this.assertOpen()));
  }

  /**
   * Closes the connections redquorum opened (a caller's own clients stay
   * open), after the operations still running have ended: an acquire that
   * wins meanwhile releases and rejects with `ClosedError`. Held locks are
   * not released; they expire.
   */
  close(): Promise<void> {
    // A second call gets the first one's promise: it too resolves only once closed.
    this.closing ??= this.closeNow();
    return this.closing;
  }

  private async closeNow(): Promise<void> {
    this.closed = true;
    this.fences.stop(new ClosedError("Redlock"));
    this.waits.abortAll(new ClosedError("Redlock"));
    await Promise.allSettled([...this.active, ...this.fences.running]);
    await this.watch.close();
    await this.group.close();
  }

  /** Alias of `close()`, for node-redlock users. */
  quit(): Promise<void> {
    return this.close();
  }

  /** node-redlock's form of `lock.release()`. */
  release(lock: Lock): Promise<void> {
    if (!(lock instanceof Lock)) {
      return Promise.reject(new InvalidArgumentError("lock", "expected a Lock from acquire()"));
    }
    return lock.release();
  }

  /** node-redlock's form of `lock.extend(ttlMs)`; resolves to the same lock. */
  extend(lock: Lock, ttlMs: number): Promise<Lock> {
    if (!(lock instanceof Lock)) {
      return Promise.reject(new InvalidArgumentError("lock", "expected a Lock from acquire()"));
    }
    return lock.extend(ttlMs);
  }

  /** @internal */
  extendLock(lock: Lock, ttlMs: number, signal: AbortSignal | undefined): Promise<number> {
    const extending = extendLock(this.context, lock, ttlMs, signal);
    return this.counted("extend", lock.resources, extending);
  }

  /** @internal */
  releaseLock(lock: Lock, valid: boolean): Promise<void> {
    // Tracked as a whole: close() waits for it, including a release round
    // that only starts after a handoff failed because of the close.
    const releasing = releaseLock(this.context, lock, !valid);
    return this.track(this.counted("release", lock.resources, releasing));
  }

  /** Wakes the first waiter of `key` after a random 0 to noticeJitterMs. */
  private wakeLater(key: string): void {
    this.timer(this.options.random.integer(0, limits.noticeJitterMs), () => {
      if (!this.closed) this.waits.released([key]);
    });
  }

  private get quarantineArg(): string {
    return this.options.quarantine ? String(this.options.maxTtlMs) : "0";
  }

  /**
   * Why an attempt failed: if more nodes failed than a majority can spare,
   * the cluster is the problem (QuorumError); otherwise enough nodes answered
   * and someone else holds the resource.
   */
  private acquireFailure(
    resources: readonly string[],
    round: RoundResult<unknown>,
    attempt: number,
  ): Error {
    const nodeCount = this.group.nodes.length;
    if (round.errorCount > nodeCount - this.group.quorum || round.noCount === 0) {
      return this.group.quorumError("acquire", round);
    }
    return new ResourceLockedError(
      resources,
      round.noCount,
      nodeCount,
      attempt,
      nodeErrorsOf(round),
    );
  }

  private track<T>(operation: Promise<T>): Promise<T> {
    this.active.add(operation);
    const forget = () => this.active.delete(operation);
    operation.then(forget, forget);
    return operation;
  }

  private assertOpen(): void {
    if (this.closed) throw new ClosedError("Redlock");
  }
}
