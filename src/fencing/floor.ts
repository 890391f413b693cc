/**
 * The operator's way out when fencing counters cannot be repaired. A node
 * that lost its memory gets its counters back from N - Q + 1 other nodes
 * that kept theirs (fencing/issuer.ts, quorum/counter-repair.ts); when more
 * than N - Q nodes lost theirs before any repair, there are not that many,
 * and a fenced grant is refused for good: no one knows the highest token
 * issued, and guessing low would let a token go backwards.
 *
 * The operator must give a bound: a value at least every token issued.
 * The protected resource's highest accepted token is not one by itself (a
 * holder may have been granted a higher one it has not presented yet), so
 * it needs a margin above it larger than the grants that could have been
 * made since (or a bound the operator knows otherwise). Each node whose
 * counters are unknown takes the bound — or the highest value any node
 * still knows, if that is higher — as its floor for every resource, and
 * votes again: every token issued after it is above it. A node with no
 * marker is taken for one that lost its memory, as a lock call would find
 * it: marked lost, and its quarantine starts. A node whose counters are
 * known gets the operator's bound as its floor if its own is lower (not
 * the highest value known: its own counters are known): not needed for the
 * unknown nodes' repair (a majority that includes it already sees the
 * highest token it took part in), but a floor only moves votes up, and it
 * lets a second run with a higher bound correct a first one given too low
 * (by then every node's counters are known). Nothing else changes: a
 * quarantine still runs its course.
 */

import { maxId, maxOf } from "../decimal.js";
import { InvalidArgumentError } from "../errors.js";
import type { NodeGroup } from "../quorum/node-group.js";
import type { Outcome } from "../quorum/round.js";
import { describe, rejectUnknownOptions, requireOptionsObject } from "../validate.js";
import {
  fenceFloorReply,
  fenceFloorScript,
  fenceMaxOf,
  fenceMaxReadScript,
  fenceRepairKeys,
  unjudgedOf,
} from "./scripts.js";

export interface FencingFloorOptions {
  /**
   * A value at least every fencing token issued on this cluster, for any
   * resource, granted or not yet presented: the highest token the
   * protected resource accepted plus a margin larger than the grants made
   * since, say. A
   * bigint, a safe integer or a decimal string, in [0, 2^63 - 2].
   */
  readonly atLeast: bigint | number | string;
}

/** What `Redlock.raiseFencingFloor()` found and did on one node. */
export interface FencingFloorReport {
  readonly endpoint: string;
  /**
   * "unknown": it lost its counters and no repair restored them (a node
   * with no marker is taken for one that lost its memory).
   */
  readonly found: "known" | "unknown" | "unreachable";
  /**
   * "raised": its floor is set now (found "unknown": it votes on tokens
   * again; found "known": its floor was lower, and every later token it
   * votes for is above the new one). "none": unreachable, a loss not yet
   * recorded there, or its floor at the value already.
   */
  readonly action: "raised" | "none";
  readonly detail: string;
}

export interface FencingFloorContext {
  readonly group: NodeGroup;
  readonly timeoutMs: number;
  readonly assertOpen: () => void;
  /** A node read found a loss waiting for its judgement (its memory check may be the first call to meet it). */
  readonly onUnjudged: (index: number, marker: string) => void;
}

/** The floor `atLeast` asks for, checked. */
export function requireFloor(options: unknown): bigint {
  const checked = requireOptionsObject("fencing floor options", options);
  rejectUnknownOptions("fencing floor options", checked, ["atLeast"]);
  const { atLeast } = checked;
  const allowed = "a bigint, a safe integer or a decimal string in [0, 2^63 - 2]";
  let value: bigint | undefined;
  if (typeof atLeast === "bigint") value = atLeast;
  else if (typeof atLeast === "number" && Number.isSafeInteger(atLeast)) value = BigInt(atLeast);
  else if (typeof atLeast === "string" && /^(0|[1-9][0-9]{0,18})$/.test(atLeast)) {
    value = BigInt(atLeast);
  }
  if (value === undefined || value < 0n || value > maxId - 1n) {
    throw new InvalidArgumentError(
      "options.atLeast",
      `expected ${allowed} (at least every token issued), got ${describe(atLeast)}`,
    );
  }
  return value;
}

