/**
 * Which record follows epoch e: one value chosen by the members of e, with
 * single-decree Paxos (docs/membership.md, "Two changes at once"). Each
 * member promises ballots and accepts records in its proposal key
 * (scripts.ts); a record accepted by a majority is chosen, and only a
 * chosen record is ever written as a node's record, so every record of
 * epoch e+1 any node holds is the same one.
 *
 * Without this, two changes run at once from e each wrote their own e+1
 * record on some members: with 4 members, one removal reached two of them
 * and another removal the other two, each failed, and a client of each new
 * list won a lock on its two nodes. A node that accepted a record refuses
 * every vote until a record is written on it (the changing stamp), so a
 * record nobody chose is never voted under; running a change again
 * completes the one that may have been chosen before it (Paxos's phase 1
 * finds it), so no member is left refusing for good.
 *
 * Paxos needs acceptors that remember. A member taken back after losing
 * its memory (view.ts, change.ts) is marked (scripts.ts) and takes no part
 * — no promise, no accept — until a record of every epoch it may have
 * promised or accepted in is written on it; the mark names that epoch,
 * worked out by the next change from its majority of answers (change.ts,
 * forgottenUpTo: a change's list is checked against the record, a
 * client's may be older). Every
 * majority that chooses a record is then made of members that remember
 * what they did for that epoch, and meets every other such majority at
 * one of them (2Q > N, whatever the number left out). A promise given
 * before the loss and counted by a change still under way is not kept
 * either: its accept carries the incarnation the promise was given under.
 */
import type { Clock, RandomSource } from "../clock.js";
import { MembershipError } from "../errors.js";
import type { RedisNode } from "../node/redis-node.js";
import { quorumOf } from "../quorum/round.js";
import { defaultRuntime } from "../shared-options.js";
import { formatRecord, type MembershipRecord, parseRecord, stampOf } from "./record.js";
import { acceptScript, prepareScript, proposalReply } from "./scripts.js";

/** Rounds of ballots before a change gives up to another one running (each raises the ballot). */
const maxBallots = 6;

/**
 * What `chooseRecord` throws when a member holds a record of a later epoch
 * than the change started from that is not the change's own: only chosen
 * records are ever written, so another change was completed (change.ts
 * reads that record from `node` and says so).
 */
export class AnotherRecordWritten extends Error {
  constructor(
    readonly node: RedisNode,
    readonly stamp: string,
  ) {
    super(`${node.endpoint} holds ${stamp}: another change was completed`);
  }
}

/** The epoch a stamp names (record.ts, stampOf: "<cluster>:<epoch>:<digest>"), for `clusterId`'s stamps. */
function epochOfStamp(stamp: string, clusterId: string): number | undefined {
  const parts = stamp.split(":");
  if (parts.length !== 3 || parts[0] !== clusterId) return undefined;
  const epoch = Number(parts[1]);
  return Number.isSafeInteger(epoch) ? epoch : undefined;
}

/** The clock and randomness a change runs on (injectable, as a Redlock's are). */
export interface MembershipRuntime {
  readonly clock: Clock;
  readonly random: RandomSource;
}

export const systemRuntime: MembershipRuntime = defaultRuntime;

const hexOf = (random: RandomSource, count: number) =>
  Buffer.from(random.bytes(count)).toString("hex");

/** "<number, 12 digits>:<16 random hex>": ordered as strings, unique per proposer. */
function ballotOf(number: number, random: RandomSource): string {
  return `${String(number).padStart(12, "0")}:${hexOf(random, 8)}`;
}

function numberOf(ballot: string): number {
  const number = Number.parseInt(ballot.slice(0, 12), 10);
  return Number.isSafeInteger(number) ? number : 0;
}

type Reply =
  | { kind: "ok"; ballot: string; record: string; incarnation: string }
  | { kind: "outbid"; ballot: string }
  | { kind: "moved"; stamp: string }
  | { kind: "amnesiac" }
  | { kind: "forgot" }
  | { kind: "failed"; error: string };

async function ask(
  node: RedisNode,
  script: typeof prepareScript,
  args: string[],
  timeoutMs: number,
): Promise<Reply> {
  try {
    const reply = await node.command(["EVAL", script.source, "0", ...args], { timeoutMs });
    const [status, first, second, third] = Array.isArray(reply) ? reply : [];
    if (status === proposalReply.ok) {
      return {
        kind: "ok",
        ballot: String(first ?? ""),
        record: String(second ?? ""),
        incarnation: String(third ?? ""),
      };
    }
    if (status === proposalReply.outbid) return { kind: "outbid", ballot: String(first) };
    if (status === proposalReply.moved) return { kind: "moved", stamp: String(first) };
    if (status === proposalReply.amnesiac) return { kind: "amnesiac" };
    if (status === proposalReply.forgot) return { kind: "forgot" };
    return { kind: "failed", error: `an unexpected reply: ${JSON.stringify(reply)}` };
  } catch (error) {
    return { kind: "failed", error: error instanceof Error ? error.message : String(error) };
  }
}

