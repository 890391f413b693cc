/**
 * The range strategy's group-commit pipeline: the queue of calls, the
 * rounds in flight (up to `pipelineDepth`), retries and backoff.
 *
 * - one round trip per round: the conditional write answers the node's
 *   value when it refuses and its previous value when it accepts, so the
 *   next proposal needs no read round;
 * - a round that wins on a majority S with proposal v owns the IDs
 *   (max previous on S, v]: two winning rounds share a node, where the later
 *   one saw the earlier one's v, so their ranges are disjoint and ordered;
 * - group commit: calls that arrived before a round was sent share its
 *   range; calls that arrive while it is in flight wait for a later round
 *   (handing them this round's IDs could break real-time order);
 * - rounds are pipelined on each node's connection, whose order the node
 *   keeps; a later round proposes above every earlier proposal.
 */

import { assert } from "../assert.js";
import { onAbort, systemClock } from "../clock.js";
import { maxId, maxOf, minOf } from "../decimal.js";
import {
  ClosedError,
  ContentionError,
  IdOverflowError,
  InvalidArgumentError,
  QueueFullError,
  RedquorumError,
} from "../errors.js";
import { InFlight } from "../in-flight.js";
import { idLimits } from "../limits.js";
import type { Observer } from "../observe.js";
import type { RoundResult } from "../quorum/round.js";
import { describe } from "../validate.js";
import type { CounterReply } from "./counter.js";
import type { CounterRounds, RoundFailure } from "./counter-rounds.js";
import type { ResolvedNextIdOptions } from "./options.js";

/** The most a lost round's chase leaps on a counter on the clock's scale (a second of clock proposals' microseconds). */
const chaseMax = 1_000_000n;
/**
 * Below this (September 2001 in microseconds since the epoch) no counter
 * has taken a clock proposal: a counter that clock proposals drive is at
 * least this, and a dense one that never took one does not get there.
 * Judged from the counter alone, not from this instance's clock, which may
 * be off by seconds or have no `epochMicros` at all.
 */
const clockScaleMicros = 1_000_000_000_000_000n;
/**
 * On a counter below the clock's scale, the most a chase leaps per ID of
 * the round: 64 covers what a few other instances' rounds of about as many
 * IDs take in one round trip (group commit: 4 processes × 16 callers took
 * about 1.15× the IDs with the chase as without it), and bounds what
 * instances chasing one another's leaps burn (uncapped, 16 processes moved
 * the counter about 150,000 per ID handed out; capped, about 25).
 */
const denseChasePerId = 64n;
/**
 * The stale losses' margin stops doubling at 2^10 per ID of the round; on
 * the clock's scale it may go beyond that as far as twice the microseconds
 * the lost round was out (`leapMargin`), and at 2^20 per ID. Beyond about
 * 16 contenders long streaks are common, and margins of up to 2^20 per ID
 * burnt the IDs the chase's cap saved: 64 instances in one process moved a
 * dense counter 138,000–185,000 per ID handed out (with 2^10 about 200, at
 * as many IDs a second or more and about as many `ContentionError`s), and
 * a counter on the clock's scale about 100 times as fast as the clock
 * (bench/results/ids.md).
 */
const doublingsPerId = 10;

interface Waiter {
  readonly count: number;
  readonly resolve: (ids: bigint[]) => void;
  readonly reject: (error: unknown) => void;
  /** Removes the waiter's abort callback from its signal (clock.ts, onAbort). */
  unwatch: () => void;
  failedRounds: number;
  done: boolean;
}

export interface RangeContext {
  readonly counter: CounterRounds;
  readonly quorum: number;
  readonly options: Pick<
    ResolvedNextIdOptions,
    "pipelineDepth" | "retry" | "clock" | "random" | "proposals"
  >;
  readonly observer: Observer;
  /**
   * The NextId's lifetime: once aborted (by `close()`), no round starts, a
   * backoff ends, and calls a round put back fail with `ClosedError`.
   */
  readonly signal: AbortSignal;
}

export class RangeRounds {
  private readonly context: RangeContext;
  private readonly queue: Waiter[] = [];
  /** Highest proposal sent (used while rounds are in flight). */
  private proposedMax = 0n;
  /** Send order of rounds, and the latest-sent winning round so far (for the order assertion). */
  private roundsSent = 0;
  private lastWinner = { sequence: 0, proposal: 0n };
  private roundsInFlight = 0;
  /** Rounds in flight; `close()` waits for them. */
  private readonly rounds = new InFlight();
  private pumpScheduled = false;
  private consecutiveLosses = 0;
  /** Whether a node answered a round (yes or no): proposals since rest on what the nodes said. */
  private answered = false;
  /** Lost rounds in a row that were only refused (stale proposals). */
  private staleLosses = 0;
  /**
   * How far above this instance's last lost proposal the nodes' counter
   * turned out to be (0 after a win): how fast others move it meanwhile.
   */
  private chase = 0n;
  /** Whether the counter was on the clock's scale at the last loss (`clockScaleMicros`). */
  private onClockScale = false;
  /** Twice the microseconds the last lost round was out: on the clock's scale, the chase's cap. */
  private twiceOutMicros = 0n;
  private backoff: Promise<void> | undefined;

