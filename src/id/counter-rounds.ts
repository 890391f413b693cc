/**
 * The rounds every ID operation runs on the counter over the group, and
 * what their answers say: a read round and a proposal round, the highest
 * value known (learned from every answer, raised by repairs), why a lost
 * round was lost, and how long to back off after one. Both strategies
 * (range-rounds.ts, seed-rounds.ts) and init share it. A reply reporting a
 * lost counter is handed to `onLoss` (the repairs), for every reply.
 */
import { maxOf } from "../decimal.js";
import { ContentionError, NodeError, NotInitializedError, type RedquorumError } from "../errors.js";
import type { LuaScript } from "../node/lua-script.js";
import type { RedisNode } from "../node/redis-node.js";
import type { NodeGroup } from "../quorum/node-group.js";
import type { RoundOptions, RoundResult } from "../quorum/round.js";
import {
  type CounterLoss,
  type CounterReply,
  checkedReply,
  counterValueOf,
  holdsCounter,
  isAccepted,
  lossOf,
  lossReason,
  needsRepair,
  proposeScript,
  readScript,
  statusOf,
} from "./counter.js";
import type { CounterKeys } from "./keys.js";
import type { ResolvedNextIdOptions } from "./options.js";

/** What a lost round says about why it was lost. */
export interface RoundFailure {
  error: RedquorumError;
  /**
   * Only refusals: other writers had moved the counter past our proposal.
   * We now know their values, so the next round goes at once, higher; a
   * split vote or failing nodes back off instead.
   */
  stale: boolean;
}

export interface CounterRoundsContext {
  readonly group: NodeGroup;
  readonly keys: CounterKeys;
  readonly options: Pick<
    ResolvedNextIdOptions,
    "key" | "nodeTimeoutMs" | "unsafeSkipMarkerCheck" | "retry" | "random"
  >;
  /** A reply said node `index` lost its counter: it needs repair. */
  readonly onLoss: (index: number, loss: CounterLoss) => void;
}

export class CounterRounds {
  private readonly context: CounterRoundsContext;
  /** Highest counter value seen on any node, or accepted by one. */
  private known = 0n;

  constructor(context: CounterRoundsContext) {
    this.context = context;
  }

  get knownMax(): bigint {
    return this.known;
  }

  /** A value some node holds now (a repaired node's): no later proposal should be below it. */
  raiseKnownMax(value: bigint): void {
    this.known = maxOf(this.known, value);
  }

  /** A read of every node's counter: `{accepted, value}` from each that holds one. */
  read(options: Omit<RoundOptions<CounterReply>, "timeoutMs">): Promise<RoundResult<CounterReply>> {
    return this.context.group.round((node, index) => this.call(node, index, readScript, []), {
      ...options,
      timeoutMs: this.context.options.nodeTimeoutMs,
    });
  }

  /** One conditional write of `proposal` on every node. */
  propose(proposal: bigint): Promise<RoundResult<CounterReply>> {
    const { options } = this.context;
    const args = [proposal.toString(), options.unsafeSkipMarkerCheck ? "1" : "0"];
    return this.context.group.round((node, index) => this.call(node, index, proposeScript, args), {
      isYes: isAccepted,
      // A lost round waits for every answer: each refusal carries a node's
      // value, and knowing all of them makes the next proposal win.
      stop: "won",
      timeoutMs: options.nodeTimeoutMs,
    });
  }

  /**
   * Folds a round's answers into what is known and returns the largest
   * previous value among the nodes that accepted (with a `proposal`, which
   * they now hold). Nodes that lost their counter were already sent to
   * repair by `call`.
   */
  learn(round: RoundResult<CounterReply>, proposal: bigint | undefined): bigint {
    let previousMax = 0n;
    for (const outcome of round.outcomes) {
      if (!outcome || outcome.kind === "error") continue;
      if (needsRepair(statusOf(outcome.value))) continue;
      const value = counterValueOf(outcome.value);
      this.raiseKnownMax(value);
      if (outcome.kind === "yes") {
        previousMax = maxOf(previousMax, value);
        if (proposal !== undefined) this.raiseKnownMax(proposal);
      }
    }
    return previousMax;
  }

  /**
   * Why a round did not reach a majority: the counter missing on too many
   * nodes while no answering node knows it (never initialised), too few
   * nodes answering or keeping their counter (down, or lost and not yet
   * repaired), or (with enough answers) other writers proposing higher
   * values: a `ContentionError` that counts `attempts` lost rounds.
   */
  failureOf(operation: string, round: RoundResult<CounterReply>, attempts: number): RoundFailure {
    const { group, options } = this.context;
    const nodeCount = group.nodes.length;
    const spare = nodeCount - group.quorum;
    /** Nodes that answered with their counter value (accepted or refused). */
    let known = 0;
    /** Why each node that lost its counter did not vote. */
    const lossErrors: NodeError[] = [];
    round.outcomes.forEach((outcome, index) => {
      if (outcome?.kind === "yes") known++;
      if (outcome?.kind !== "no") return;
      const status = statusOf(outcome.value);
      // A suspect node kept a counter; it may only lag.
      if (holdsCounter(status)) known++;
      if (needsRepair(status)) {
        lossErrors.push(new NodeError(group.nodes[index]!.endpoint, new Error(lossReason(status))));
      }
    });
    const lost = lossErrors.length;
    // Lost on too many nodes and known on none: the cluster looks
    // uninitialised. Known somewhere, the lost nodes wait for their repair.
    if (lost > spare && known === 0) {
      return { error: new NotInitializedError(options.key, lost, nodeCount), stale: false };
    }
    if (round.errorCount + lost > spare) {
      return { error: group.quorumError(operation, round, group.quorum, lossErrors), stale: false };
    }
    return { error: new ContentionError(operation, attempts), stale: round.yesCount === 0 };
  }

  /** Exponential backoff with full jitter: a random wait up to min(max, delay * 2^(losses-1)). */
  backoffMs(losses: number): number {
    const { retry, random } = this.context.options;
    const bound = Math.min(retry.delayMsMax, retry.delayMs * 2 ** Math.min(losses - 1, 20));
    return random.integer(0, Math.max(0, Math.floor(bound)));
  }

  /**
   * Runs a counter script on one node and checks its reply. A reply saying
   * the node lost its counter goes to `onLoss` here, for every reply: a
   * round that was won without this node has ended and dropped it, and a
   * slow node that lost its data would otherwise never be repaired.
   */
  private call(
    node: RedisNode,
    index: number,
    script: LuaScript,
    args: readonly string[],
  ): Promise<CounterReply> {
    return node.evalScript(script, this.context.keys, args).then((reply) => {
      const checked = checkedReply(node, reply);
      // Only proposals leave a loss token; reads answer without one.
      const loss = lossOf(checked);
      if (loss) this.context.onLoss(index, loss);
      return checked;
    });
  }
}
