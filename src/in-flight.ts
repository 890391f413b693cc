/**
 * Promises under way, for a `close()` that waits for them: each leaves when
 * it settles. Kept in a LinkedList, not a Set: one goes in and out per call
 * or round (see linked-list.ts for what a Set costs there).
 */
import { LinkedList } from "./linked-list.js";

export class InFlight {
  private readonly list = new LinkedList<Promise<unknown>>();

  get size(): number {
    return this.list.size;
  }

  /**
   * Tracks `promise` until it settles; returns it. A rejection counts as
   * settled and is handled here: a promise whose failure must surface needs
   * its own handler (the caller's, or a `.catch` in its chain).
   */
  add<T>(promise: Promise<T>): Promise<T> {
    const entry = this.list.push(promise);
    const leave = () => {
      this.list.remove(entry);
    };
    promise.then(leave, leave);
    return promise;
  }

  /** Resolves once every promise tracked has settled, those added meanwhile too. */
  async settled(): Promise<void> {
    while (this.list.size > 0) await Promise.allSettled(this.list.values());
  }
}
