/**
 * The waiters of one Redlock instance, first come first served per key.
 *
 * Blind polling wastes the time between a release and the next poll and
 * lets whoever polls at the right moment barge ahead. Instead a waiter parks
 * here after a lost attempt and is woken when a lock on one of its keys is
 * released by this instance, or when a node names it the heir of a release
 * (heir-queue.ts, through pub/sub), with a fallback timer for
 * notifications that never come. A wake-up is only a hint: the woken
 * waiter still has to win an ordinary acquire round.
 *
 * Only the waiter at the head of all its keys' queues attempts; the others
 * wait their turn, and a new caller joins the tail instead of racing the
 * queue. A release can also hand its keys directly to the head (see
 * `Handoff`), which saves the round in which the lock is free.
 */

import { LinkedList } from "../linked-list.js";
import { keySetOf, type Waiter } from "./waiter.js";

/**
 * Early heir notices kept at most: one per caller in its first attempt,
 * plus late ones for callers already gone; past this many all are
 * forgotten (a caller whose notice is lost polls).
 */
const limitOfEarlyNotices = 10_000;

/** Keys whose run of handoffs is remembered at most; past this many all start again. */
const handoffRunsKeptMax = 100_000;

export interface WaitQueueEvents {
  /** A key got its first waiter (start listening for heir notices). */
  onWatch(key: string): void;
}

export class WaitQueues {
  /** Per key, its waiters in arrival order. */
  private readonly queues = new Map<string, LinkedList<Waiter>>();
  /** The waiters that have an id in the nodes' queues, by id. */
  private readonly byId = new Map<string, Waiter>();
  /**
   * Heir notices for ids with no waiter here yet: a notice can come while
   * the caller's first attempt is still undoing, before it joins the
   * queue; it resumes at once when it does (see `add`, `forget`).
   */
  private readonly early = new Set<string>();
  /**
   * Per key: handoffs in a row since it was last really released, and how
   * many may come before the next real release.
   */
  private readonly handoffRuns = new Map<string, { run: number; limit: number }>();
  private readonly events: WaitQueueEvents;

  constructor(events: WaitQueueEvents) {
    this.events = events;
  }

  private count = 0;
  private lostCount = 0;

  /** Waiters queued now. */
  get size(): number {
    return this.count;
  }

  /** Ends every park with `reason` (the instance is closing). */
  abortAll(reason: unknown): void {
    // A copy first: an abort that removed its waiter at once would move the slots.
    const waiters = [...this.queues.values()].flatMap((queue) => queue.values());
    for (const waiter of waiters) waiter.abort(reason);
  }

  /** Whether any waiter of this instance waits for one of `keys`. */
  hasWaiters(keys: readonly string[]): boolean {
    return keys.some((key) => this.queues.has(key));
  }

  add(waiter: Waiter): void {
    this.count++;
    if (waiter.id !== undefined) {
      this.byId.set(waiter.id, waiter);
      if (this.early.delete(waiter.id)) waiter.wake();
    }
    waiter.places = waiter.keys.map((key) => {
      let queue = this.queues.get(key);
      if (!queue) {
        queue = new LinkedList<Waiter>();
        this.queues.set(key, queue);
        this.events.onWatch(key);
      }
      return queue.push(waiter);
    });
  }

  /**
   * Removes the waiter. With `wakeNext` (it gave up, so the lock may be
   * free) the waiters that move up to the head are woken to try; a waiter
   * that got the lock leaves them parked until it releases.
   */
  remove(waiter: Waiter, wakeNext: boolean): void {
    const promoted: Waiter[] = [];
    let found = false;
    waiter.keys.forEach((key, i) => {
      const queue = this.queues.get(key);
      const place = waiter.places[i];
      if (!queue || !place) return;
      const wasHead = queue.first() === waiter;
      if (!queue.remove(place)) return;
      found = true;
      // The key's run of handoffs outlives an empty queue: two callers
      // handing the lock back and forth empty it at every handoff, and
      // their run must still end (see `reallyReleased`).
      if (queue.size === 0) this.queues.delete(key);
      else if (wasHead) promoted.push(queue.first()!);
    });
    if (found) this.count--;
    if (waiter.id !== undefined) this.byId.delete(waiter.id);
    if (!wakeNext) return;
    for (const next of promoted) if (this.isFirst(next)) next.wake();
  }