  constructor(context: RangeContext) {
    this.context = context;
  }

  /** `count` IDs, once a round that claims them for this call wins. */
  take(count: number, signal: AbortSignal | undefined): Promise<bigint[]> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.queue.length >= idLimits.queueLengthMax) {
      return Promise.reject(new QueueFullError("NextId", idLimits.queueLengthMax));
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        count,
        resolve,
        reject,
        unwatch: () => {},
        failedRounds: 0,
        done: false,
      };
      waiter.unwatch = onAbort(signal, () => {
        const index = this.queue.indexOf(waiter);
        if (index >= 0) this.queue.splice(index, 1);
        settle(waiter, signal?.reason);
      });
      this.queue.push(waiter);
      this.schedulePump();
    });
  }

  /** Once the lifetime signal is aborted: waiting calls fail, and this resolves when no round is in flight. */
  async close(): Promise<void> {
    for (const waiter of this.queue.splice(0)) settle(waiter, new ClosedError("NextId"));
    await this.rounds.settled();
    // Calls a round could not serve were put back in the queue meanwhile.
    for (const waiter of this.queue.splice(0)) settle(waiter, new ClosedError("NextId"));
  }

  private get closed(): boolean {
    return this.context.signal.aborted;
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
      this.roundsInFlight < this.context.options.pipelineDepth &&
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
    const { counter, observer, options, quorum } = this.context;
    // Above our own rounds still in flight (or nodes that accepted them would
    // refuse this one); with none in flight, what the nodes said is enough.
    const known = counter.knownMax;
    const base = this.roundsInFlight > 0 ? maxOf(known, this.proposedMax) : known;
    let proposal: bigint;
    let clockFloor: bigint;
    try {
      clockFloor = this.clockFloor();
      proposal = maxOf(base + BigInt(ids) + this.leapMargin(ids), clockFloor);
    } catch (error) {
      for (const waiter of batch) settle(waiter, error);
      return;
    }
    if (proposal > maxId) {
      // The end of the ID space: the calls that still fit (in arrival order,
      // no leap) get this round, those after them wait for the next, and
      // only a call that cannot fit after `base` fails: one call's count
      // must not fail the others that share its round.
      const fits: Waiter[] = [];
      const later: Waiter[] = [];
      let sum = 0n;
      for (const waiter of batch) {
        const count = BigInt(waiter.count);
        if (base + count > maxId || clockFloor + count > maxId) {
          settle(waiter, new IdOverflowError(maxOf(base, clockFloor), waiter.count, maxId));
        } else if (later.length === 0 && maxOf(base + sum + count, clockFloor) <= maxId) {
          fits.push(waiter);
          sum += count;
        } else {
          later.push(waiter);
        }
      }
      this.queue.unshift(...later);
      if (fits.length === 0) return;
      batch = fits;
      ids = Number(sum);
      proposal = maxOf(base + sum, clockFloor);
    }
    this.proposedMax = proposal;
    this.roundsInFlight++;
    const sequence = ++this.roundsSent;
    // Whether this proposal rests on anything the nodes said (see finishRound).
    const informed = this.answered;
    const startMs = readMs(options.clock);
    const round: Promise<void> = counter
      .propose(proposal)
      .then(
        (result) => {
          if (observer.counting) {
            observer.emit({
              type: "id-round",
              outcome: result.yesCount >= quorum ? "won" : "lost",
              ids,
              durationMs: msSince(options.clock, startMs),
            });
          }
          this.finishRound(batch, ids, proposal, result, sequence, informed, startMs);
        },
        (error: unknown) => this.loseRound(batch, { error: asRedquorumError(error), stale: false }),
      )
      // A bug (a failed assertion) must still settle every call of the round.
      .catch((error: unknown) => {
        for (const waiter of batch) settle(waiter, error);
      })
      .finally(() => {
        this.roundsInFlight--;
        this.pump();
      });
    // Tracking handles a rejection (in-flight.ts); one here is a bug in
    // pump(), which must not pass silently: it is thrown again, uncaught.
    round.catch((error: unknown) => {
      queueMicrotask(() => {
        throw error;
      });
    });
    this.rounds.add(round);
  }

  private finishRound(
    batch: Waiter[],
    ids: number,
    proposal: bigint,
    round: RoundResult<CounterReply>,
    sequence: number,
    informed: boolean,
    startMs: number,
  ): void {
    const { counter, quorum } = this.context;
    const previousMax = counter.learn(round, proposal);
    if (round.yesCount + round.noCount > 0) this.answered = true;
    if (round.yesCount < quorum) {
      // After a loss in a row only: the proposal then rested on what the
      // last loss taught, so the gap is what others did in one round trip.
      // A first loss only brings an instance's view up to date (a fresh
      // one knows nothing yet): no chase then.
      const gap = counter.knownMax - proposal;
      this.chase = this.consecutiveLosses > 0 && gap > 0n ? gap : 0n;
      // On the clock's scale, at most what the clock moved (twice over)
      // while the round was out: clock proposals move the counter no faster,
      // and dense instances chasing one another's leaps, or leaping after
      // stale losses, do not run it ahead of the clock.
      const outMs = msSince(this.context.options.clock, startMs);
      this.onClockScale = counter.knownMax >= clockScaleMicros;
      this.twiceOutMicros = BigInt(Math.ceil(outMs * 2_000));
      const failure = counter.failureOf("next", round, this.consecutiveLosses + 1);
      // Nor is it a retry spent: a round sent before any answer proposed
      // from nothing, and lost only to the IDs handed out before this
      // instance (with `retries: 0`, a new process's first call failed
      // with a ContentionError though nobody else was writing).
      const spent = informed || !(failure.error instanceof ContentionError);
      this.loseRound(batch, failure, spent);
      return;
    }
    this.consecutiveLosses = 0;
    this.staleLosses = 0;
    this.chase = 0n;
    // The round owns (previousMax, proposal].
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
    // The top of the range: with clock proposals an ID is then the time its
    // round was sent (or just above the last ID), not the previous round's.
    const first = maxOf(previousMax + 1n, proposal - BigInt(ids) + 1n);
    this.requeue(serve(batch, first, proposal));
  }

  /** Puts calls back at the head of the queue, in order; after close they fail instead. */
  private requeue(waiters: Waiter[]): void {
    if (this.closed) {
      for (const waiter of waiters) settle(waiter, new ClosedError("NextId"));
      return;
    }
    this.queue.unshift(...waiters);
  }

  /** `spent`: whether the loss counts against each call's retries. */
  private loseRound(batch: Waiter[], failure: RoundFailure, spent = true): void {
    const { counter, options, signal } = this.context;
    this.consecutiveLosses++;
    const retry: Waiter[] = [];
    for (const waiter of batch) {
      if (waiter.done) continue;
      if (spent) waiter.failedRounds++;
      if (waiter.failedRounds > options.retry.retries) settle(waiter, failure.error);
      else retry.push(waiter);
    }
    this.requeue(retry);
    this.staleLosses = failure.stale ? this.staleLosses + 1 : 0;
    if (failure.stale) return;
    if (this.backoff === undefined && !this.closed) {
      this.backoff = options.clock
        .sleep(counter.backoffMs(this.consecutiveLosses), signal)
        .catch(() => {})
        .finally(() => {
          this.backoff = undefined;
          this.pump();
        });
    }
  }

  /**
   * With `proposals: "clock"`, the least a round proposes: microseconds since
   * the epoch. Independent instances' rounds then reach the nodes nearly in
   * the order of their values, and a round wins wherever it is the highest
   * so far (bench/results/ids.md). Only a floor: a clock that lags or steps
   * back leaves the proposal just above what the nodes said, as without it.
   */
  private clockFloor(): bigint {
    const { options } = this.context;
    if (options.proposals !== "clock") return 0n;
    const micros: unknown = options.clock.epochMicros!();
    if (typeof micros !== "bigint" || micros < 0n) {
      throw new InvalidArgumentError(
        "options.clock.epochMicros",
        `expected a non-negative bigint (microseconds since the Unix epoch), got ${describe(micros)}`,
      );
    }
    // Against this machine's own reading (the clock module's, not Date.now):
    // an injected clock may differ from it, but not by a day.
    const latest = systemClock.epochMicros!() + BigInt(idLimits.clockAheadMsMax) * 1_000n;
    if (micros > latest) {
      throw new InvalidArgumentError(
        "options.clock.epochMicros",
        `${micros} is more than a day ahead of this machine's wall clock: microseconds since the Unix epoch expected`,
      );
    }
    return micros;
  }

  /**
   * After lost rounds, propose further above the known maximum: the others
   * keep moving it while our next proposal travels, and a proposal that is
   * stale on arrival loses again (a starving instance). Two measures, the
   * larger taken, each random so that competitors do not leap in step:
   *
   * - what the last of two losses in a row showed, the counter found that
   *   far above our proposal (`chase`): others moving it fast are chased
   *   at their pace from the first loss, not after the doubling below has
   *   caught up with them. On a counter on the clock's scale
   *   (`clockScaleMicros`), instances proposing the clock's microseconds (a
   *   rolling switch of ID servers from dense to clock proposals) move it
   *   a round trip's microseconds every round: capped at twice the
   *   microseconds the lost round was out, and at `chaseMax`. Below it, at
   *   `denseChasePerId` per ID. Uncapped, among dense instances the gap
   *   is the others' rounds and their own chases, and chasing those leaps
   *   made them grow until each was `chaseMax`: 16 processes burnt about
   *   150,000 IDs per ID handed out, and pushed a clock-scale counter so far
   *   ahead of the clock that clock instances on it lost round after round;
   * - after two stale losses in a row, a margin that doubles with each, up
   *   to 2^`doublingsPerId` per ID, and on the clock's scale up to twice
   *   the microseconds the lost round was out if that is more.
   *
   * A win ends both, so a lone instance's IDs stay consecutive; the
   * skipped IDs are holes, which the ID contract allows.
   */
  private leapMargin(ids: number): bigint {
    const { random, proposals } = this.context.options;
    let leap = 0n;
    // Clock proposals have the clock as their chase already.
    if (this.chase > 0n && proposals !== "clock") {
      const cap = this.onClockScale
        ? minOf(this.twiceOutMicros, chaseMax)
        : denseChasePerId * BigInt(ids);
      const chase = Number(minOf(this.chase, cap));
      leap = BigInt(random.integer(Math.ceil(chase / 2), chase));
    }
    // The first retry after a refusal proposes just above what the nodes
    // said; only a second stale loss in a row shows others moving meanwhile.
    if (this.staleLosses < 2) return leap;
    // Beyond 2^10 per ID only on the clock's scale, and there only as far
    // as the clock moved (twice over) while the lost round was out: that
    // covers what clock proposals add meanwhile, and a streak of dense
    // instances' stale losses no longer runs the counter ahead of the clock
    // (2^20 per ID there let 64 in one process move it about 100 times as
    // fast as the clock).
    const timeBound = this.onClockScale ? Number(this.twiceOutMicros) : 0;
    const bound = Math.min(
      ids * 2 ** Math.min(this.staleLosses - 1, 20),
      Math.max(ids * 2 ** doublingsPerId, timeBound),
    );
    const doubling = BigInt(random.integer(0, Math.min(Number.MAX_SAFE_INTEGER, bound)));
    return doubling > leap ? doubling : leap;
  }
}

