/**
 * One caller's acquire: its arguments checked (acquire-request.ts), then
 * attempts until one is granted or the retries, `waitMs` or the signal end
 * it — and between attempts its turn in this instance's wait queue (woken
 * by a release, handed a release, or its fallback timer).
 */

import { raceAbort } from "../clock.js";
import { QueueFullError } from "../errors.js";
import { limits } from "../limits.js";
import { type AcquireRequest, resolveAcquireRequest } from "./acquire-request.js";
import { type AttemptContext, runAttempt, type Verdict } from "./attempt.js";
import type { LockContext } from "./context.js";
import { type Handoff, handoffOutcome } from "./handoff.js";
import type { Lock } from "./lock.js";
import type { AcquireOptions } from "./options.js";
import { leaveNodeQueues } from "./queue-leave.js";
import { agreedTicket, highestFence, waitersAhead } from "./queue-place.js";
import type { QueueArgs } from "./queue-registration.js";
import { RetryBudget } from "./retry-budget.js";
import { Waiter } from "./waiter.js";

export type AcquireContext = AttemptContext &
  Pick<
    LockContext,
    "waits" | "watch" | "turns" | "timer" | "assertOpen" | "nextWaiterId" | "track"
  >;

/** Takes all `resources` for `ttlMs` (see `Redlock.acquire`). */
export async function acquireLock(
  context: AcquireContext,
  resources: readonly string[],
  ttlMs: number,
  options: AcquireOptions,
): Promise<Lock> {
  context.assertOpen();
  const resolved = resolveAcquireRequest(context.options, resources, ttlMs, options);
  const { clock } = context.options;
  // An instance's first call reaches the nodes first, within checkTimeoutMs
  // (and the signal). waitMs bounds the wait for the lock from then on: a
  // first call with a short waitMs (0: one attempt) would otherwise fail
  // as if the nodes were down, on a healthy cluster, before any attempt.
  const contactStartMs = clock.now();
  await raceAbort(context.group.ready(), resolved.signal);
  // A new object only where there is a deadline to move (a call without
  // waitMs, the common one, keeps its own).
  const request = Number.isFinite(resolved.deadlineMs)
    ? { ...resolved, deadlineMs: resolved.deadlineMs + (clock.now() - contactStartMs) }
    : resolved;
  return new Acquisition(context, request).run();
}

/** The attempts of one acquire, and its place in the wait queue between them. */
class Acquisition {
  private readonly context: AcquireContext;
  private readonly request: AcquireRequest;
  /** Made on the first wait only: an acquire that never waits (the common case) allocates nothing for the queue. */
  private waiter: Waiter | undefined;
  /** A release handed to this caller while parked, for its next attempt. */
  private handoff: Handoff | undefined;
  /** Why the last attempt failed, built when thrown (see Verdict). */
  private failure: (() => Error) | undefined;
  /** Its retries, as its rounds and the turns that passed spend them. */
  private readonly budget: RetryBudget;
  private granted = false;
  /**
   * Its id in the nodes' queues (heir-queue.ts), for a caller that may wait
   * (it queues with it, on every key of its lock), or for a one-resource
   * caller that may not but whose instance's turn may keep the key (the id
   * lets it in there in one call; turns.ts).
   */
  private readonly waiterId: string | undefined;
  /** The ticket every node is to order it by; "0" until a node gave one. */
  private ticket = "0";
  /** Waiters ahead of it in the nodes' queues, as the last refusals said. */
  private ahead = 0;
  /** Whether a node may have queued it (an attempt carried its waiter id). */
  private queued = false;
  /** How long its last registration lasts on the nodes (ms): its next poll comes well before. */
  private registeredMs = Number.POSITIVE_INFINITY;
  /** When it was last registered (the instance's clock, ms). */
  private registeredAtMs = 0;
  /** Whether it waited once for the instance to hear its heir channel (see `awaitListening`). */
  private listenAwaited = false;
  /** The instance's count of lost notices when its last attempt began (see `awaitTurn`). */
  private lostNoticesSeen: number;

  constructor(context: AcquireContext, request: AcquireRequest) {
    this.context = context;
    this.request = request;
    this.lostNoticesSeen = context.waits.noticesLost;
    const { keys, retry } = request;
    this.budget = new RetryBudget(retry, keys.length, context.options.clock);
    // A caller that may wait queues with its id; a single-key one that may
    // not needs it only where its instance's turn may keep the key for it.
    if (retry.retries > 0 || context.turns.mayKeep(keys)) {
      this.waiterId = context.nextWaiterId();
    }
  }

