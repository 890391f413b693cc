import { assert } from "../assert.js";
import { raceAbort } from "../clock.js";
import { maxId, maxOf } from "../decimal.js";
import {
  AlreadyInitializedError,
  ClosedError,
  ContentionError,
  IdOverflowError,
  NodeError,
  NotInitializedError,
  QueueFullError,
  QuorumError,
  RedquorumError,
} from "../errors.js";
import { checkDurability } from "../node/durability.js";
import type { LuaScript } from "../node/lua-script.js";
import type { RedisNode } from "../node/redis-node.js";
import { createNodes, type NodeInput } from "../node/resolve.js";
import { type NodeStatus, readNodeStatus } from "../node/status.js";
import { Observer } from "../observe.js";
import { NodeGroup } from "../quorum/node-group.js";
import { nodeErrorsOf, type RoundResult } from "../quorum/round.js";
import { requireSignal } from "../validate.js";
import {
  type CounterKeys,
  type CounterReply,
  certifyKeys,
  certifyScript,
  checkedReply,
  counterKeys,
  counterScripts,
  counterValueOf,
  holdsCounter,
  initScript,
  isAccepted,
  lossOf,
  lossReason,
  markerHeld,
  needsRepair,
  proposeScript,
  readScript,
  statusOf,
} from "./counter.js";
import {
  idLimits,
  type NextIdOptions,
  type ResolvedNextIdOptions,
  requireBatchCount,
  resolveNextIdOptions,
} from "./options.js";
import { IdRepairs } from "./repair.js";

interface Waiter {
  readonly count: number;
  readonly resolve: (ids: bigint[]) => void;
  readonly reject: (error: unknown) => void;
  readonly signal: AbortSignal | undefined;
  readonly onAbort: (() => void) | undefined;
  failedRounds: number;
  done: boolean;
}

/** What a lost round says about why it was lost. */
interface RoundFailure {
  error: RedquorumError;
  /**
   * Only refusals: other writers had moved the counter past our proposal.
   * We now know their values, so the next round goes at once, higher; a
   * split vote or failing nodes back off instead.
   */
  stale: boolean;
}

/**
 * Strictly increasing, never repeated IDs agreed by a majority of N
 * independent Redis masters (seed 2), made fast:
 *
 * - one round trip per round: the conditional write answers the node's
 *   value when it refuses and its previous value when it accepts, so the next
 *   proposal needs no read round;
 * - a round that wins on a majority S with proposal v owns the IDs
 *   (max previous on S, v]: two winning rounds share a node, where the later
 *   one saw the earlier one's v, so their ranges are disjoint and ordered;
 * - group commit: calls that arrived before a round was sent share its
 *   range; calls that arrive while it is in flight wait for a later round
 *   (handing them this round's IDs could break real-time order);
 * - rounds are pipelined on each node's connection, whose order the node
 *   keeps; a later round proposes above every earlier proposal.
 */
export class NextId {
  readonly options: ResolvedNextIdOptions;
  private readonly group: NodeGroup;
  private readonly keys: CounterKeys;
  private readonly queue: Waiter[] = [];
  /** Highest counter value seen on any node, or accepted by one. */
  private knownMax = 0n;
  /** Highest proposal sent (used while rounds are in flight). */
  private proposedMax = 0n;
  /** Send order of rounds, and the latest-sent winning round so far (for the order assertion). */
  private roundsSent = 0;
  private lastWinner = { sequence: 0, proposal: 0n };
  private roundsInFlight = 0;
  private pumpScheduled = false;
  private consecutiveLosses = 0;
  /** Lost rounds in a row that were only refused (stale proposals). */
  private staleLosses = 0;
  private backoff: Promise<void> | undefined;
  private readonly repairs: IdRepairs;
  private readonly lifetime = new AbortController();
  /** Rounds in flight; `close()` waits for them before closing connections. */
  private readonly rounds = new Set<Promise<void>>();
  private closed = false;
  private closing: Promise<void> | undefined;
  private readonly observer: Observer;

  constructor(nodes: readonly NodeInput[], options: NextIdOptions = {}) {
    this.options = resolveNextIdOptions(options);
    this.keys = counterKeys(this.options.key);
    this.observer = new Observer(this.options.observe);
    this.group = new NodeGroup(createNodes(nodes), {
      observer: this.observer,
      checkTimeoutMs: this.options.checkTimeoutMs,
      recheckIntervalMs: this.options.recheckIntervalMs,
      graceMs: this.options.nodeTimeoutMs,
      onWarning: this.options.onWarning,
      extraCheck: this.options.unsafeAllowNonDurableNodes ? undefined : checkDurability,
      certify: { script: certifyScript, keys: certifyKeys(this.options.key) },
      scripts: counterScripts,
    });
    this.repairs = new IdRepairs({
      group: this.group,
      keys: this.keys,
      observer: this.observer,
      options: this.options,
      signal: this.lifetime.signal,
      onRepaired: (value) => {
        this.knownMax = maxOf(this.knownMax, value);
      },
    });
  }

