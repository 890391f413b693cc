/**
 * Issuing fencing tokens: what this client remembers of each counter (so
 * the next proposal is usually right), committing the tokens of a lock just
 * granted, and repairing the counters of a node that lost its memory. The
 * scripts a lock runs go through the runner the lock side passes in
 * (`FenceIssuerContext.run`), which also tells this issuer of memory losses
 * (`scheduleRepair`): fencing never imports lock/.
 */

import { type Clock, raceAbort } from "../clock.js";
import { maxId } from "../decimal.js";
import { FenceOverflowError, NodeError, QuorumError } from "../errors.js";
import { fenceLimits } from "../limits.js";
import type { LuaScript } from "../node/lua-script.js";
import type { RedisNode } from "../node/redis-node.js";
import type { Observer } from "../observe.js";
import { type CounterRepair, RepairScheduler, raiseFromOthers } from "../quorum/counter-repair.js";
import type { NodeGroup } from "../quorum/node-group.js";
import type { RoundResult } from "../quorum/round.js";
import {
  acceptedAll,
  FenceMemory,
  type FenceTally,
  nodesAtLastToken,
  tallyFences,
} from "./fence-votes.js";
import {
  fencedScriptArgs,
  fenceMaxOf,
  fenceMaxReadScript,
  fenceRepairApplied,
  fenceRepairKeys,
  fenceRepairScript,
  fenceScript,
  isCounted,
  unjudgedOf,
} from "./scripts.js";

export interface FenceIssuerContext {
  readonly group: NodeGroup;
  readonly clock: Clock;
  readonly observer: Observer;
  readonly nodeTimeoutMs: number;
  /** How long after a loss is found its repair waits (Redlock's `repairDelayMs`). */
  readonly repairDelayMs: number;
  /** Whether fencing is on; off, no repair is ever scheduled. */
  readonly enabled: boolean;
  /** ARGV[3] of the fenced scripts (node/node-state.ts, quarantineArgOf). */
  readonly quarantineArg: string;
  /**
   * A repair's read of node `index` found a loss there waiting for its
   * judgement (its memory check may be the first call to meet it).
   */
  onUnjudged(index: number, marker: string): void;
  /** Runs a fenced script on node `index`: a refusal (quarantine, counters unknown) is its error. */
  run(
    node: RedisNode,
    index: number,
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
  ): Promise<unknown>;
}

/** The fencing side of an acquire attempt that a majority granted. */
export interface FenceClaim {
  /** The resources, in the order of their counters. */
  readonly names: readonly string[];
  readonly counterKeys: readonly string[];
  /** The lock keys (the fenced scripts' KEYS). */
  readonly keys: readonly string[];
  /** The lock's value: fence rounds count only where the lock keys still hold it. */
  readonly value: string;
  /** What the acquire round proposed. */
  readonly proposals: readonly bigint[];
}

export class FenceIssuer {
  private readonly context: FenceIssuerContext;
  private readonly memory = new FenceMemory();
  private readonly repairs: RepairScheduler;

  constructor(context: FenceIssuerContext) {
    this.context = context;
    this.repairs = new RepairScheduler(context.clock, context.repairDelayMs, context.nodeTimeoutMs);
  }

  /** What to propose for each counter: one above the highest value seen. */
  proposals(counterKeys: readonly string[]): bigint[] {
    return counterKeys.map((key) => this.memory.proposal(key));
  }

  /** Remembers a counter's value seen elsewhere (a refusal): the next proposal goes above it. */
  noteCounter(counterKey: string, value: bigint): void {
    this.memory.learn(counterKey, value);
  }

  /**
   * Tokens for a lock just granted. Usually the acquire round's proposals
   * were accepted by a majority: no extra round. A resource whose proposal
   * was stale gets fencing rounds (under our lock, on nodes that still hold
   * it) proposing above the highest value seen, a few at most; why none
   * committed if none did (the attempt counts as failed). Throws
   * `FenceOverflowError` for a resource with no token left.
   */
  async commit(
    claim: FenceClaim,
    round: RoundResult<unknown>,
    signal: AbortSignal | undefined,
  ): Promise<Map<string, bigint> | QuorumError> {
    const { group, nodeTimeoutMs, quarantineArg } = this.context;
    let tally = tallyFences(round, claim.counterKeys.length);
    let last = round;
    let current = claim.proposals;
    for (let fenceRound = 0; ; fenceRound++) {
      const fences = new Map<string, bigint>();
      const stale = this.learn(claim, current, tally, fences);
      if (stale === 0) return fences;
      // No round, and no retry of the acquire, can help a resource whose
      // last token fills more nodes than a majority can spare.
      const overflow = this.overflowOf(claim, last);
      if (overflow) throw overflow;
      if (fenceRound >= fenceLimits.roundsMax || signal?.aborted) {
        return this.fenceError(last, tally, claim.counterKeys.length, current.includes(maxId));
      }
      // Every resource is proposed again (one script call per node), above
      // what the nodes reported; committed ones just get a higher token.
      current = this.proposals(claim.counterKeys);
      const args = fencedScriptArgs(claim.value, "0", quarantineArg, current);
      const next = await group.round(
        (node, index) => this.context.run(node, index, fenceScript, claim.keys, args),
        { isYes: isCounted, stop: "decided", signal, timeoutMs: nodeTimeoutMs },
      );
      tally = tallyFences(next, claim.counterKeys.length);
      last = next;
    }
  }