  async run(): Promise<Lock> {
    const { retry, keys } = this.request;
    try {
      // A caller that may wait joins the queue behind this instance's
      // waiters for these keys instead of racing them for the next release.
      if (retry.retries > 0 && this.context.waits.hasWaiters(keys)) await this.awaitTurn();
      // A round a release's notice woke a multi-resource waiter for counts
      // as a fraction of a retry (retry-budget.ts).
      let noticeWoken = false;
      for (;;) {
        this.budget.roundStarted(noticeWoken);
        const from = this.handoff;
        this.handoff = undefined;
        const queue = this.queueArgs();
        // An attempt with a registration queues it on every node that
        // refuses it, granted or not (the first attempt too).
        if (queue && queue.waitMs > 0) {
          this.queued = true;
          this.registeredMs = queue.waitMs;
          this.registeredAtMs = this.context.options.clock.now();
        }
        const listening = this.context.watch.listening;
        this.lostNoticesSeen = this.context.waits.noticesLost;
        const verdict = await this.attemptOnce(from, queue);
        if ("lock" in verdict) {
          this.granted = true;
          // Still queued where it was not granted (refused, or answered
          // after the majority did): left there, it would be the heir of a
          // release it no longer waits for.
          if (this.queued)
            void verdict.refused.then((refused) =>
              leaveNodeQueues(this.context, this.request.keys, this.waiterId!, refused),
            );
          return verdict.lock;
        }
        this.failure = verdict.failure;
        if (verdict.places.length > 0) {
          this.ticket = agreedTicket(verdict.places) ?? this.ticket;
          this.ahead = waitersAhead(verdict.places);
          const fence = highestFence(verdict.places);
          const counterKey = this.request.counterKeys[0];
          if (fence !== undefined && counterKey) this.context.fences.noteCounter(counterKey, fence);
        }
        if (this.budget.spent(noticeWoken)) throw this.failure();
        noticeWoken = false;
        // Queued before this instance heard its channel: a release since
        // may have told nobody. Once it hears, one more try at once.
        if (!listening && this.queued && !this.listenAwaited && (await this.awaitListening())) {
          continue;
        }
        // A multi-resource waiter's round woken by a notice (see above).
        noticeWoken = (await this.awaitTurn()) && keys.length > 1;
      }
    } finally {
      if (this.waiter) this.context.waits.remove(this.waiter, !this.granted);
      if (this.waiterId !== undefined) this.context.waits.forget(this.waiterId);
      this.handoff?.settle(handoffOutcome(undefined, false, this.context.group.nodes.length));
      // Awaited: a caller that retries at once must not find the key
      // reserved for the waiter it was.
      if (this.queued && !this.granted)
        await leaveNodeQueues(this.context, this.request.keys, this.waiterId!, () => true);
    }
  }

  /** One attempt, which this instance's turn on the key hears of (turns.ts). */
  private async attemptOnce(
    from: Handoff | undefined,
    queue: QueueArgs | undefined,
  ): Promise<Verdict> {
    const { turns, options } = this.context;
    const { keys } = this.request;
    const holding = turns.attemptStarted(keys);
    let verdict: Verdict | undefined;
    try {
      verdict = await runAttempt(this.context, this.request, this.budget.made, from, queue);
      return verdict;
    } finally {
      const granted = verdict !== undefined && "lock" in verdict;
      turns.attemptEnded(keys, holding, granted, options.clock.now());
    }
  }

  /** The registration sent with the next attempt: long enough to outlast the next poll. */
  private queueArgs(): QueueArgs | undefined {
    if (this.waiterId === undefined) return undefined;
    if (this.request.retry.retries === 0) {
      return { waiterId: this.waiterId, ticket: "0", waitMs: 0 };
    }
    const pollMs = (this.request.retry.delayMs + this.request.retry.jitterMs) * (1 + this.ahead);
    const waitMs = Math.max(limits.queueRegistrationMinMs, 4 * pollMs);
    return { waiterId: this.waiterId, ticket: this.ticket, waitMs, mayBeQueued: this.queued };
  }

