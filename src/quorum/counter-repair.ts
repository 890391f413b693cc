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
 * `RepairScheduler` says when: at most one repair per node pending, each
 * after the delay, also when the owner closes meanwhile (within a bound).
 */
import type { Clock } from "../clock.js";
import { maxOf } from "../decimal.js";
import { limits } from "../limits.js";
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
  /**
   * Raises the lost node to `value` if the loss it was scheduled for is
   * still current there; whether it was. A rejection when the node did not
   * answer.
   */
  raise(value: bigint): Promise<boolean>;
}

/** What `raiseFromOthers` did. */
export type RaiseResult =
  /** Raised the lost node to `value`. */
  | { readonly kind: "raised"; readonly value: bigint }
  /** Nothing to raise: someone else repaired it first, or the node lost its data again since (a later reply reports that loss). */
  | { readonly kind: "not current" }
  /** Too few of the others answered with a value: a later try may do better. */
  | { readonly kind: "too few answers" };

/**
 * Whether a node that lost a counter can be raised from the others'
 * answers: `kept` of them hold a value that may not lag (N - Q + 1 are
 * needed), or every other node (`holding` of them) answered with a value,
 * lagging ones included. Also what `redquorum status` says of such a node.
 */
export function repairableFrom(kept: number, holding: number, nodeCount: number): boolean {
  const needed = repairReadsOf(nodeCount);
  const others = nodeCount - 1;
  return kept >= needed || (others >= needed && holding === others);
}

/**
 * Reads every node but `lostIndex`; with answers from N - Q + 1 that hold a
 * value and may not lag, or from every other node, raises the lost node to
 * their highest. Rejects when the lost node did not answer the raise.
 */
export async function raiseFromOthers(
  group: NodeGroup,
  lostIndex: number,
  repair: CounterRepair,
  round: { readonly signal: AbortSignal; readonly timeoutMs: number },
): Promise<RaiseResult> {
  const read = await group.round((node, index) => repair.readOther(node, index), {
    isYes: (value) => value !== undefined,
    // Not read: it is the node being repaired (and may be waiting for its check).
    skip: (index) =>
      index === lostIndex ? Promise.reject(new Error("being repaired")) : undefined,
    stop: "all",
    ...round,
  });
  let value = 0n;
  let trusted = 0;
  for (const outcome of read.outcomes) {
    if (outcome?.kind !== "yes") continue;
    value = maxOf(value, outcome.value!.value);
    if (!outcome.value!.mayLag) trusted++;
  }
  if (!repairableFrom(trusted, read.yesCount, group.nodes.length)) {
    return { kind: "too few answers" };
  }
  return (await repair.raise(value)) ? { kind: "raised", value } : { kind: "not current" };
}

/**
 * One try of a repair: whether it is done (the node raised, or its loss no
 * longer current there); false or a rejection when it could not be done
 * this time (too few answers, the node did not answer).
 */
export type RepairTry = () => Promise<boolean>;

/**
 * The repairs of one owner's nodes: at most one pending per node, each after
 * a delay. When the owner closes (`finish`), the repairs it scheduled still
 * run, each once its delay is over, within a bound: a short-lived owner (a
 * CLI command, a serverless function) that met a node in need of repair
 * leaves it repaired, instead of dropping the repair and leaving the node
 * out of service until some later client stays open long enough.
 */
export class RepairScheduler {
  /** Per node, its repair scheduled and not yet ended: resolves (never rejects) once it has. */
  private readonly scheduled = new Map<number, Promise<void>>();
  /**
   * Per node, a repair whose try failed while the owner was open and that
   * no later reply has scheduled again: `finish()` tries it again.
   */
  private readonly failed = new Map<number, RepairTry>();
  private readonly clock: Clock;
  private readonly delayMs: number;
  private readonly nodeTimeoutMs: number;
  private readonly lifetime = new AbortController();
  private finishing = false;
  /** Aborted once `finish()` is done, or at its bound: the repairs' calls end with it. */
  readonly signal: AbortSignal;

  /**
   * `delayMs`: longer than any round that might count a lost node's old
   * vote; `nodeTimeoutMs`: the bound on each of a repair's rounds.
   */
  constructor(clock: Clock, delayMs: number, nodeTimeoutMs: number) {
    this.clock = clock;
    this.delayMs = delayMs;
    this.nodeTimeoutMs = nodeTimeoutMs;
    this.signal = this.lifetime.signal;
  }

  /** Whether a repair is scheduled or running. */
  get pending(): boolean {
    return this.scheduled.size > 0;
  }

  /**
   * The longest `finish()` waits: the delay, then a repair's two rounds
   * (each bounded by a node timeout) and a margin.
   */
  get finishBoundMs(): number {
    return this.delayMs + 2 * this.nodeTimeoutMs + limits.closeRepairMarginMs;
  }

  /**
   * Runs `repair` for node `index` after the delay, unless one is already
   * scheduled for it or the owner is closing. A try that fails is not
   * repeated while the owner is open (a later reply that reports the loss
   * again schedules another), only once it closes.
   */
  schedule(index: number, repair: RepairTry): void {
    if (this.scheduled.has(index) || this.finishing) return;
    this.failed.delete(index);
    this.start(index, repair, this.delayMs);
  }

  /**
   * The owner is closing: no new repair is scheduled, and each one
   * scheduled runs when its delay ends, as it would have (the delay keeps
   * its purpose: no round that might count the lost node's old vote is
   * running by then), at most `delayMs` from now; one whose try failed
   * earlier runs at once. Now no later reply would report the loss again:
   * a try that fails is repeated a node timeout later. What still runs
   * `finishBoundMs` from now is stopped (its rounds end with `signal`): a
   * node that stopped answering costs the bound, never a hang. Resolves
   * once every repair has ended.
   */
  async finish(reason: unknown): Promise<void> {
    this.finishing = true;
    for (const [index, repair] of this.failed) this.start(index, repair, 0);
    this.failed.clear();
    if (this.scheduled.size > 0) {
      const bound = new AbortController();
      this.clock
        .sleep(this.finishBoundMs, bound.signal)
        .then(() => this.lifetime.abort(reason))
        .catch(() => {});
      await this.settled();
      bound.abort();
    }
    this.lifetime.abort(reason);
  }

  /** Tries again at once each repair whose try failed (none once finishing: `finish` does). */
  retryFailed(): void {
    if (this.finishing) return;
    for (const [index, repair] of this.failed) {
      if (!this.scheduled.has(index)) this.start(index, repair, 0);
    }
    this.failed.clear();
  }

  /** Resolves once every repair scheduled so far has ended. */
  async settled(): Promise<void> {
    await Promise.all(this.scheduled.values());
  }

  private start(index: number, repair: RepairTry, delayMs: number): void {
    const ended = this.clock
      .sleep(delayMs, this.signal)
      .then(() => this.tries(index, repair))
      .catch(() => {})
      .finally(() => {
        if (this.scheduled.get(index) === ended) this.scheduled.delete(index);
      });
    this.scheduled.set(index, ended);
  }

  private async tries(index: number, repair: RepairTry): Promise<void> {
    for (;;) {
      if (await repair().catch(() => false)) return;
      if (!this.finishing) {
        this.failed.set(index, repair);
        return;
      }
      await this.clock.sleep(this.nodeTimeoutMs, this.signal);
    }
  }
}
