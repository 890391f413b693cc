/**
 * One caller of a Redlock instance waiting for its turn (wait-queue.ts
 * keeps them in order): parked between attempts until a release wakes it,
 * a release is handed to it, or its fallback timer fires.
 */

import { onAbort, type Timer } from "../clock.js";
import type { ListEntry } from "../linked-list.js";
import type { Handoff } from "./handoff.js";

/** Why a parked waiter resumed. */
export type Wake =
  | { readonly kind: "released" }
  | { readonly kind: "handoff"; readonly handoff: Handoff }
  | { readonly kind: "timer" };

/** A key set, order-free (a handoff needs exactly the same keys). */
export function keySetOf(keys: readonly string[]): string {
  return keys.length === 1 ? keys[0]! : [...keys].sort().join("\u0000");
}

export class Waiter {
  readonly keys: readonly string[];
  /** Its id in the nodes' queues (heir-queue.ts); none for a waiter that is not queued there. */
  readonly id: string | undefined;
  /** The key set, order-free: a handoff needs exactly the same keys. */
  readonly keySet: string;
  /** Set while parked: ends the park with a wake-up, or with an error. */
  private finish: ((wake: Wake | undefined, error?: unknown) => void) | undefined;
  /** A release came while the waiter was busy with an attempt: resume at once next time. */
  private wakePending = false;
  /** Its place in each of its keys' queues (WaitQueues), in the order of `keys`. */
  places: ListEntry<Waiter>[] = [];

  constructor(keys: readonly string[], id?: string) {
    this.keys = keys;
    this.id = id;
    this.keySet = keySetOf(keys);
  }

  get parked(): boolean {
    return this.finish !== undefined;
  }

  /**
   * Waits for a wake-up, at most `ms` (then `{ kind: "timer" }`, from
   * `timer`, the instance's clock); rejects with the reason of `signal` or
   * of `abort()`.
   */
  park(ms: number, timer: Timer, signal: AbortSignal | undefined): Promise<Wake> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.wakePending) {
      this.wakePending = false;
      return Promise.resolve({ kind: "released" });
    }
    return new Promise<Wake>((resolve, reject) => {
      const unwatch = onAbort(signal, () => this.finish?.(undefined, signal?.reason));
      this.finish = (wake, error) => {
        this.finish = undefined;
        cancelTimer();
        unwatch();
        if (wake) resolve(wake);
        else reject(error);
      };
      const cancelTimer = timer(ms, () => this.finish?.({ kind: "timer" }));
    });
  }

  /** Resumes the waiter now, or right after its current attempt. */
  wake(): void {
    if (this.finish) this.finish({ kind: "released" });
    else this.wakePending = true;
  }

  /** Hands a release to this parked waiter; false if it is not parked. */
  handOff(handoff: Handoff): boolean {
    if (!this.finish) return false;
    this.finish({ kind: "handoff", handoff });
    return true;
  }

  /** Ends a park with `reason` (the instance is closing); no-op when not parked. */
  abort(reason: unknown): void {
    this.finish?.(undefined, reason);
  }
}