  /**
   * Until it is this caller's turn for a round: woken by a release, handed
   * a release, or its fallback timer (a poll, if no waiter of this
   * instance is ahead; else the turn passes and counts as an attempt).
   * Throws the last failure once the deadline leaves no time to wait.
   * True when a release's notice woke it.
   */
  private async awaitTurn(): Promise<boolean> {
    const joining = this.waiter === undefined;
    const waiter = this.joinQueue();
    // Notices were lost during its attempt, before it was queued here to be
    // woken for that (a pub/sub connection came back): it tries at once.
    const { waits } = this.context;
    if (joining && waits.noticesLost !== this.lostNoticesSeen && waits.isFirst(waiter)) {
      return false;
    }
    const { deadlineMs, signal } = this.request;
    const { clock, nodeTimeoutMs } = this.context.options;
    for (;;) {
      const baseMs = this.nextDelayMs();
      // It parks until the deadline less one round (what an attempt takes
      // at most): a release before then still wakes it for that round.
      // Keeping a whole poll delay back instead made a short waitMs give
      // up long before its end, and miss a release it would have got.
      if (clock.now() + nodeTimeoutMs >= deadlineMs) {
        if (this.failure) throw this.failure();
        return false; // queued from the start: one round before giving up
      }
      // Queued on the nodes, a waiter is told when it is the heir: the more
      // waiters are ahead, the less often it polls, each poll counting for
      // the turns it waited (retries × delay still bounds the wait). It
      // polls by half its registration's life at the latest: the poll
      // renews it (the first one was made before anyone was known to be
      // ahead), and a registration that lapsed would drop it from the
      // nodes' queues while it sleeps through the others' turns.
      const turns = Math.max(
        1,
        Math.min(
          1 + this.ahead,
          this.budget.left,
          Math.floor(this.registeredMs / 2 / Math.max(1, baseMs)),
        ),
      );
      const delayMs = Math.min(baseMs * turns, deadlineMs - clock.now() - nodeTimeoutMs);
      this.context.assertOpen(); // close() ends parks; none may start after it
      const wake = await waiter.park(delayMs, this.context.timer, signal);
      if (wake.kind === "handoff") {
        this.handoff = wake.handoff;
        return false;
      }
      if (wake.kind === "timer") this.budget.passed(turns - 1);
      if (wake.kind === "released") return true;
      if (this.context.waits.isFirst(waiter)) return false;
      // Behind a waiter of its own instance it makes no attempt, but its
      // registration on the nodes must not lapse: it renews it with one.
      if (this.queued && clock.now() - this.registeredAtMs >= this.registeredMs / 2) return false;
      if (this.budget.left <= 0) return false; // the last attempt is always a round
      this.budget.passed(1);
    }
  }

  /**
   * Subscribes to this instance's heir channel and waits until a majority
   * of nodes confirmed it (heir-watch.ts), or at most as long as its poll
   * would have (and the first-contact bound, the deadline, the signal);
   * true: try again now. False: pub/sub is not offered, or no time is
   * left (the waiter parks as before).
   */
  private async awaitListening(): Promise<boolean> {
    const { watch, options } = this.context;
    this.listenAwaited = true;
    if (!watch.available) return false;
    watch.listen();
    const { retry, deadlineMs, signal } = this.request;
    const boundMs = Math.min(
      retry.delayMs + retry.jitterMs,
      options.checkTimeoutMs,
      deadlineMs - options.clock.now(),
    );
    if (boundMs <= 0) return false;
    // Not heard within its poll's delay: the attempt it makes now is that poll.
    await raceAbort(watch.whenListening(), signal, boundMs).catch((error: unknown) => {
      if (signal?.aborted) throw error;
    });
    this.context.assertOpen();
    return true;
  }

  private joinQueue(): Waiter {
    if (!this.waiter) {
      const { waits } = this.context;
      if (waits.size >= limits.waitersMax) throw new QueueFullError("Redlock", limits.waitersMax);
      this.waiter = new Waiter(this.request.keys, this.waiterId);
      waits.add(this.waiter);
    }
    return this.waiter;
  }

  /** The retry delay, with its random jitter. */
  private nextDelayMs(): number {
    const { delayMs, jitterMs } = this.request.retry;
    const { random } = this.context.options;
    return delayMs + (jitterMs === 0 ? 0 : random.integer(-jitterMs, jitterMs));
  }
}
