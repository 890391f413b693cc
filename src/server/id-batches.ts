/**
 * The server's group commit: the POST /v1/ids requests whose body came in
 * during one turn of the event loop ask the ID source once, for the sum of
 * their counts, and share the IDs out in arrival order.
 *
 * Why: each request arrives in an I/O callback of its own, so a source
 * that gathers the calls of one tick (NextId does) saw one request per
 * round while its pipeline had room; and a call per request cost an
 * AbortController, a timer and NextId's checks each, which made the server
 * spend several times a bare HTTP server's CPU per request. One call per
 * turn costs that once for the turn's requests.
 *
 * Real-time order holds across requests: a request answered before another
 * arrived was in an earlier call, which had returned before the later
 * call was made, and the source hands out IDs above every ID it handed out
 * before a call. Within a call, IDs go out in arrival order. A request
 * that stops waiting (its client gone, the drain) leaves its IDs
 * unanswered: holes, which the ID contract allows; a call whose every
 * request stopped is aborted, so the source stops working for it. A call
 * that fails at the end of the ID space is made again per request, so
 * that the requests that fit are served (see `oneByOne`).
 */
import { idLimits } from "../limits.js";
import { HttpError } from "./http-error.js";
import type { IdSource } from "./id-source.js";

/** One request waiting for its IDs; `batch` and `waiting` are this module's, set by `add`. */
export interface IdWaiter {
  readonly count: number;
  /** The batch it waits in. */
  batch: unknown;
  /** Still waiting: not served, failed nor cancelled. */
  waiting: boolean;
  /** Its IDs, `count` of them. Not called once it was cancelled. */
  served(ids: bigint[]): void;
  /** Its batch failed (the source's error, or the request timeout's 503). Not called once cancelled. */
  failed(error: unknown): void;
}

/**
 * The source could not hand out the whole count below the end of the ID
 * space (NextId's ERR_ID_OVERFLOW): a smaller count may still fit.
 */
function isCapacityError(error: unknown): boolean {
  return (
    typeof error === "object" &&
    error !== null &&
    (error as { code?: unknown }).code === "ERR_ID_OVERFLOW"
  );
}

/** The reason a call is aborted with when no request waits for it any more: nobody reads it. */
const nobodyWaits = new Error("no request waits for these IDs any more");

class Batch {
  /** In arrival order, cancelled ones too (`waiting` false). */
  readonly waiters: IdWaiter[] = [];
  /** IDs asked for: the counts of the waiters, less those cancelled before it started. */
  total = 0;
  live = 0;
  started = false;
  controller: AbortController | undefined;
  timer: ReturnType<typeof setTimeout> | undefined;
  /** When its first request was added: the request timeout counts from there. */
  readonly firstAtMs: number;
  /** Called once it is answered (served, failed, or every request gone before it started). */
  settled: (() => void) | undefined;

  constructor(firstAtMs = performance.now()) {
    this.firstAtMs = firstAtMs;
  }
}

export interface IdBatchOptions {
  /** How long a request waits for its IDs once added, in milliseconds; then 503 "timeout". */
  readonly requestTimeoutMs: number;
  /** Most IDs one call to the source asks for (NextId's bound on a call). */
  readonly maxIdsPerCall?: number;
}

export class IdBatches {
  private readonly source: IdSource;
  private readonly timeoutMs: number;
  private readonly maxIdsPerCall: number;
  /** Batches of this turn, not sent yet; the last one takes new requests while they fit. */
  private gathering: Batch[] = [];

  constructor(source: IdSource, options: IdBatchOptions) {
    this.source = source;
    this.timeoutMs = options.requestTimeoutMs;
    this.maxIdsPerCall = options.maxIdsPerCall ?? idLimits.batchCountMax;
  }

  /** Adds `waiter` to this turn's call; `cancel(waiter)` ends its wait. */
  add(waiter: IdWaiter): void {
    let batch = this.gathering[this.gathering.length - 1];
    if (!batch || (batch.total > 0 && batch.total + waiter.count > this.maxIdsPerCall)) {
      batch = new Batch();
      // The end of the turn: after the poll phase, so every request read in it is in.
      if (this.gathering.length === 0) setImmediate(this.flush);
      this.gathering.push(batch);
    }
    waiter.batch = batch;
    waiter.waiting = true;
    batch.waiters.push(waiter);
    batch.total += waiter.count;
    batch.live++;
  }

