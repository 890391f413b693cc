/**
 * One acquire attempt, from its arguments to its verdict: a new random
 * value, the acquire round (and the fencing tokens, if a majority granted),
 * then either the granted lock, or — after undoing on every node what the
 * attempt set — why it failed. A handoff the attempt used is settled
 * whatever happens.
 */

import {
  LockExpiredError,
  NodeTimeoutError,
  type QuorumError,
  ResourceLockedError,
} from "../errors.js";
import { limits } from "../limits.js";
import { nodeErrorsOf, type RoundResult } from "../quorum/round.js";
import { validUntilMs } from "../quorum/validity.js";
import { isGrantedBy } from "./acquire-reply.js";
import { acquireArgs, acquireScript } from "./acquire-script.js";
import type { LockContext } from "./context.js";
import { type Handoff, settleHandoff } from "./handoff.js";
import { Lock } from "./lock.js";
import { agreedTicket, type QueuePlace, queuePlaceOf } from "./queue-place.js";
import type { QueueArgs } from "./queue-registration.js";
import { randomHex } from "./random-hex.js";
import { releaseKeys } from "./release.js";

export type AttemptContext = Pick<
  LockContext,
  | "owner"
  | "options"
  | "group"
  | "run"
  | "fences"
  | "quarantineArg"
  | "isClosed"
  | "assertOpen"
  | "track"
>;

/** What every attempt of one acquire shares: checked arguments and keys. */
export interface AttemptRequest {
  /** The resources as given. */
  readonly names: readonly string[];
  readonly keys: readonly string[];
  /** Fencing counters, one per resource; none with fencing off. */
  readonly counterKeys: readonly string[];
  readonly ttl: number;
  readonly signal: AbortSignal | undefined;
}

/**
 * A granted lock and, once every node answered, which did not grant it, or why the attempt failed
 * (the next attempt may still win) and the caller's place in the queues of
 * the nodes that refused it. The failure is built only if it is thrown:
 * most refused attempts are followed by another, and an Error's stack
 * trace cost about 1 % of a contended grant's client CPU.
 */
export type Verdict =
  | { readonly lock: Lock; readonly refused: Promise<(index: number) => boolean> }
  | { readonly failure: () => Error; readonly places: readonly QueuePlace[] };

/**
 * Attempt number `attempt`; `from`: a handoff to take over; `queue`: the
 * caller's registration in the nodes' queues, if it may wait. Rejects only
 * when nothing can follow: the signal, a refused node group, `close()`, a
 * resource with no fencing token left.
 */
