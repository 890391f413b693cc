/**
 * Repair of a node that lost a counter, for any kind of counter (IDs,
 * fencing tokens). A node that answered that its counter is gone (or may
 * have come back older) is excluded — its answers do not count — until
 * repaired: after a delay, when no round that might still count its old
 * vote is running, it is raised to the highest value read from
 * `repairReadsOf(N)` = N - Q + 1 other nodes that kept theirs and did not
 * restart since their last repair. Those meet every winning majority in a
 * node other than the lost one, so the repaired value is at least every
 * value handed out.
 *
 * A node that restarted (a new run_id) kept its counter but may have come
 * back older (a restored snapshot, a replica promoted with lag): it is no
 * such witness until repaired itself. With a second loss among a winning
 * majority's nodes (five nodes: one restored from an older snapshot, one
 * flushed), reading it in place of a node that kept the value would raise
 * the lost node too little, and a later token or ID would repeat one
 * handed out. Its value still counts when every other node answered: a
 * winning majority has Q - 1 nodes besides the lost one, and with at most
 * N - Q faulty nodes (the lost one among them) at least 2Q - N >= 1 of
 * those did not lag. So a cluster whose every node restarted at once
 * (each one suspect) still repairs itself once all its nodes are back.
 *
 * `CounterRepair` says what to read and how to raise (the counter's own
 * scripts), `raiseFromOthers` does the reading and raising, and
 * `RepairScheduler` says when: at most one repair per node pending, none
 * once the owner closed.
 */
import type { Clock } from "../clock.js";
import { maxOf } from "../decimal.js";
import type { RedisNode } from "../node/redis-node.js";
import type { NodeGroup } from "./node-group.js";
import { repairReadsOf } from "./round.js";

/** What one of the other nodes holds, for a repair. */
export interface Witness {
  readonly value: bigint;
  /** It restarted and is not repaired yet: it kept its counter, but may have come back older. */
  readonly mayLag: boolean;
}

/** How one kind of counter is read and raised, for the repair of one lost node. */
export interface CounterRepair {
  /**
   * What `node` (one of the others) holds; undefined when it holds no value
   * either (it is not read from), a rejection when it fails.
   */
  readOther(node: RedisNode, index: number): Promise<Witness | undefined>;
  /** Raises the lost node to `value` if the loss it was scheduled for is still current there; whether it was. */
  raise(value: bigint): Promise<boolean>;
}

/**
 * Reads every node but `lostIndex`; with answers from N - Q + 1 that hold a
 * value and may not lag, or from every other node, raises the lost node to
 * their highest. The value it raised the node to, or undefined: too few
 * answers, or the loss was no longer current (someone else repaired it
 * first, or the node lost its data again since).
 */
export async function raiseFromOthers(
  group: NodeGroup,
  lostIndex: number,
  repair: CounterRepair,
  round: { readonly signal: AbortSignal; readonly timeoutMs: number },
): Promise<bigint | undefined> {
  const read = await group.round((node, index) => repair.readOther(node, index), {
    isYes: (value) => value !== undefined,
    // Not read: it is the node being repaired (and may be waiting for its check).
    skip: (index) =>
      index === lostIndex ? Promise.reject(new Error("being repaired")) : undefined,
    stop: "all",
    ...round,
  });
  const needed = repairReadsOf(group.nodes.length);
  const others = group.nodes.length - 1;
  let value = 0n;
  let trusted = 0;
  for (const outcome of read.outcomes) {
    if (outcome?.kind !== "yes") continue;
    value = maxOf(value, outcome.value!.value);
    if (!outcome.value!.mayLag) trusted++;
  }
  const everyOther = others >= needed && read.yesCount === others;
  if (trusted < needed && !everyOther) return undefined;
  return (await repair.raise(value)) ? value : undefined;
}

/** The repairs of one owner's nodes: at most one running per node, each after a delay. */
export class RepairScheduler {
  private readonly running = new Map<number, Promise<void>>();
  private readonly clock: Clock;
  private readonly delayMs: number;
  private readonly lifetime = new AbortController();
  /** Aborted by `stop()` or the owner's signal: the repairs' calls end with it. */
  readonly signal: AbortSignal;

  /**
   * `delayMs`: longer than any round that might count a lost node's old
   * vote; `ownerSignal`: the owner's lifetime, if it has one besides `stop()`.
   */
  constructor(clock: Clock, delayMs: number, ownerSignal?: AbortSignal) {
    this.clock = clock;
    this.delayMs = delayMs;
    this.signal = ownerSignal
      ? AbortSignal.any([ownerSignal, this.lifetime.signal])
      : this.lifetime.signal;
  }

  /** Ends repairs waiting to run, and no new one starts (the owner is closing). */
  stop(reason: unknown): void {
    this.lifetime.abort(reason);
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