  /**
   * First in every queue it is in: its turn to attempt. Queues are appended
   * to in one step per waiter, so they agree on order and some waiter is
   * always first everywhere (no deadlock between multi-key waiters).
   */
  isFirst(waiter: Waiter): boolean {
    return waiter.keys.every((key) => this.queues.get(key)?.first() === waiter);
  }

  /**
   * The waiter a lock on exactly `keys` can be handed to: first, parked,
   * same keys; "yield" once the key's run of handoffs in a row reached its
   * limit (at first `runMin`): then the lock is really released, so that
   * waiters in other processes get their chance, and the run starts again.
   */
  heirFor(keys: readonly string[], runMin: number): Waiter | "yield" | undefined {
    const head = this.queues.get(keys[0]!)?.first();
    if (!head?.parked || !this.isFirst(head)) return undefined;
    if (head.keySet !== keySetOf(keys)) return undefined;
    let runs = this.handoffRuns.get(keys[0]!);
    if (!runs) {
      // Runs of keys whose last lock expired unreleased are not forgotten otherwise.
      if (this.handoffRuns.size >= handoffRunsKeptMax) this.handoffRuns.clear();
      runs = { run: 0, limit: runMin };
      this.handoffRuns.set(keys[0]!, runs);
    }
    if (runs.run >= runs.limit) {
      runs.run = 0;
      return "yield";
    }
    runs.run++;
    return head;
  }

  /**
   * `key` was really released (the nodes' queue head, if any, had its
   * chance): its run of handoffs starts again, and is forgotten if no
   * waiter of ours is left.
   */
  reallyReleased(key: string): void {
    const runs = this.handoffRuns.get(key);
    if (!runs) return;
    if (this.queues.has(key)) runs.run = 0;
    else this.handoffRuns.delete(key);
  }

  /**
   * A handoff of `key` found a waiter of another instance at the head of a
   * node's queue: the run's limit is `runMin` again, so that a run grown
   * long while nobody else waited ends soon (its next yield names that
   * waiter the heir, which keeps the limit there).
   */
  othersWait(key: string, runMin: number): void {
    const runs = this.handoffRuns.get(key);
    if (runs) runs.limit = runMin;
  }

  /**
   * After a yield of `key`: if no other instance was listening, the next
   * yield comes after twice as many handoffs (up to `runMax`); if one was,
   * after `runMin` again.
   */
  yielded(key: string, contested: boolean, runMin: number, runMax: number): void {
    const runs = this.handoffRuns.get(key);
    if (runs) runs.limit = contested ? runMin : Math.min(runs.limit * 2, runMax);
  }

  /** Wakes the waiter a node named heir (a late or repeated notice for one gone is ignored). */
  wakeHeir(waiterId: string): Waiter | undefined {
    const waiter = this.byId.get(waiterId);
    if (waiter) waiter.wake();
    else {
      // Late notices for callers already gone pile up here: a bound on the memory.
      if (this.early.size >= limitOfEarlyNotices) this.early.clear();
      this.early.add(waiterId);
    }
    return waiter;
  }

  /** The caller with this id is done: a notice for it that came early is dropped. */
  forget(waiterId: string): void {
    this.early.delete(waiterId);
  }

  /** How many times notices were lost (see `wakeHeads`). */
  get noticesLost(): number {
    return this.lostCount;
  }

  /**
   * Notices may have been lost: wakes the first waiter of every key whose
   * turn it is. A caller not queued here yet (in its first attempts) sees
   * `noticesLost` change when it joins.
   */
  wakeHeads(): void {
    this.lostCount++;
    this.released([...this.queues.keys()]);
  }

  /** After `keys` were released: wakes the first waiter of each key whose turn it is. */
  released(keys: readonly string[]): void {
    for (const key of keys) {
      const head = this.queues.get(key)?.first();
      if (head && this.isFirst(head)) head.wake();
    }
  }
}
