/**
 * The public Redlock class and its lifecycle: options, the node group, the
 * entry points (acquire, using, extend, release, status, init), counting
 * and tracking operations, and close. Its parts (the node group, wait
 * queues, release watch, fence issuer, script runner) are made in
 * context.ts (and ended there at close) and handed to the operations,
 * which live in acquire.ts, attempt.ts, release.ts, extend.ts,
 * keep-alive.ts (using) and init.ts.
 */

import { ClosedError, InvalidArgumentError } from "../errors.js";
import {
  type FencingFloorOptions,
  type FencingFloorReport,
  raiseFencingFloors,
} from "../fencing/floor.js";
import { fenceFloorKey } from "../fencing/scripts.js";
import { InFlight } from "../in-flight.js";
import { markerKey, quarantineKey, runKey } from "../node/node-state.js";
import type { RedisNode } from "../node/redis-node.js";
import type { NodeInput } from "../node/resolve.js";
import { type NodeStatus, readNodeStatus } from "../node/status.js";
import { Observer } from "../observe.js";
import type { NodeGroup } from "../quorum/node-group.js";
import { requireOptionsObject } from "../validate.js";
import { acquireLock } from "./acquire.js";
import { requireTtl } from "./call-arguments.js";
import {
  createLockContext,
  createLockGroup,
  finishLockContext,
  type LockContext,
} from "./context.js";
import { extendLock } from "./extend.js";
import { QuarantineHorizon } from "./horizon.js";
import { type InitOptions, type InitReport, initNodes } from "./init.js";
import { type KeepAliveHandle, runKeepingAlive } from "./keep-alive.js";
import { usingSchedule } from "./keep-alive-schedule.js";
import { type Extension, Lock, type LockOwner } from "./lock.js";
import {
  type AcquireOptions,
  type RedlockOptions,
  type ResolvedRedlockOptions,
  resolveRedlockOptions,
  type UsingOptions,
} from "./options.js";
import { releaseLock } from "./release.js";

/**
 * Redlock over N independent Redis masters: a lock is granted when
 * a majority set the key within the validity window, measured on the
 * monotonic clock from the start of the round.
 */
export class Redlock implements LockOwner {
  readonly options: ResolvedRedlockOptions;
  private readonly group: NodeGroup;
  private closed = false;
  private closing: Promise<void> | undefined;
  /** @internal The keep-alives of `using` routines running now (close() abandons them). */
  readonly keepAlives = new Set<KeepAliveHandle>();

  /** @internal Whether close() was called. */
  isClosed(): boolean {
    return this.closed;
  }
  /** Operations running now; `close()` waits for them. */
  private readonly active = new InFlight();
  private readonly observer: Observer;
  /** What the lock operations use of this instance: waits, watch, fence issuer, script runner. */
  private readonly context: LockContext;

  constructor(nodes: readonly NodeInput[], options: RedlockOptions = {}) {
    this.options = resolveRedlockOptions(options);
    this.observer = new Observer(this.options.observe);
    const clock = this.options.clock;
    const horizon = new QuarantineHorizon(this.options, this.options.onWarning, () => clock.now());
    const judge = (node: RedisNode, marker: string) => this.context.judge.scheduleFor(node, marker);
    this.group = createLockGroup(nodes, this.options, this.observer, horizon, judge);
    this.context = createLockContext(this, this.options, this.group, horizon, this.observer, {
      isClosed: () => this.closed,
      assertOpen: () => this.assertOpen(),
      track: (operation) => this.track(operation),
    });
  }

  get clock() {
    return this.options.clock;
  }

  get nodeCount(): number {
    return this.group.nodes.length;
  }

  /** Callers of this instance waiting (queued) for a lock now. */
  get waitingCount(): number {
    return this.context.waits.size;
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
    const acquiring = acquireLock(this.context, resources, ttlMs, options);
    return this.track(this.observer.timed("acquire", resources, acquiring, this.clock));
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
    requireOptionsObject("options", options);
    const { extendThresholdMs, ...acquireOptions } = options;
    const ttl = requireTtl(ttlMs, this.options);
    const schedule = usingSchedule(ttl, this.options, extendThresholdMs);
    const lock = await this.acquire(resources, ttl, acquireOptions);
    return runKeepingAlive(lock, routine, schedule, this);
  }

  /**
   * Each node as it is now: reachable, PING latency, role, run_id,
   * persistence, eviction policy, marker and quarantine, and whether it
   * restarted since a client last checked it. Never rejects for
   * a failing node: that node is reported unreachable, with the reason.
   */
  async status(): Promise<NodeStatus[]> {
    this.assertOpen();
    return this.track(
      Promise.all(
        this.group.nodes.map((node) =>
          readNodeStatus(node, this.options.clock, this.options.checkTimeoutMs, {
            marker: markerKey,
            // As init() sees it: "1", or a loss the fencing repair dealt with.
            markerOk: (value) => value === "1",
            repaired: fenceFloorKey,
            quarantine: quarantineKey,
            run: runKey,
          }),
        ),
      ),
    );
  }