  get nodeCount(): number {
    return this.group.nodes.length;
  }

  /** Each node as events and errors name it (`host:port`), in the order given. */
  get endpoints(): string[] {
    return this.group.nodes.map((node) => node.endpoint);
  }

  get quorum(): number {
    return this.group.quorum;
  }

  /** How many lost node counters this instance has repaired. */
  get repairedCount(): number {
    return this.repairs.repairedCount;
  }

  /** One new ID, larger than every ID any caller had received before this call. */
  async next(options: { signal?: AbortSignal } = {}): Promise<bigint> {
    const [id] = await this.nextBatch(1, options);
    return id!;
  }

  /** `count` new IDs, strictly increasing, all larger than every ID handed out before this call. */
  async nextBatch(count: number, options: { signal?: AbortSignal } = {}): Promise<bigint[]> {
    this.assertOpen();
    const n = requireBatchCount(count);
    const signal = requireSignal("options.signal", options?.signal);
    signal?.throwIfAborted();
    await raceAbort(this.group.ready(), signal);
    this.assertOpen();
    if (this.options.strategy === "seed") return this.seedBatch(n, signal);
    return this.enqueue(n, signal);
  }

  /**
   * Initialises the counter on a new cluster: 0 and the marker on every node
   * (seed 2's `SET current 0`). Needs every node, and is refused when any
   * node's counter already handed out IDs.
   */
  async init(): Promise<void> {
    this.assertOpen();
    await this.group.ready();
    const timeoutMs = this.options.nodeTimeoutMs;
    const reads = await this.group.round(
      (node, index) => this.runCounterScript(node, index, readScript, []),
      {
        isYes: () => true,
        stop: "all",
        timeoutMs,
      },
    );
    this.requireAll("init", reads);
    const holding = this.group.nodes
      .filter((_, i) => {
        const outcome = reads.outcomes[i];
        return (
          outcome?.kind === "yes" && isAccepted(outcome.value) && counterValueOf(outcome.value) > 0n
        );
      })
      .map((node) => node.endpoint);
    if (holding.length > 0) throw new AlreadyInitializedError(this.options.key, holding);
    const writes = await this.group.round((node) => node.evalScript(initScript, this.keys, []), {
      isYes: isAccepted,
      stop: "all",
      timeoutMs,
    });
    const refused = this.group.nodes.filter((_, i) => writes.outcomes[i]?.kind === "no");
    if (refused.length > 0) {
      throw new AlreadyInitializedError(
        this.options.key,
        refused.map((node) => node.endpoint),
      );
    }
    this.requireAll("init", writes);
  }

  /**
   * Each node as it is now, for IDs: reachable, PING latency, role, run_id,
   * persistence, and `marker`: whether the counter's marker says the node
   * holds its counter (false after a loss, or "suspect" after a restart,
   * until repaired). Never rejects for a failing node: it is reported
   * unreachable, with the reason.
   */
  status(): Promise<NodeStatus[]> {
    this.assertOpen();
    return Promise.all(
      this.group.nodes.map((node) =>
        readNodeStatus(node, this.options.clock, this.options.checkTimeoutMs, {
          marker: this.keys[1],
          markerOk: (value) => value === markerHeld,
        }),
      ),
    );
  }

  /**
   * Stops: calls still waiting reject with `ClosedError`, rounds in flight
   * finish (each bounded by the node timeout), repairs stop, connections
   * redquorum opened are closed.
   */
  close(): Promise<void> {
    // A second call gets the first one's promise: it too resolves only once closed.
    this.closing ??= this.closeNow();
    return this.closing;
  }

  private async closeNow(): Promise<void> {
    this.closed = true;
    this.lifetime.abort(new ClosedError("NextId"));
    for (const waiter of this.queue.splice(0)) this.settle(waiter, new ClosedError("NextId"));
    await Promise.allSettled([...this.rounds, this.repairs.settled()]);
    // Calls a round could not serve were put back in the queue meanwhile.
    for (const waiter of this.queue.splice(0)) this.settle(waiter, new ClosedError("NextId"));
    await this.group.close();
  }