export async function runAttempt(
  context: AttemptContext,
  request: AttemptRequest,
  attempt: number,
  from: Handoff | undefined,
  queue?: QueueArgs,
): Promise<Verdict> {
  const { options, group } = context;
  let round: RoundResult<unknown> | undefined;
  let granted = false;
  try {
    context.assertOpen();
    const value = randomHex(options.random, limits.lockValueBytes);
    const proposals = context.fences.proposals(request.counterKeys);
    // The same arguments go to every node: built once per attempt.
    const args = acquireArgs(
      value,
      request.ttl,
      context.quarantineArg,
      proposals,
      from?.fromValue,
      queue,
    );
    const startMs = options.clock.now();
    round = await group.round(
      (node, index) => context.run(node, index, acquireScript, request.keys, args),
      {
        isYes: isGrantedBy(request.counterKeys.length > 0),
        // A lost round waits for every answer: a node that refused needs no
        // undo, and the undo of one still unheard would be answered only
        // after its acquire anyway (commands on a connection keep order),
        // so waiting costs no time and spares those nodes a call.
        stop: "won",
        signal: request.signal,
        timeoutMs: options.nodeTimeoutMs,
      },
    );
    const validUntil = validUntilMs(startMs, request.ttl, options.driftFactor, options.driftMs);
    const majority = round.yesCount >= group.quorum;
    const fenced = await fencesOrUndo(context, request, value, proposals, round, majority);
    const fences = fenced instanceof Map ? fenced : undefined;
    const valid = validUntil > options.clock.now();
    if (majority && valid && fences && !group.refused && !context.isClosed()) {
      granted = true;
      const { names, keys } = request;
      const { settled, done } = round;
      return {
        lock: new Lock(
          context.owner,
          names,
          keys,
          value,
          validUntil,
          round.yesCount,
          fences,
          settled,
          done,
        ),
        refused: done.then(() => (index) => settled[index]?.kind !== "yes"),
      };
    }
    // Seed 1, step 5: undo on every node that may hold our keys, also those
    // that seemed to fail (a timed-out SET may have executed). Only a node
    // that answered in time with a refusal is spared: the script checks
    // every key before it writes, so it set nothing of this attempt.
    // Never cancelled by the signal. A waiter is queued on those nodes too,
    // with the ticket the refusing nodes agree on, so every node knows it;
    // and so is it on a refusing node that queued it under another ticket
    // (a first registration takes each node's own tail): every node then
    // orders it alike, and a release reserves the key for the same head
    // everywhere instead of splitting the heir's round.
    const { outcomes } = round;
    // Each refusing node's place in its queue, by node (parsed once).
    const placeAt = outcomes.map((o) => (o?.kind === "no" ? queuePlaceOf(o.value) : undefined));
    const places = placeAt.filter((place) => place !== undefined);
    const requeue =
      queue && queue.waitMs > 0
        ? { ...queue, ticket: agreedTicket(places) ?? queue.ticket }
        : undefined;
    const misplaced = (i: number) => {
      const place = placeAt[i];
      return (
        requeue !== undefined &&
        place !== undefined &&
        Number(place.ticket) !== Number(requeue.ticket)
      );
    };
    // A node that timed out already took nodeTimeoutMs of this attempt:
    // its undo goes out (after the acquire on its connection, before any
    // later command) but is not waited for, which could take as long
    // again and ensures nothing more (close() still waits for it).
    const timedOut = (i: number) => {
      const outcome = outcomes[i];
      return outcome?.kind === "error" && outcome.error instanceof NodeTimeoutError;
    };
    const undo = (where: (i: number) => boolean) =>
      releaseKeys(context, request.keys, value, "all", { requeue, mayHold: where });
    const awaited = (i: number) => !timedOut(i) && (mayHold(round, i) || misplaced(i));
    // No round at all where no node needs the call.
    const any = (where: (i: number) => boolean) => group.nodes.some((_, i) => where(i));
    if (any(timedOut)) void context.track(undo(timedOut)).catch(() => {});
    if (any(awaited)) await undo(awaited);
    if (round.aborted || request.signal?.aborted) throw request.signal?.reason;
    if (group.refused) throw group.refused;
    context.assertOpen();
    const fenceError = fenced instanceof Map ? undefined : fenced;
    const ended = round;
    return {
      failure: () => failureOf(context, request, ended, attempt, majority, fenceError),
      places,
    };
  } finally {
    if (from) settleHandoff(from, round, granted, group.nodes.length);
  }
}

/** Whether node `index` may hold keys of this attempt: it granted, failed, timed out, or was not heard. */
function mayHold(round: RoundResult<unknown> | undefined, index: number): boolean {
  return round?.outcomes[index]?.kind !== "no";
}

/**
 * The fencing tokens of an attempt: none needed unless a majority granted
 * with fencing on; undefined if none could be committed. Whatever goes
 * wrong meanwhile, no key of this attempt may outlive it.
 */
async function fencesOrUndo(
  context: AttemptContext,
  request: AttemptRequest,
  value: string,
  proposals: readonly bigint[],
  round: RoundResult<unknown>,
  majority: boolean,
): Promise<Map<string, bigint> | QuorumError> {
  if (!majority || request.counterKeys.length === 0 || round.aborted) return new Map();
  const { names, keys, counterKeys, signal } = request;
  try {
    return await context.fences.commit(
      { names, keys, counterKeys, value, proposals },
      round,
      signal,
    );
  } catch (error) {
    await releaseKeys(context, request.keys, value, "all");
    throw error;
  }
}

/**
 * Why an attempt that was not granted failed: no fencing token committed;
 * a majority granted but too slowly for the TTL; more nodes failed than a
 * majority can spare, so the cluster is the problem (QuorumError); or
 * enough nodes answered and someone else holds the resource.
 */
function failureOf(
  context: AttemptContext,
  request: AttemptRequest,
  round: RoundResult<unknown>,
  attempt: number,
  majority: boolean,
  fenceError: QuorumError | undefined,
): Error {
  const { group } = context;
  const { names, ttl } = request;
  if (fenceError) return fenceError;
  if (majority) {
    return new LockExpiredError(
      "acquire",
      names,
      `a majority granted ${JSON.stringify(names[0])} but the validity ran out during the ` +
        `round (TTL ${ttl} ms): nodes answered too slowly for this TTL`,
    );
  }
  const nodeCount = group.nodes.length;
  if (round.errorCount > nodeCount - group.quorum || round.noCount === 0) {
    return group.quorumError("acquire", round);
  }
  return new ResourceLockedError(names, round.noCount, nodeCount, attempt, nodeErrorsOf(round));
}