/**
 * Hands the IDs [first, last] out to the calls of a won round, in arrival
 * order while they fit whole; returns the calls left to wait for the next
 * round.
 */
function serve(batch: readonly Waiter[], first: bigint, last: bigint): Waiter[] {
  let nextId = first;
  const unserved: Waiter[] = [];
  for (const waiter of batch) {
    if (waiter.done) continue; // aborted while in flight: its IDs become a hole
    const end = nextId + BigInt(waiter.count) - 1n;
    if (unserved.length > 0 || end > last) {
      unserved.push(waiter);
      continue;
    }
    const out = new Array<bigint>(waiter.count);
    for (let i = 0; i < waiter.count; i++) out[i] = nextId + BigInt(i);
    nextId = end + 1n;
    settle(waiter, undefined, out);
  }
  return unserved;
}

/**
 * The clock's reading in ms, NaN when it fails or is not a number: it only
 * bounds a chase (an injected clock that breaks its contract must not fail
 * the calls for that).
 */
function readMs(clock: ResolvedNextIdOptions["clock"]): number {
  try {
    const ms: unknown = clock.now();
    return typeof ms === "number" ? ms : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/**
 * The ms since `startMs` (a readMs reading) on the clock: 0 when either
 * reading failed or the clock went back, and at most a day (a clock that
 * jumps to 1e306 must not make a chase's bound Infinity, which BigInt
 * refuses).
 */
function msSince(clock: ResolvedNextIdOptions["clock"], startMs: number): number {
  const ms = readMs(clock) - startMs;
  return Number.isFinite(ms) && ms > 0 ? Math.min(ms, 86_400_000) : 0;
}

function settle(waiter: Waiter, error: unknown, ids?: bigint[]): void {
  if (waiter.done) return;
  waiter.done = true;
  waiter.unwatch();
  if (ids) waiter.resolve(ids);
  else waiter.reject(error);
}

function asRedquorumError(error: unknown): RedquorumError {
  return error instanceof RedquorumError
    ? error
    : new RedquorumError("ERR_NODE", String(error), { cause: error });
}