  // ---- range strategy: group commit -------------------------------------

  private enqueue(count: number, signal: AbortSignal | undefined): Promise<bigint[]> {
    if (this.queue.length >= idLimits.queueLengthMax) {
      return Promise.reject(new QueueFullError("NextId", idLimits.queueLengthMax));
    }
    return new Promise((resolve, reject) => {
      const onAbort = signal
        ? () => {
            const index = this.queue.indexOf(waiter);
            if (index >= 0) this.queue.splice(index, 1);
            this.settle(waiter, signal.reason);
          }
        : undefined;
      const waiter: Waiter = {
        count,
        resolve,
        reject,
        signal,
        onAbort,
        failedRounds: 0,
        done: false,
      };
      signal?.addEventListener("abort", onAbort!, { once: true });
      this.queue.push(waiter);
      this.schedulePump();
    });
  }

  /**
   * Group commit: the round starts at the end of the tick, so every call
   * made in the same tick (say, all the callers a finished round just
   * resumed) shares it, instead of the first one taking a round alone. The
   * connection would only send it at the end of the tick anyway.
   */
  private schedulePump(): void {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    process.nextTick(() => {
      this.pumpScheduled = false;
      this.pump();
    });
  }

  /** Starts rounds for waiting calls while the pipeline has room and no backoff runs. */
  private pump(): void {
    while (
      !this.closed &&
      this.queue.length > 0 &&
      this.roundsInFlight < this.options.pipelineDepth &&
      this.backoff === undefined
    ) {
      let ids = 0;
      let take = 0;
      while (
        take < this.queue.length &&
        (take === 0 || ids + this.queue[take]!.count <= idLimits.roundIdsMax)
      ) {
        ids += this.queue[take]!.count;
        take++;
      }
      this.startRound(this.queue.splice(0, take), ids);
    }
  }

  private startRound(batch: Waiter[], ids: number): void {
    // Above our own rounds still in flight (or nodes that accepted them would
    // refuse this one); with none in flight, what the nodes said is enough.
    const base = this.roundsInFlight > 0 ? maxOf(this.knownMax, this.proposedMax) : this.knownMax;
    const proposal = base + BigInt(ids) + this.leapMargin(ids);
    if (proposal > maxId) {
      for (const waiter of batch)
        this.settle(waiter, new IdOverflowError(base, waiter.count, maxId));
      return;
    }
    this.proposedMax = proposal;
    this.roundsInFlight++;
    const sequence = ++this.roundsSent;
    const startMs = this.observer.counting ? this.options.clock.now() : 0;
    const round: Promise<void> = this.propose(proposal)
      .then(
        (result) => {
          if (this.observer.counting) {
            this.observer.emit({
              type: "id-round",
              outcome: result.yesCount >= this.group.quorum ? "won" : "lost",
              ids,
              durationMs: this.options.clock.now() - startMs,
            });
          }
          this.finishRound(batch, proposal, result, sequence);
        },
        (error: unknown) => this.loseRound(batch, { error: asRedquorumError(error), stale: false }),
      )
      // A bug (a failed assertion) must still settle every call of the round.
      .catch((error: unknown) => {
        for (const waiter of batch) this.settle(waiter, error);
      })
      .finally(() => {
        this.roundsInFlight--;
        this.rounds.delete(round);
        this.pump();
      });
    this.rounds.add(round);
  }

  private propose(proposal: bigint): Promise<RoundResult<unknown>> {
    const args = [proposal.toString(), this.options.unsafeSkipMarkerCheck ? "1" : "0"];
    return this.group.round(
      (node, index) => this.runCounterScript(node, index, proposeScript, args),
      {
        isYes: isAccepted,
        // A lost round waits for every answer: each refusal carries a node's
        // value, and knowing all of them makes the next proposal win.
        stop: "won",
        timeoutMs: this.options.nodeTimeoutMs,
      },
    );
  }