/**
 * The record chosen to follow `from` (a record held by a majority of
 * `from`'s members): `proposal` unless another one may have been chosen
 * before, which is then chosen instead. `nodes`: the members of `from`, each
 * holding that record. Throws `MembershipError` when a majority of them do
 * not take part (no answer, or a record other than `from`).
 */
export async function chooseRecord(
  nodes: readonly RedisNode[],
  from: MembershipRecord,
  proposal: MembershipRecord,
  timeoutMs: number,
  runtime: MembershipRuntime = systemRuntime,
): Promise<MembershipRecord> {
  const needed = quorumOf(from.members.length);
  const common = [stampOf(from), String(proposal.epoch)];
  // Only a chosen record is ever written: a member that holds this
  // proposal's record shows it chosen (under a round of another change,
  // which completed it after this one's accepts went unseen).
  const ours = stampOf(proposal);
  const chosenAlready = (replies: readonly Reply[]) =>
    replies.some((reply) => reply.kind === "moved" && reply.stamp === ours);
  // And one holding another record past `from` shows another change
  // completed: no ballot of this one can win any more.
  const requireNoOther = (replies: readonly Reply[]) => {
    replies.forEach((reply, i) => {
      if (reply.kind !== "moved" || reply.stamp === ours) return;
      const epoch = epochOfStamp(reply.stamp, from.clusterId);
      if (epoch !== undefined && epoch > from.epoch) {
        throw new AnotherRecordWritten(nodes[i]!, reply.stamp);
      }
    });
  };
  let number = 1;
  let last = "";
  for (let attempt = 0; attempt < maxBallots; attempt++) {
    if (attempt > 0) {
      // Two proposers outbidding each other in turn: one of them waits more.
      await runtime.clock.sleep(20 + runtime.random.integer(0, 80 * attempt));
    }
    const ballot = ballotOf(number, runtime.random);
    // A fresh incarnation per round (scripts.ts, proposalLua): a node keeps
    // the one it has for the epoch, and answers with it.
    const prepare = [...common, ballot, hexOf(runtime.random, 8)];
    const promises = await Promise.all(
      nodes.map((node) => ask(node, prepareScript, prepare, timeoutMs)),
    );
    if (chosenAlready(promises)) return proposal;
    requireNoOther(promises);
    const outcome = tally(promises, needed, nodes);
    number = Math.max(number, outcome.highestNumber) + 1;
    if (!outcome.majority) {
      last = outcome.summary;
      continue;
    }
    // The record accepted under the highest ballot, if any: it may have
    // been chosen already, and only it may be chosen now.
    let value = formatRecord(proposal);
    let acceptedUnder = "";
    for (const reply of promises) {
      if (reply.kind === "ok" && reply.ballot !== "" && reply.ballot > acceptedUnder) {
        acceptedUnder = reply.ballot;
        value = reply.record;
      }
    }
    // Only the nodes that promised are asked, each with the incarnation it promised under.
    const accepts = await Promise.all(
      nodes.map((node, i) => {
        const promise = promises[i]!;
        if (promise.kind !== "ok") return promise;
        return ask(node, acceptScript, [...common, ballot, promise.incarnation, value], timeoutMs);
      }),
    );
    const accepted = tally(accepts, needed, nodes);
    number = Math.max(number, accepted.highestNumber + 1);
    if (!accepted.majority && chosenAlready(accepts)) return proposal;
    if (!accepted.majority) requireNoOther(accepts);
    if (accepted.majority) {
      const record = parseRecord(value);
      if (!record || record.clusterId !== from.clusterId || record.epoch !== proposal.epoch) {
        throw new MembershipError(
          nodes.map((node) => node.endpoint),
          `the change accepted on the members is not a record of epoch ${proposal.epoch}: ${value.slice(0, 80)}`,
        );
      }
      return record;
    }
    last = accepted.summary;
  }
  throw new MembershipError(
    nodes.map((node) => node.endpoint),
    `the change did not reach ${needed} of ${from.members.length} members (${last}); ` +
      "run it again once they answer (another change running at the same time outbids it until one of them ends)",
  );
}

function tally(
  replies: readonly Reply[],
  needed: number,
  nodes: readonly RedisNode[],
): { majority: boolean; highestNumber: number; summary: string } {
  let ok = 0;
  let highestNumber = 0;
  const parts: string[] = [];
  replies.forEach((reply, i) => {
    const endpoint = nodes[i]!.endpoint;
    if (reply.kind === "ok") ok++;
    else if (reply.kind === "outbid") {
      highestNumber = Math.max(highestNumber, numberOf(reply.ballot));
      parts.push(`${endpoint}: promised to another change`);
    } else if (reply.kind === "moved") {
      parts.push(`${endpoint}: holds ${reply.stamp || "no record"}`);
    } else if (reply.kind === "forgot") {
      parts.push(`${endpoint}: lost its memory since it promised`);
    } else if (reply.kind === "amnesiac") {
      parts.push(
        `${endpoint}: lost its memory, and takes no part until the changes it may have ` +
          "forgotten are decided without it",
      );
    } else parts.push(`${endpoint}: ${reply.error}`);
  });
  return { majority: ok >= needed, highestNumber, summary: parts.join("; ") || "no answers" };
}
