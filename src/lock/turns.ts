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
 * node-redlock say, or a try-lock of another instance, may take it). Only
 * multi-key locks have no turn: their releases always hand over.
 */

import type { Timer } from "../clock.js";

/** Keys with a turn remembered at most; beyond, all are forgotten (a turn then starts over). */
const turnsKeptMax = 100_000;

/**
 * A kept release's pass not run yet: due on the next turn of the event
 * loop unless attempts of ours that started after the release hold it.
 */
export interface PendingPass {
  readonly run: () => void;
  /** Attempts of ours on the key started since the kept release and not ended. */
  held: number;
}

/** What a lock must tell about itself to be kept: its keys (one, for a turn). */
interface TurnLock {
  readonly keys: readonly string[];
}

export class Turns {
  private readonly turnMs: number;
  /**
   * Per key: when this instance's turn began (the instance's clock, ms),
   * recorded by a kept release that saw waiters; forgotten when the turn
   * ends or is passed. A key nobody else waits for has no entry.
   */
  private readonly began = new Map<string, number>();
  /**
   * Per key: when the lock of ours on it was granted (one at a time: the
   * lock is exclusive), until its release reads it; a turn with no entry
   * begins there. A Map by key, not a WeakMap by lock: weak entries for
   * thousands of grants a second cost the garbage collector ~10 % of an
   * uncontended 64-worker loop.
   */
  private readonly grantedAt = new Map<string, number>();
  /** Per key: the pass of a kept release, not run yet. */
  private readonly passes = new Map<string, PendingPass>();

  constructor(turnMs: number) {
    this.turnMs = turnMs;
  }

  /**
   * Whether a release of ours may have kept `keys` for this instance (a
   * turn goes on with others waiting): only then does a caller that will
   * not wait need its waiter id, which lets it in where the nodes keep the
   * key for its instance. Every other such caller sends none (four
   * arguments less in each of its calls).
   */
  mayKeep(keys: readonly string[]): boolean {
    if (this.turnMs === 0 || keys.length !== 1) return false;
    return this.began.has(keys[0]!) || this.passes.has(keys[0]!);
  }

  /**
   * An attempt of this instance on `keys` starts. A pass due for the key
   * is held until the attempts started since the release end: run now, it
   * would reserve the key for another instance under our attempt and split
   * the nodes' votes. Returns what `attemptEnded` is to be given.
   */
  attemptStarted(keys: readonly string[]): PendingPass | undefined {
    if (this.turnMs === 0 || keys.length !== 1) return undefined;
    const pass = this.passes.get(keys[0]!);
    if (pass) pass.held++;
    return pass;
  }

  /**
   * That attempt ended at `nowMs`, `granted` or not. A grant makes a
   * pending pass needless (our next release decides anew). When the last
   * attempt holding a pass ends without a grant, the pass runs: nobody of
   * ours took the key, the others must hear. An attempt that was already
   * out at the release (refused by the lock released, say) holds nothing:
   * the pass then runs on the next tick, unless a newer attempt holds it.
   *
   * A refusal does not end the turn: the holder may be ours (two callers
   * of this instance taking turns), and the turn is bounded by time anyway.
   */
  attemptEnded(
    keys: readonly string[],
    holding: PendingPass | undefined,
    granted: boolean,
    nowMs: number,
  ): void {
    if (this.turnMs === 0 || keys.length !== 1) return;
    const key = keys[0]!;
    if (granted) {
      // Locks that expire unreleased leave entries: a bound on the memory.
      if (!this.grantedAt.has(key) && this.grantedAt.size >= turnsKeptMax) this.grantedAt.clear();
      this.grantedAt.set(key, nowMs);
      this.passes.delete(key);
      return;
    }
    if (!holding) return;
    holding.held--;
    if (holding.held === 0 && this.passes.get(key) === holding) this.runPass(key, holding);
  }

  /**
   * When the turn in which `lock` is released at `nowMs` began, if it still
   * lasts: the release may keep the key free for this instance instead of
   * reserving it for another instance's waiter. Undefined: the turn is over
   * (or turns are off, or the lock has several keys).
   */
  turnOf(lock: TurnLock, nowMs: number): number | undefined {
    if (this.turnMs === 0 || lock.keys.length !== 1) return undefined;
    const key = lock.keys[0]!;
    const granted = this.grantedAt.get(key);
    this.grantedAt.delete(key);
    const began = this.began.get(key) ?? granted;
    if (began !== undefined && nowMs - began < this.turnMs) return began;
    this.began.delete(key);
    return undefined;
  }

  /**
   * After a kept release of `key` in the turn that `began`: with waiters
   * queued on the nodes, the turn is remembered and `pass` runs on the next
   * turn of the event loop (`timer(0)`) unless an attempt of ours on the
   * key has started by then (then when those attempts end without a
   * grant); with none queued, the turn is over (nobody to take turns with).
   */
  kept(key: string, began: number, waitersQueued: boolean, timer: Timer, pass: () => void): void {
    if (!waitersQueued) {
      this.began.delete(key);
      return;
    }
    if (!this.began.has(key) && this.began.size >= turnsKeptMax) this.began.clear();
    this.began.set(key, began);
    const pending: PendingPass = { run: pass, held: 0 };
    this.passes.set(key, pending);
    timer(0, () => {
      if (this.passes.get(key) === pending && pending.held === 0) this.runPass(key, pending);
    });
  }

  /**
   * The instance closes: every pass no attempt holds runs now (the others
   * must still hear); a held one runs when its attempts fail, as they will.
   */
  passAll(): void {
    for (const [key, pending] of [...this.passes]) {
      if (pending.held === 0) this.runPass(key, pending);
    }
  }

  private runPass(key: string, pending: PendingPass): void {
    this.passes.delete(key);
    this.began.delete(key);
    pending.run();
  }
}