  private finishRound(
    batch: Waiter[],
    proposal: bigint,
    round: RoundResult<unknown>,
    sequence: number,
  ): void {
    const previousMax = this.learn(round, proposal);
    if (round.yesCount < this.group.quorum) {
      this.loseRound(batch, this.failureOf("next", round));
      return;
    }
    this.consecutiveLosses = 0;
    this.staleLosses = 0;
    // The round owns (previousMax, proposal]. Calls are served in arrival
    // order while they fit whole; the rest wait for the next round.
    assert(previousMax < proposal, "a winning round's range must not be empty");
    // Paired with the range argument: two winning rounds of this instance
    // share a node, where the later-sent one ran after the earlier one, so
    // its range starts above the earlier proposal.
    if (sequence > this.lastWinner.sequence) {
      assert(previousMax >= this.lastWinner.proposal, "ranges of winning rounds must not overlap");
      this.lastWinner = { sequence, proposal };
    } else {
      assert(
        proposal <= this.lastWinner.proposal,
        "an earlier-sent round must end below a later one",
      );
    }
    let nextId = previousMax + 1n;
    const unserved: Waiter[] = [];
    for (const waiter of batch) {
      if (waiter.done) continue; // aborted while in flight: its IDs become a hole
      const last = nextId + BigInt(waiter.count) - 1n;
      if (unserved.length > 0 || last > proposal) {
        unserved.push(waiter);
        continue;
      }
      const out = new Array<bigint>(waiter.count);
      for (let i = 0; i < waiter.count; i++) out[i] = nextId + BigInt(i);
      nextId = last + 1n;
      this.settle(waiter, undefined, out);
    }
    this.requeue(unserved);
  }

  /** Puts calls back at the head of the queue, in order; after close they fail instead. */
  private requeue(waiters: Waiter[]): void {
    if (this.closed) {
      for (const waiter of waiters) this.settle(waiter, new ClosedError("NextId"));
      return;
    }
    this.queue.unshift(...waiters);
  }

  /**
   * Folds a round's answers into what this instance knows and returns the
   * largest previous value among the nodes that accepted. (Nodes that lost
   * their counter were already sent to repair by `runCounterScript`.)
   */
  private learn(round: RoundResult<unknown>, proposal: bigint | undefined): bigint {
    let previousMax = 0n;
    round.outcomes.forEach((outcome) => {
      if (!outcome || outcome.kind === "error") return;
      const status = statusOf(outcome.value);
      if (needsRepair(status)) return;
      const value = counterValueOf(outcome.value);
      this.knownMax = maxOf(this.knownMax, value);
      if (outcome.kind === "yes") {
        previousMax = maxOf(previousMax, value);
        if (proposal !== undefined) this.knownMax = maxOf(this.knownMax, proposal);
      }
    });
    return previousMax;
  }

  private loseRound(batch: Waiter[], failure: RoundFailure): void {
    this.consecutiveLosses++;
    const retry: Waiter[] = [];
    for (const waiter of batch) {
      if (waiter.done) continue;
      waiter.failedRounds++;
      if (waiter.failedRounds > this.options.retry.retries) this.settle(waiter, failure.error);
      else retry.push(waiter);
    }
    this.requeue(retry);
    this.staleLosses = failure.stale ? this.staleLosses + 1 : 0;
    if (failure.stale) return;
    if (this.backoff === undefined && !this.closed) {
      this.backoff = this.options.clock
        .sleep(this.backoffMs(this.consecutiveLosses), this.lifetime.signal)
        .catch(() => {})
        .finally(() => {
          this.backoff = undefined;
          this.pump();
        });
    }
  }

  /**
   * After stale rounds, propose further above the known maximum: the others
   * keep moving it while our next proposal travels, and a proposal that is
   * stale on arrival loses again (a starving instance). The margin grows with
   * each loss in a row and is random, so competitors do not leap in step;
   * the skipped IDs are holes, which the ID contract allows.
   */
  private leapMargin(ids: number): bigint {
    // The first retry after a refusal proposes just above what the nodes
    // said; only a second stale loss in a row shows others moving meanwhile.
    if (this.staleLosses < 2) return 0n;
    const bound = Math.min(2 ** 40, ids * 2 ** Math.min(this.staleLosses - 1, 20));
    return BigInt(this.options.random.integer(0, Math.min(Number.MAX_SAFE_INTEGER, bound)));
  }

  /** Exponential backoff with full jitter: a random wait up to min(max, delay * 2^(losses-1)). */
  private backoffMs(losses: number): number {
    const { delayMs, delayMsMax } = this.options.retry;
    const bound = Math.min(delayMsMax, delayMs * 2 ** Math.min(losses - 1, 20));
    return this.options.random.integer(0, Math.max(0, Math.floor(bound)));
  }