  /** A resource of the claim with no token left, as `round`'s votes show it; undefined if none. */
  private overflowOf(
    claim: FenceClaim,
    round: RoundResult<unknown>,
  ): FenceOverflowError | undefined {
    const { nodes, quorum } = this.context.group;
    for (let i = 0; i < claim.names.length; i++) {
      const atMax = nodesAtLastToken(round, i);
      if (atMax > nodes.length - quorum) {
        return new FenceOverflowError(claim.names[i]!, atMax, nodes.length, maxId);
      }
    }
    return undefined;
  }

  /**
   * Why no token committed, node by node: the last round's failures, and
   * each node that answered without accepting every proposal (a refusal,
   * or a counter ahead of it).
   */
  private fenceError(
    round: RoundResult<unknown>,
    tally: FenceTally,
    count: number,
    atLastToken: boolean,
  ): QuorumError {
    const { group } = this.context;
    const errors: NodeError[] = [];
    round.outcomes.forEach((outcome, index) => {
      const endpoint = group.nodes[index]!.endpoint;
      if (outcome === undefined) {
        errors.push(
          new NodeError(
            endpoint,
            new Error("not waited for: the other nodes had decided the round"),
          ),
        );
      } else if (outcome.kind === "error") {
        errors.push(outcome.error);
      } else if (outcome.kind === "no") {
        errors.push(
          new NodeError(endpoint, new Error("did not vote (its lock key or quarantine)")),
        );
      } else if (!acceptedAll(outcome.value, count)) {
        const why = atLastToken
          ? "its counter is at 2^63 - 1, the last token: no token is left for this resource"
          : "a counter there was ahead of the proposal";
        errors.push(new NodeError(endpoint, new Error(why)));
      }
    });
    const accepted = Math.min(...tally.accepted);
    return new QuorumError("fence", group.quorum, group.nodes.length, accepted, errors);
  }

  /** Learns a round's counters; puts each committed token in `fences`; returns how many are stale. */
  private learn(
    claim: FenceClaim,
    proposed: readonly bigint[],
    tally: FenceTally,
    fences: Map<string, bigint>,
  ): number {
    let stale = 0;
    claim.counterKeys.forEach((key, i) => {
      this.memory.learn(key, tally.highest[i]!);
      if (tally.accepted[i]! >= this.context.group.quorum) {
        fences.set(claim.names[i]!, proposed[i]!);
        this.memory.learn(key, proposed[i]!);
      } else {
        stale++;
      }
    });
    return stale;
  }

  /**
   * A node that lost its memory knows none of its fencing counters. Once no
   * round that could count that node's old votes can be running, its fence
   * floor is set to the highest value accepted on N - Q + 1 other nodes
   * whose counters are known (they meet every majority that committed a
   * token, less the lost node), if that same loss is still current there
   * (the marker value names it). From then on it votes for every resource.
   */
  scheduleRepair(index: number, marker: string): void {
    if (!this.context.enabled) return;
    if (!marker.startsWith("lost:") && !marker.startsWith("restarted:")) return;
    // A failed repair is dropped while this client is open (the next vote
    // that meets the unknown counters schedules another try); at close it
    // is tried again (RepairScheduler.finish).
    this.repairs.schedule(index, () => this.repair(index, marker));
  }

  /**
   * The owner is closing: the repairs scheduled run when their delay ends
   * (RepairScheduler.finish: bounded), and no new one is scheduled.
   * Resolves once they have ended.
   */
  finish(reason: unknown): Promise<void> {
    return this.repairs.finish(reason);
  }

  /** One try: whether it is done (the floor written, or the loss no longer current). */
  private async repair(index: number, marker: string): Promise<boolean> {
    const { group, nodeTimeoutMs, observer } = this.context;
    const signal = this.repairs.signal;
    const node = group.nodes[index]!;
    const result = await raiseFromOthers(
      group,
      index,
      fenceRepairOf(node, marker, signal, nodeTimeoutMs, this.context.onUnjudged),
      { signal, timeoutMs: nodeTimeoutMs },
    );
    if (result.kind === "raised") {
      observer.node(node.endpoint, "repaired", `fencing floor raised to ${result.value}`);
    }
    return result.kind !== "too few answers";
  }
}

/**
 * The fencing counters' repair of `lost`: the others are read for the
 * highest value their counters accepted (undefined where their own are
 * unknown), and the lost node's floor is set to it if the loss that
 * `marker` names is still current there.
 */
function fenceRepairOf(
  lost: RedisNode,
  marker: string,
  signal: AbortSignal,
  timeoutMs: number,
  onUnjudged: (index: number, marker: string) => void,
): CounterRepair {
  return {
    readOther: async (node, index) => {
      const reply = await node.evalScript(fenceMaxReadScript, fenceRepairKeys, []);
      const unjudged = unjudgedOf(reply);
      if (unjudged !== "") onUnjudged(index, unjudged);
      return fenceMaxOf(reply);
    },
    raise: async (highest) =>
      (await raceAbort(
        lost.evalScript(fenceRepairScript, fenceRepairKeys, [marker, highest.toString()]),
        signal,
        timeoutMs,
      )) === fenceRepairApplied,
  };
}