  /**
   * Makes a cluster that redquorum has never used ready for its first lock:
   * a client cannot tell a brand-new node from one that restarted empty,
   * whose quarantine it must serve. Safe to call at every start, except
   * after every node lost its memory within the longest maxTtlMs and no
   * client met them since: to the nodes that cluster is new.
   *
   * If no node is in service yet (none marked or repaired), every node is
   * marked when none has a marker (a new cluster). This needs every node,
   * and whatever else the nodes hold (application keys, other clients'
   * locks, NextId's keys) does not matter. When each serves locks from a
   * marker that says it lost its memory and nothing repaired, init marks
   * nothing: fresh counters would hand out fencing tokens from 1 again
   * (raise the fencing floor first, or pass `liftQuarantines` for nodes
   * that never held a fenced lock). A quarantine running anywhere is left
   * to run (a node in it may have forgotten a lock still held), and init
   * marks nothing until it is over, unless `liftQuarantines` says the
   * nodes are new. If some node is
   * in service, the cluster is in use: a node that lost its memory serves
   * its quarantine (and has its fencing counters repaired), so init leaves
   * it alone. Resolves with what it found and did on each node.
   */
  async init(options?: InitOptions): Promise<InitReport[]> {
    this.assertOpen();
    // Tracked: close() waits for it instead of closing connections under it.
    const context = {
      group: this.group,
      timeoutMs: this.options.checkTimeoutMs,
      judge: this.context.judge,
      assertOpen: () => this.assertOpen(),
    };
    return this.track(
      initNodes(context, options).then(async (reports) => {
        // The cluster's membership (docs/membership.md): recorded once
        // every node answers; on a cluster that has one, the list is
        // checked against it (a MembershipError if it does not fit).
        await this.group.recordMembership(this.options.checkTimeoutMs);
        return reports;
      }),
    );
  }

  /**
   * The way out when fencing counters cannot be repaired: more than N - Q
   * nodes lost their memory before any repair, so too few others know the
   * highest token issued, and fenced grants are refused for good. Give a
   * value at least every fencing token issued on this cluster (the highest
   * token the protected resource accepted is not enough by itself: a
   * holder may have a higher one it has not presented; add a margin larger
   * than the grants made since): each node whose counters
   * are unknown takes it (or the highest value a node still knows, if
   * higher) as its floor, and every token issued after is above it. A
   * value too low can let a token go backwards: only the resource knows.
   * Quarantines still run their course. Nodes that all lost the
   * membership record are taken back under the one this client holds,
   * which lock and ID calls never do: call it with the cluster's members
   * (given a list whose nodes were removed and emptied, it would make
   * them a cluster of their own).
   * Resolves with what it found and did on each node.
   */
  async raiseFencingFloor(options: FencingFloorOptions): Promise<FencingFloorReport[]> {
    this.assertOpen();
    const context = {
      group: this.group,
      timeoutMs: this.options.checkTimeoutMs,
      assertOpen: () => this.assertOpen(),
      onUnjudged: (index: number, marker: string) => {
        if (this.options.quarantine) this.context.judge.schedule(index, marker);
      },
    };
    return this.track(raiseFencingFloors(context, options));
  }

  /**
   * Closes the connections redquorum opened (a caller's own clients stay
   * open), after the operations still running have ended: an acquire that
   * wins meanwhile releases and rejects with `ClosedError`. Held locks are
   * not released; they expire. The fencing repairs and quarantine
   * judgements this instance scheduled run first, each when its delay
   * ends, so a short-lived client leaves the nodes it found in need of
   * them dealt with: at most `repairDelayMs`, two node timeouts and
   * `limits.closeRepairMarginMs` more.
   */
  close(): Promise<void> {
    // A second call gets the first one's promise: it too resolves only once closed.
    this.closing ??= this.closeNow();
    return this.closing;
  }

  private async closeNow(): Promise<void> {
    this.closed = true;
    // Routines of `using` still running: their locks cannot be extended
    // any more; their signals say so now, and their timers end.
    for (const keeper of this.keepAlives) keeper.abandon(new ClosedError("Redlock"));
    // A kept release's pass not run yet runs now (tracked, so awaited below):
    // other instances' waiters must still be told the key is theirs. One
    // held by an attempt runs when that attempt fails, as it now will.
    this.context.turns.passAll();
    this.context.waits.abortAll(new ClosedError("Redlock"));
    // Also what those started meanwhile (a pass run when a held attempt failed).
    await this.active.settled();
    await finishLockContext(this.context);
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
  extendLock(lock: Lock, ttlMs: number, signal: AbortSignal | undefined): Promise<Extension> {
    const extending = extendLock(this.context, lock, ttlMs, signal);
    return this.observer.timed("extend", lock.resources, extending, this.clock);
  }

  /** @internal */
  releaseLock(lock: Lock, valid: boolean): Promise<void> {
    // Tracked as a whole: close() waits for it, including a release round
    // that only starts after a handoff failed because of the close.
    const releasing = releaseLock(this.context, lock, !valid);
    return this.track(this.observer.timed("release", lock.resources, releasing, this.clock));
  }

  private track<T>(operation: Promise<T>): Promise<T> {
    return this.active.add(operation);
  }

  private assertOpen(): void {
    if (this.closed) throw new ClosedError("Redlock");
  }
}