  /**
   * Why a round did not reach a majority: the counter missing on too many
   * nodes while no answering node knows it (never initialised), too few
   * nodes answering or keeping their counter (down, or lost and not yet
   * repaired), or (with enough answers) other writers proposing higher
   * values.
   */
  private failureOf(operation: string, round: RoundResult<unknown>): RoundFailure {
    const nodeCount = this.group.nodes.length;
    const spare = nodeCount - this.group.quorum;
    let lost = 0;
    /** Nodes that answered with their counter value (accepted or refused). */
    let known = 0;
    const errors = nodeErrorsOf(round);
    round.outcomes.forEach((outcome, index) => {
      if (outcome?.kind === "yes") known++;
      if (outcome?.kind !== "no") return;
      const status = statusOf(outcome.value);
      // A suspect node kept a counter; it may only lag.
      if (holdsCounter(status)) known++;
      if (needsRepair(status)) {
        lost++;
        errors.push(
          new NodeError(this.group.nodes[index]!.endpoint, new Error(lossReason(status))),
        );
      }
    });
    // Lost on too many nodes and known on none: the cluster looks
    // uninitialised. Known somewhere, the lost nodes wait for their repair.
    if (lost > spare && known === 0) {
      return { error: new NotInitializedError(this.options.key, lost, nodeCount), stale: false };
    }
    if (round.errorCount + lost > spare) {
      return {
        error: new QuorumError(operation, this.group.quorum, nodeCount, round.yesCount, errors),
        stale: false,
      };
    }
    return {
      error: new ContentionError(operation, this.consecutiveLosses + 1),
      stale: round.yesCount === 0,
    };
  }

  private settle(waiter: Waiter, error: unknown, ids?: bigint[]): void {
    if (waiter.done) return;
    waiter.done = true;
    if (waiter.onAbort) waiter.signal?.removeEventListener("abort", waiter.onAbort);
    if (ids) waiter.resolve(ids);
    else waiter.reject(error);
  }

  // ---- seed strategy: read a majority, max + 1, write --------------------

  private async seedBatch(count: number, signal: AbortSignal | undefined): Promise<bigint[]> {
    const ids: bigint[] = [];
    for (let i = 0; i < count; i++) ids.push(await this.seedOne(signal));
    return ids;
  }

  private async seedOne(signal: AbortSignal | undefined): Promise<bigint> {
    const timeoutMs = this.options.nodeTimeoutMs;
    for (let losses = 1; ; losses++) {
      this.assertOpen();
      const read = await this.group.round(
        (node, index) => this.runCounterScript(node, index, readScript, []),
        {
          isYes: isAccepted,
          // A lost read waits for every answer, so its error says whether
          // any node knows the counter (lost data) or none does (no init).
          stop: "won",
          signal,
          timeoutMs,
        },
      );
      if (read.aborted) throw signal?.reason;
      this.learn(read, undefined);
      let failure: RoundFailure;
      if (read.yesCount >= this.group.quorum) {
        let readMax = 0n;
        for (const outcome of read.outcomes) {
          if (outcome?.kind === "yes") readMax = maxOf(readMax, counterValueOf(outcome.value));
        }
        const proposal = readMax + 1n;
        if (proposal > maxId) throw new IdOverflowError(readMax, 1, maxId);
        const write = await this.propose(proposal);
        this.learn(write, proposal);
        if (write.yesCount >= this.group.quorum) return proposal;
        failure = this.failureOf("next", write);
      } else {
        failure = this.failureOf("next", read);
      }
      if (losses > this.options.retry.retries) throw failure.error;
      await this.options.clock.sleep(this.backoffMs(losses), signal);
    }
  }

  /**
   * Runs a counter script on one node and checks its reply. A reply saying
   * the node lost its counter schedules the repair here, for every reply:
   * a round that was won without this node has ended and dropped it, and a
   * slow node that lost its data would otherwise never be repaired.
   */
  private runCounterScript(
    node: RedisNode,
    index: number,
    script: LuaScript,
    args: readonly string[],
  ): Promise<CounterReply> {
    return node.evalScript(script, this.keys, args).then((reply) => {
      const checked = checkedReply(node, reply);
      // Only proposals leave a loss token; reads answer without one.
      const loss = lossOf(checked);
      if (loss) this.repairs.nodeLost(index, loss);
      return checked;
    });
  }

  private requireAll(operation: string, round: RoundResult<unknown>): void {
    const errors = nodeErrorsOf(round);
    if (errors.length > 0) {
      throw this.group.quorumError(operation, round, this.group.nodes.length);
    }
  }

  private assertOpen(): void {
    if (this.closed) throw new ClosedError("NextId");
  }
}

function asRedquorumError(error: unknown): RedquorumError {
  return error instanceof RedquorumError
    ? error
    : new RedquorumError("ERR_NODE", String(error), { cause: error });
}
