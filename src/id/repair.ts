/**
 * Repair of a node that lost its counter. A node that answered that its
 * counter is gone (or may have come back older) is excluded — its answers
 * do not count — until repaired: after a delay, when no round that might
 * still count its old vote is running, it is raised to the highest value
 * read from `repairReadsOf(N)` = N - Q + 1 other nodes that kept theirs.
 * Those meet every winning majority in a node other than the lost one, so
 * the repaired value is at least every value handed out.
 *
 * The first half knows no counter in particular (`CounterRepair` says what
 * to read and how to raise, `RepairScheduler` when); the second is the ID
 * counter's repair. Who hears of a loss tells `IdRepairs.nodeLost`; who
 * must know the repaired value is told through `onRepaired`.
 */
import type { Clock } from "../clock.js";
import { maxOf } from "../decimal.js";
import type { RedisNode } from "../node/redis-node.js";
import type { Observer } from "../observe.js";
import type { NodeGroup } from "../quorum/node-group.js";
import { repairReadsOf } from "../quorum/round.js";
import {
  type CounterLoss,
  counterStatus,
  counterValueOf,
  evalCounter,
  isAccepted,
  readScript,
  repairReply,
  repairScript,
} from "./counter.js";
import type { CounterKeys } from "./keys.js";
import type { ResolvedNextIdOptions } from "./options.js";

// ---- raising a lost node from the others (any counter) -------------------

/** How one kind of counter is read and raised, for the repair of one lost node. */
export interface CounterRepair {
  /**
   * What `node` (one of the others) holds; undefined when it holds no value
   * either (it is not read from), a rejection when it fails.
   */
  readOther(node: RedisNode, index: number): Promise<bigint | undefined>;
  /** Raises the lost node to `value` if the loss it was scheduled for is still current there; whether it was. */
  raise(value: bigint): Promise<boolean>;
}

/**
 * Reads every node but `lostIndex`; with answers from N - Q + 1 that hold a
 * value, raises the lost node to their highest. The value it raised the
 * node to, or undefined: too few answers, or the loss was no longer current
 * (someone else repaired it first, or the node lost its data again since).
 */
export async function raiseFromOthers(
  group: NodeGroup,
  lostIndex: number,
  repair: CounterRepair,
  round: { readonly signal: AbortSignal; readonly timeoutMs: number },
): Promise<bigint | undefined> {
  const read = await group.round(
    (node, index) =>
      index === lostIndex
        ? Promise.reject(new Error("being repaired"))
        : repair.readOther(node, index),
    { isYes: (value) => value !== undefined, stop: "all", ...round },
  );
  if (read.yesCount < repairReadsOf(group.nodes.length)) return undefined;
  let value = 0n;
  for (const outcome of read.outcomes) {
    if (outcome?.kind === "yes") value = maxOf(value, outcome.value!);
  }
  return (await repair.raise(value)) ? value : undefined;
}

/** The repairs of one owner's nodes: at most one running per node, each after a delay. */
export class RepairScheduler {
  private readonly running = new Map<number, Promise<void>>();
  private readonly clock: Clock;
  private readonly delayMs: number;
  private readonly signal: AbortSignal;

  /** `delayMs`: longer than any round that might count a lost node's old vote; `signal`: the owner's lifetime. */
  constructor(clock: Clock, delayMs: number, signal: AbortSignal) {
    this.clock = clock;
    this.delayMs = delayMs;
    this.signal = signal;
  }

  /**
   * Runs `repair` for node `index` after the delay, unless one is already
   * scheduled for it or the owner closed. A failed repair is dropped: a
   * later reply that reports the loss again schedules another try.
   */
  schedule(index: number, repair: () => Promise<void>): void {
    if (this.running.has(index) || this.signal.aborted) return;
    const running = this.clock
      .sleep(this.delayMs, this.signal)
      .then(repair)
      .catch(() => {})
      .finally(() => this.running.delete(index));
    this.running.set(index, running);
  }

  /** Resolves once every repair scheduled so far has ended (the owner's `close()`). */
  async settled(): Promise<void> {
    await Promise.allSettled(this.running.values());
  }
}

// ---- the ID counter's repair ---------------------------------------------

export interface IdRepairContext {
  readonly group: NodeGroup;
  readonly keys: CounterKeys;
  readonly observer: Observer;
  readonly options: Pick<
    ResolvedNextIdOptions,
    "clock" | "nodeTimeoutMs" | "repairDelayMs" | "onRepair"
  >;
  /** The NextId's lifetime: aborted by `close()`, it stops repairs waiting to run. */
  readonly signal: AbortSignal;
  /** Told each value a node was raised to (at least every ID handed out), before `onRepair`. */
  readonly onRepaired: (value: bigint) => void;
}

/** The repairs of one NextId's counter. */
export class IdRepairs {
  private readonly context: IdRepairContext;
  private readonly scheduler: RepairScheduler;
  private count = 0;

  constructor(context: IdRepairContext) {
    this.context = context;
    const { clock, repairDelayMs } = context.options;
    this.scheduler = new RepairScheduler(clock, repairDelayMs, context.signal);
  }

  /** How many lost node counters have been repaired. */
  get repairedCount(): number {
    return this.count;
  }

  /**
   * Node `index` answered that its counter is gone, in any reply (also one
   * that came after its round had ended: a round won without the node has
   * dropped it, and a slow node that lost its data would otherwise never be
   * repaired).
   */
  nodeLost(index: number, loss: CounterLoss): void {
    this.context.observer.node(
      this.context.group.nodes[index]!.endpoint,
      "needs repair",
      loss.status === counterStatus.suspect ? "restarted (a new run_id)" : "lost its ID counter",
    );
    this.scheduler.schedule(index, () => this.repair(index, loss.token));
  }

  settled(): Promise<void> {
    return this.scheduler.settled();
  }

  private async repair(index: number, token: string): Promise<void> {
    const { group, keys, observer, options, signal } = this.context;
    const timeoutMs = options.nodeTimeoutMs;
    const value = await raiseFromOthers(
      group,
      index,
      {
        // Only nodes that kept their counter hold a value: a node that lost
        // its own is never read from.
        readOther: (node) =>
          evalCounter(node, readScript, keys, []).then((reply) =>
            isAccepted(reply) ? counterValueOf(reply) : undefined,
          ),
        raise: async (raised) => {
          // Through the group, so a node not checked on its connection is checked first.
          const write = await group.round(
            (node, i) =>
              i === index
                ? node.evalScript(repairScript, keys, [raised.toString(), token])
                : Promise.resolve(repairReply.notApplied),
            { isYes: (reply) => reply === repairReply.applied, stop: "all", signal, timeoutMs },
          );
          return write.outcomes[index]?.kind === "yes";
        },
      },
      { signal, timeoutMs },
    );
    if (value === undefined) return;
    const endpoint = group.nodes[index]!.endpoint;
    this.context.onRepaired(value);
    this.count++;
    observer.node(endpoint, "repaired", `ID counter raised to ${value}`);
    options.onRepair({ endpoint, value });
  }
}