/** Raises every node's fencing floor to the bound; nodes whose counters are unknown vote again (see the module comment). */
export async function raiseFencingFloors(
  context: FencingFloorContext,
  options: FencingFloorOptions,
): Promise<FencingFloorReport[]> {
  const atLeast = requireFloor(options);
  const { group } = context;
  // The operator's word that this list is the cluster's: nodes that all
  // lost their membership record are taken back under this client's by
  // these checks (a lock or ID call's would not: membership/view.ts, the
  // list may be one whose nodes were removed and emptied), before the
  // floor is read and set.
  return group.membership.vouching(async () => {
    // First contact reads the record (a new client, as the CLI's, has
    // none yet); the nodes that lost it are then checked again under it.
    await group.ready().catch(() => {}); // a node that failed its check is reported below
    if (group.membership.record) await group.checkAll();
    return raiseFloors(context, atLeast);
  });
}

async function raiseFloors(
  context: FencingFloorContext,
  atLeast: bigint,
): Promise<FencingFloorReport[]> {
  const { group, timeoutMs, assertOpen, onUnjudged } = context;
  assertOpen();
  const everyNode = { isYes: () => true, stop: "all", timeoutMs } as const;
  const read = await group.round(
    (node) => node.evalScript(fenceMaxReadScript, fenceRepairKeys, []),
    everyNode,
  );
  let floor = atLeast;
  for (const [index, outcome] of read.outcomes.entries()) {
    if (outcome?.kind !== "yes") continue;
    const unjudged = unjudgedOf(outcome.value);
    if (unjudged !== "") onUnjudged(index, unjudged);
    const known = fenceMaxOf(outcome.value);
    if (known) floor = maxOf(floor, known.value);
  }
  assertOpen();
  const write = await group.round(
    (node) =>
      node.evalScript(fenceFloorScript, fenceRepairKeys, [floor.toString(), atLeast.toString()]),
    everyNode,
  );
  return group.nodes.map((node, i) => reportOf(node.endpoint, write.outcomes[i], floor, atLeast));
}

function reportOf(
  endpoint: string,
  outcome: Outcome<unknown> | undefined,
  floor: bigint,
  atLeast: bigint,
): FencingFloorReport {
  if (outcome?.kind !== "yes") {
    const error = outcome?.kind === "error" ? outcome.error.message : "no answer";
    return { endpoint, found: "unreachable", action: "none", detail: error };
  }
  const [state, marker, unmarked] = outcome.value as [number, string, number];
  const markerText =
    unmarked === 1
      ? `no marker (taken for a node that lost its memory, as a lock call would: now marker ${JSON.stringify(marker)}, its quarantine started)`
      : `marker ${JSON.stringify(marker)}`;
  switch (state) {
    case fenceFloorReply.raised:
      return {
        endpoint,
        found: "unknown",
        action: "raised",
        detail:
          `${markerText}: fencing floor set to ${floor}` +
          (floor > atLeast ? " (the highest value a node still knew, above the one given)" : ""),
      };
    case fenceFloorReply.known:
      return {
        endpoint,
        found: "known",
        action: "none",
        detail: `${markerText}: fencing floor at ${atLeast} or above already`,
      };
    case fenceFloorReply.raisedKnown:
      return {
        endpoint,
        found: "known",
        action: "raised",
        detail:
          `${markerText}: fencing floor raised to ${atLeast}; its counters were known, and ` +
          "every token it votes for from now on is above it",
      };
    default:
      return {
        endpoint,
        found: "unknown",
        action: "none",
        detail:
          `${markerText}, but the loss is not recorded for this server yet (its run_id): a lock ` +
          "call there records it; run this again after one",
      };
  }
}