  private readonly flush = (): void => {
    const batches = this.gathering;
    this.gathering = [];
    for (const batch of batches) this.start(batch);
  };

  private start(batch: Batch): void {
    batch.started = true;
    if (batch.live === 0) {
      batch.settled?.();
      return;
    }
    const controller = new AbortController();
    batch.controller = controller;
    const timeoutMs = this.timeoutMs;
    batch.timer = setTimeout(
      () =>
        controller.abort(
          new HttpError(
            503,
            "timeout",
            `no IDs within ${timeoutMs} ms, the server's request timeout (too few nodes ` +
              "answered in time, or the timeout is shorter than a round): retry later",
          ),
        ),
      Math.max(0, timeoutMs - (performance.now() - batch.firstAtMs)),
    );
    let call: Promise<bigint[]>;
    try {
      call = this.source.nextBatch(batch.total, { signal: controller.signal });
    } catch (error) {
      call = Promise.reject(error);
    }
    call.then(
      (ids) => this.served(batch, ids),
      (error: unknown) => this.failed(batch, error),
    );
  }

  private served(batch: Batch, ids: bigint[]): void {
    clearTimeout(batch.timer);
    if (ids.length !== batch.total) {
      this.failed(
        batch,
        new Error(`the ID source gave ${ids.length} IDs, not the ${batch.total} asked for`),
      );
      return;
    }
    let next = 0;
    for (const waiter of batch.waiters) {
      if (!waiter.waiting) continue; // cancelled while in flight: its IDs are the hole at the end
      waiter.waiting = false;
      const { count } = waiter;
      const mine = count === ids.length ? ids : ids.slice(next, next + count);
      next += count;
      waiter.served(mine);
    }
    batch.settled?.();
  }

  private failed(batch: Batch, error: unknown): void {
    clearTimeout(batch.timer);
    const signal = batch.controller?.signal;
    const reason: unknown = signal?.aborted ? signal.reason : error;
    const waiting = batch.waiters.filter((waiter) => waiter.waiting);
    if (waiting.length > 1 && isCapacityError(reason)) {
      // The sum did not fit below the end of the ID space; a request
      // alone may (2 of 17 IDs left, beside one for 100): each is asked
      // for again, on its own.
      this.oneByOne(waiting, batch.firstAtMs, batch.settled);
      return;
    }
    for (const waiter of waiting) {
      waiter.waiting = false;
      waiter.failed(reason);
    }
    batch.settled?.();
  }

  /**
   * `waiters` of a batch that failed for want of room, each in a call of
   * its own, in arrival order, one after the other: each gets the answer it
   * would have got alone (its IDs, or the 507 its own count meets), the
   * IDs stay in arrival order, and each call is made after the one before
   * returned, so real-time order holds as for any call. A failed call gave
   * out no ID, so none goes out twice. The request timeout still counts
   * from the first request's arrival.
   */
  private oneByOne(
    waiters: readonly IdWaiter[],
    firstAtMs: number,
    settled: (() => void) | undefined,
  ): void {
    let i = 0;
    const next = (): void => {
      // Requests cancelled meanwhile are passed over here, in a loop: a
      // batch started with nobody settles at once, and a long run of them
      // would recurse once each (a stack overflow past a few thousand).
      let waiter = waiters[i++];
      while (waiter && !waiter.waiting) waiter = waiters[i++];
      if (!waiter) {
        settled?.();
        return;
      }
      const batch = new Batch(firstAtMs);
      batch.settled = next;
      waiter.batch = batch;
      batch.waiters.push(waiter);
      batch.total = waiter.count;
      batch.live = 1;
      this.start(batch);
    };
    next();
  }

  /** Ends the wait of `waiter` (added before); its IDs, if they come, go to nobody. */
  cancel(waiter: IdWaiter): void {
    if (!waiter.waiting) return;
    waiter.waiting = false;
    const batch = waiter.batch as Batch;
    batch.live--;
    if (!batch.started) {
      batch.total -= waiter.count;
      return;
    }
    if (batch.live === 0) {
      clearTimeout(batch.timer);
      batch.controller?.abort(nobodyWaits);
    }
  }
}
