/**
 * What the lock operations (acquire, release, extend) share of the Redlock
 * instance that runs them, how it is put together and, at close, how its
 * parts end. The instance makes one context and passes it in; each
 * operation names the part it uses (`Pick<LockContext, ...>`), so no
 * operation imports the class back, and what it may touch is written down.
 */

import { type Timer, timerOf } from "../clock.js";
import { ClosedError } from "../errors.js";
import { FenceIssuer } from "../fencing/issuer.js";
import {
  fenceFloorScript,
  fenceKeyOf,
  fenceMaxReadScript,
  fenceRepairScript,
  fenceScript,
} from "../fencing/scripts.js";
import { limits, releaseNoticeLimits } from "../limits.js";
import { keepsEveryWrite } from "../node/durability.js";
import { initNodeScript, quarantineArgOf } from "../node/node-state.js";
import type { RedisNode } from "../node/redis-node.js";
import { createNodes, type NodeInput } from "../node/resolve.js";
import type { Observer } from "../observe.js";
import { NodeGroup } from "../quorum/node-group.js";
import { nodeGroupOptionsOf } from "../shared-options.js";
import { acquireScript } from "./acquire-script.js";
import { extendScript } from "./extend-script.js";
import { HeirWatch } from "./heir-watch.js";
import type { QuarantineHorizon } from "./horizon.js";
import type { LockOwner } from "./lock.js";
import type { ResolvedRedlockOptions } from "./options.js";
import { QuarantineJudge } from "./quarantine-judge.js";
import {
  certifyKeys,
  certifyScript,
  horizonReadScript,
  judgeQuarantineScript,
} from "./quarantine-scripts.js";
import { waiterIdOf } from "./queue-keys.js";
import { randomHex } from "./random-hex.js";
import { releaseScript } from "./release-script.js";
import { guardedRunner, type ScriptRunner } from "./script-runner.js";
import { Turns } from "./turns.js";
import { WaitQueues } from "./wait-queue.js";

export interface LockContext {
  /** What granted locks call back (the Redlock itself). */
  readonly owner: LockOwner;
  readonly options: ResolvedRedlockOptions;
  readonly group: NodeGroup;
  /** Runs the lock and fencing scripts (guardedRunner). */
  readonly run: ScriptRunner;
  readonly fences: FenceIssuer;
  /** Judges how long a lost node's quarantine lasts, from the other nodes. */
  readonly judge: QuarantineJudge;
  /** ARGV[3] of the acquire, extend and fence scripts (node/node-state.ts, quarantineArgOf). */
  readonly quarantineArg: string;
  /** Callers of this instance waiting for a lock, first come first served per key. */
  readonly waits: WaitQueues;
  /** Hears through pub/sub that a node named one of our waiters the heir of a release. */
  readonly watch: HeirWatch;
  /** How long this instance may keep retaking a key it releases (turns.ts). */
  readonly turns: Turns;
  /** Numbers this instance's waiters in the nodes' queues. */
  nextWaiterId(): string;
  /** Fallback timers of parked waiters, on the instance's clock. */
  readonly timer: Timer;
  /** Whether `close()` was called. */
  isClosed(): boolean;
  /** Throws `ClosedError` once `close()` was called. */
  assertOpen(): void;
  /** Wakes the first waiter of `key` a random moment later (as a release notice would). */
  wakeLater(key: string): void;
  /** Lets `close()` wait for `operation`. */
  track<T>(operation: Promise<T>): Promise<T>;
}

/** The instance's lifecycle, as the operations see it. */
export type Lifecycle = Pick<LockContext, "isClosed" | "assertOpen" | "track">;

/**
 * The parts of a Redlock over `group`: the script runner, whose reports of
 * a node's memory loss go to the fence issuer's repairs; the heir watch,
 * whose notices wake the waiter a node named; the wait queues, whose first
 * waiter starts the watch.
 */
