/**
 * An instance's turn on a contended lock key: how long it may keep taking
 * back a key it releases before the nodes hand it to the next waiter of
 * another instance.
 *
 * Handing every grant to another process is fair, but each handoff costs
 * a round more than a release and a retake by the releaser (the releaser's
 * next attempt is refused and queues it): with a few processes looping on
 * one key, that made redquorum several times slower than the barging
 * libraries, which let the releaser take the key straight back. Go's
 * `sync.Mutex` settles the same trade-off with a bound: newcomers may
 * barge, but a waiter that waited more than 1 ms is handed the mutex
 * directly. Here the bound is the turn: for `turnMs` from the grant that
 * began it, a release of a single-key lock frees the key and, where
 * waiters are queued, reserves it for this instance for a moment (script
 * mode "keep", `limits.turnReservationMs`), so this instance's next
 * acquire finds it free;
 * after that, the release reserves the key for the head of each node's
 * queue and notifies that waiter (heir-queue.ts), and this instance's next
 * attempt queues behind it. A waiter therefore waits at most about one
 * turn (plus one hold) per instance ahead of it.
 *
 * A turn that ends because the instance stopped taking the key (a caller
 * that released for good, not to retake) must not leave the waiters to
 * their fallback polls: if the kept release saw waiters queued, the turn is
 * passed — a release round that deletes nothing of ours reserves the key
 * and notifies the heir (release.ts) — on the next turn of the event loop,
 * unless an attempt of ours on the key has started by then; then when our
 * attempts end without a grant, or at once if the instance closes.
 *
 * None of this decides who holds the lock: a grant is a majority round as
 * ever; a kept key is a free key (a client that ignores reservations,
 * node-redlock say, may take it). Only multi-key locks are left out: the nodes
 * queue only single-key waiters.
 */

import type { Timer } from "../clock.js";

/** Keys with a turn remembered at most; beyond, all are forgotten (a turn then starts over). */
const turnsKeptMax = 100_000;

/** A pass not run yet: due on the next turn of the event loop, or held while an acquire of ours runs. */
interface PendingPass {
  readonly run: () => void;
  held: boolean;
}

export class Turns {
  private readonly turnMs: number;
  /** Per key: when this instance's turn began (the instance's clock, ms). */
  private readonly began = new Map<string, number>();
  /** Per key: the attempts of this instance running now. */
  private readonly attempts = new Map<string, number>();
  /** Per key: the pass of a kept release, not run yet. */
  private readonly passes = new Map<string, PendingPass>();

  constructor(turnMs: number) {
    this.turnMs = turnMs;
  }

  /**
   * An attempt of this instance on `keys` starts. A pass due for the key
   * is held until the attempts end: run now, it would reserve the key for
   * another instance under our attempt and split the nodes' votes.
   */
  attemptStarted(keys: readonly string[]): void {
    if (this.turnMs === 0 || keys.length !== 1) return;
    const key = keys[0]!;
    this.attempts.set(key, (this.attempts.get(key) ?? 0) + 1);
    const pass = this.passes.get(key);
    if (pass) pass.held = true;
  }

  /**
   * That attempt ended, `granted` or not, at `nowMs`. A grant begins a turn
   * unless one is going on (even one whose time is up: it ends at the next
   * release), and makes a held pass needless (our next release decides anew). When the last attempt ends without a grant, a
   * held pass runs: nobody of ours took the key, the others must hear.
   *
   * A refusal does not end the turn: the holder may be ours (two callers
   * of this instance taking turns), and the turn is bounded by time anyway.
   */
  attemptEnded(keys: readonly string[], granted: boolean, nowMs: number): void {
    if (this.turnMs === 0 || keys.length !== 1) return;
    const key = keys[0]!;
    const left = (this.attempts.get(key) ?? 1) - 1;
    if (left > 0) this.attempts.set(key, left);
    else this.attempts.delete(key);
    if (granted) {
      this.passes.delete(key);
      // A turn goes on until a release ends it (mayKeep) or it is passed,
      // however many grants (handoffs between our callers too) come first.
      if (this.began.has(key)) return;
      if (this.began.size >= turnsKeptMax) this.began.clear();
      this.began.set(key, nowMs);
      return;
    }
    const pass = this.passes.get(key);
    if (left === 0 && pass?.held) this.runPass(key, pass);
  }

  /**
   * Whether a release of `keys` at `nowMs` may keep the key free for this
   * instance instead of reserving it for another instance's waiter: while
   * the turn lasts. Otherwise the turn is over.
   */
  mayKeep(keys: readonly string[], nowMs: number): boolean {
    if (this.turnMs === 0 || keys.length !== 1) return false;
    const began = this.began.get(keys[0]!);
    if (began !== undefined && nowMs - began < this.turnMs) return true;
    this.began.delete(keys[0]!);
    return false;
  }

  /**
   * After a kept release of `key`: with waiters queued on the nodes, runs
   * `pass` on the next turn of the event loop (`timer(0)`) unless an
   * attempt of ours on the key has started by then (then when the attempts
   * end without a grant); with none queued, the turn is over (nobody to
   * take turns with).
   */
  kept(key: string, waitersQueued: boolean, timer: Timer, pass: () => void): void {
    if (!waitersQueued) {
      this.began.delete(key);
      return;
    }
    const pending: PendingPass = { run: pass, held: this.attempts.has(key) };
    this.passes.set(key, pending);
    timer(0, () => {
      if (this.passes.get(key) === pending && !pending.held) this.runPass(key, pending);
    });
  }

  /** Runs every pass not run yet (the instance closes: the others must still hear). */
  passAll(): void {
    for (const [key, pending] of [...this.passes]) this.runPass(key, pending);
  }

  private runPass(key: string, pending: PendingPass): void {
    this.passes.delete(key);
    this.began.delete(key);
    pending.run();
  }
}
