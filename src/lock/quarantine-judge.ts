/**
 * How long a node that lost its memory stays in the restart quarantine,
 * judged from the other nodes (lock/horizon.ts says why the length is the
 * cluster's, not one client's). A loss starts the quarantine unjudged (the
 * node refuses every vote: node/node-state.ts, checkQuarantine; the
 * certify script for a restart); the first client that meets it reads the
 * longest live `maxTtlMs` record from N - Q + 1 other nodes not in a
 * quarantine of their own (or from every other node), and sets the
 * quarantine to what is left of that since the loss.
 *
 * Why those nodes: a lock still held was granted by a majority M whose
 * holder had checked each of them within its recheck interval, and the
 * record outlives the lock there. N - Q + 1 of the other nodes and the
 * Q - 1 of M besides the lost node cannot be disjoint among N - 1. A node
 * in a quarantine of its own may have lost the record with its memory (a
 * node out of quarantine has outlived every lock it forgot); with every
 * other node read, at most N - Q faulty nodes leave 2Q - N >= 1 of M's
 * others intact (the rule of quorum/counter-repair.ts). Read after the
 * loss, so a client's own knowledge, which may be stale, does not decide.
 */

import { type Clock, raceAbort } from "../clock.js";
import type { RedisNode } from "../node/redis-node.js";
import type { Observer } from "../observe.js";
import { RepairScheduler, raiseFromOthers } from "../quorum/counter-repair.js";
import type { NodeGroup } from "../quorum/node-group.js";
import {
  horizonReadKeys,
  horizonReadScript,
  judgedOrNewer,
  judgeKeys,
  judgeQuarantineScript,
  type QuarantineJudgement,
  readHorizonWitness,
} from "./quarantine-scripts.js";

export interface QuarantineJudgeContext {
  readonly group: NodeGroup;
  readonly clock: Clock;
  readonly observer: Observer;
  readonly nodeTimeoutMs: number;
  /** The longest maxTtlMs this client knows of (its own at least): the judgement of a lone node. */
  readonly knownMs: () => number;
}

/** Judgements in one try at most: the one scheduled and the losses met on the way. */
const maxJudgementsPerTry = 8;

export class QuarantineJudge {
  private readonly context: QuarantineJudgeContext;
  private readonly judgements: RepairScheduler;

  constructor(context: QuarantineJudgeContext) {
    this.context = context;
    // No delay: unlike a counter repair, no earlier vote of the node can count later.
    this.judgements = new RepairScheduler(context.clock, 0, context.nodeTimeoutMs);
  }

  /** Node `index` answered that the loss `marker` names waits for its judgement. */
  schedule(index: number, marker: string): void {
    this.judgements.schedule(index, () => this.judge(index, marker));
  }

  /** Judges the losses these nodes' markers name; resolves once every judgement has ended. */
  async judgeNow(nodes: ReadonlyArray<{ index: number; marker: string }>): Promise<void> {
    for (const { index, marker } of nodes) this.schedule(index, marker);
    await this.judgements.settled();
  }

  /**
   * The owner is closing: once `after` has settled (what may still meet a
   * loss: the fencing repairs' rounds), no new judgement starts; those
   * scheduled run to their end, one that failed is tried again at once
   * and then (bounded: RepairScheduler.finish). Resolves once they have
   * ended.
   */
  async finish(reason: unknown, after: Promise<unknown> = Promise.resolve()): Promise<void> {
    this.judgements.retryFailed();
    await after.catch(() => {});
    return this.judgements.finish(reason);
  }

  /** `node`'s check found the loss `marker` names waiting for its judgement. */
  scheduleFor(node: RedisNode, marker: string): void {
    const index = this.context.group.nodes.indexOf(node);
    if (index >= 0) this.schedule(index, marker);
  }

  /**
   * One try: whether it is done (judged, or the loss no longer current or
   * judged already). Losses met on the way are judged in the same try (a
   * few at most): a newer loss of the node, and one that a read of another
   * node found waiting for its judgement (the read may be the first call
   * to meet it). The scheduler takes no second judgement for a node while
   * one runs, nor any once the owner closes, and a read schedules none: a
   * loss met so would be left unjudged, the node out of service until
   * another client votes there.
   */
  private async judge(index: number, marker: string): Promise<boolean> {
    const queue = [{ index, marker }];
    // Every loss queued so far, judged or not: none is judged twice.
    const queued = new Set([`${index} ${marker}`]);
    let done = false;
    for (let count = 0; count < maxJudgementsPerTry && queue.length > 0; count++) {
      const loss = queue.shift()!;
      const outcome = await this.judgeOnce(loss.index, loss.marker);
      if (loss.index === index) done = outcome.done;
      const met =
        outcome.newer === undefined
          ? outcome.met
          : [{ index: loss.index, marker: outcome.newer }, ...outcome.met];
      for (const next of met) {
        const key = `${next.index} ${next.marker}`;
        if (!queued.has(key)) {
          queued.add(key);
          queue.push(next);
        }
      }
    }
    return done;
  }

  private async judgeOnce(
    index: number,
    marker: string,
  ): Promise<{ done: boolean; newer?: string; met: Array<{ index: number; marker: string }> }> {
    const { group, nodeTimeoutMs, observer, knownMs } = this.context;
    const signal = this.judgements.signal;
    const node = group.nodes[index]!;
    let judgement: QuarantineJudgement | undefined;
    let newer: string | undefined;
    const met: Array<{ index: number; marker: string }> = [];
    const write = async (horizonMs: bigint) => {
      const reply = await raceAbort(
        node.evalScript(judgeQuarantineScript, judgeKeys, [marker, horizonMs.toString()]),
        signal,
        nodeTimeoutMs,
      ).then(judgedOrNewer);
      if (typeof reply === "object") newer = reply.newer;
      judgement = typeof reply === "object" ? 0 : reply;
      return judgement !== 0;
    };
    if (group.nodes.length === 1) {
      // No other node to read: what this client knows.
      await write(BigInt(knownMs()));
    } else {
      await raiseFromOthers(
        group,
        index,
        {
          readOther: (other, otherIndex) =>
            other
              .evalScript(horizonReadScript, horizonReadKeys, [])
              .then(readHorizonWitness)
              .then((witness) => {
                if (witness.unjudged !== "")
                  met.push({ index: otherIndex, marker: witness.unjudged });
                return witness;
              }),
          raise: write,
        },
        { signal, timeoutMs: nodeTimeoutMs },
      );
    }
    if (judgement === undefined) return { done: false, met }; // too few answers
    if (newer !== undefined && newer !== marker) return { done: false, newer, met };
    if (judgement !== 0) {
      observer.node(
        node.endpoint,
        judgement === 1 ? "quarantined" : "in service",
        judgement === 1
          ? "restart quarantine judged from the other nodes' maxTtlMs records"
          : "restart quarantine over (judged from the other nodes' maxTtlMs records)",
      );
    }
    return { done: true, met };
  }
}