export function createLockContext(
  owner: LockOwner,
  options: ResolvedRedlockOptions,
  group: NodeGroup,
  horizon: QuarantineHorizon,
  observer: Observer,
  lifecycle: Lifecycle,
): LockContext {
  const { clock, random } = options;
  const timer = timerOf(clock);
  const run = guardedRunner({
    observer,
    get quarantineMs() {
      return horizon.ms;
    },
    onMemoryLoss: (index, marker) => fences.scheduleRepair(index, marker),
    onUnjudged: (index, marker) => judge.schedule(index, marker),
  });
  const quarantineArg = quarantineArgOf(options.quarantine);
  const judge = new QuarantineJudge({
    group,
    clock,
    observer,
    nodeTimeoutMs: options.nodeTimeoutMs,
    knownMs: () => horizon.ms,
  });
  const fences = new FenceIssuer({
    group,
    clock,
    observer,
    nodeTimeoutMs: options.nodeTimeoutMs,
    repairDelayMs: options.repairDelayMs,
    enabled: options.fencing,
    quarantineArg,
    run,
    // A client that waits quarantines out judges them (as a check's loss).
    onUnjudged: (index, marker) => {
      if (options.quarantine) judge.schedule(index, marker);
    },
  });
  // Redis delivers a message to subscribers in the order they subscribed:
  // woken at once, the same instance would win every race for a lock
  // released by another. A random delay of up to a few milliseconds
  // makes the winner random instead.
  const wakeLater = (key: string) => {
    timer(random.integer(0, limits.noticeJitterMs), () => {
      if (!lifecycle.isClosed()) waits.released([key]);
    });
  };
  const watch = new HeirWatch({
    nodes: group.nodes,
    instanceId: randomHex(random, releaseNoticeLimits.instanceIdBytes),
    quorum: group.quorum,
    windowMs: limits.heirNoticeWindowMs,
    now: () => clock.now(),
    timer,
    onHeir: (waiterId, fence) => {
      const waiter = waits.wakeHeir(waiterId);
      // Its proposal goes above the counter the release saw: no stale round.
      // (A notice does not say which key it is for: a multi-key waiter's
      // counters are learnt from its rounds.)
      if (waiter?.keys.length === 1 && fence !== undefined && options.fencing) {
        fences.noteCounter(fenceKeyOf(waiter.keys[0]!), fence);
      }
    },
    // Each waiter whose turn it is tries once: a release meanwhile may
    // have named it heir and told nobody, and its key waits for it (until
    // the reservation lapses, and then for the next poll).
    onNoticesLost: () => waits.wakeHeads(),
  });
  // The instance's channel stays subscribed from the first wait until close().
  const waits = new WaitQueues({ onWatch: () => watch.listen() });
  let waiterCount = 0;
  const nextWaiterId = () => waiterIdOf(watch.instanceId, ++waiterCount);
  return {
    owner,
    options,
    group,
    run,
    fences,
    judge,
    quarantineArg,
    waits,
    watch,
    turns: new Turns(options.turnMs),
    nextWaiterId,
    timer,
    wakeLater,
    ...lifecycle,
  };
}

/**
 * The end of a closing instance's parts, once its operations have ended,
 * in the order their wiring asks: the repairs and judgements they
 * scheduled, then the pub/sub connections, then the nodes.
 */
export async function finishLockContext(
  context: Pick<LockContext, "group" | "fences" | "judge" | "watch">,
): Promise<void> {
  const { group } = context;
  // A late reply of an ended round may still report a node's loss: heard,
  // it is repaired (or judged) too. The fencing repairs and quarantine
  // judgements scheduled run now, each when its delay ends (bounded), so
  // a short-lived client leaves the nodes it met repaired.
  await group.idle();
  // The judgements end last: a fencing repair's rounds may check a node
  // again (a reconnect) and meet a loss there, which is judged too.
  const repaired = context.fences.finish(new ClosedError("Redlock"));
  await Promise.all([repaired, context.judge.finish(new ClosedError("Redlock"), repaired)]);
  await context.watch.close();
  await group.close();
}

/**
 * The nodes of a Redlock: every (re)check certifies the node (a restart
 * from data that may be older is put in the quarantine, and its fencing
 * state out until repaired) and learns the longest maxTtlMs recorded on
 * it; the lock, fencing and quarantine scripts are loaded on it.
 */
export function createLockGroup(
  nodes: readonly NodeInput[],
  options: ResolvedRedlockOptions,
  observer: Observer,
  horizon: QuarantineHorizon,
  onUnjudged: (node: RedisNode, marker: string) => void,
): NodeGroup {
  return new NodeGroup(
    createNodes(nodes, options.nodeStallMs),
    nodeGroupOptionsOf(options, observer, {
      certify: {
        script: certifyScript,
        keys: certifyKeys,
        args: async (node, timeoutMs) => [
          (await keepsEveryWrite(node, timeoutMs)) ? "1" : "0",
          ...horizon.recordArgs,
        ],
        // The longest maxTtlMs recorded on the node: the quarantine's
        // length; and a loss the check found waiting for its judgement,
        // judged by a client that waits quarantines out (one with it off
        // judges none): a check may be a closing client's last call there.
        onReply: (node, reply) => {
          horizon.learn(node.endpoint, Array.isArray(reply) ? reply[1] : undefined);
          const marker = Array.isArray(reply) ? reply[2] : undefined;
          if (options.quarantine && typeof marker === "string" && marker !== "") {
            onUnjudged(node, marker);
          }
        },
      },
      // The repairs' and the judge's too: a script's NOSCRIPT retry is not
      // sent after a later command (node/redis-node.ts), and repairs and
      // judgements of several nodes run side by side.
      scripts: [
        acquireScript,
        extendScript,
        releaseScript,
        initNodeScript,
        fenceScript,
        fenceMaxReadScript,
        fenceRepairScript,
        fenceFloorScript,
        horizonReadScript,
        judgeQuarantineScript,
      ],
    }),
  );
}
