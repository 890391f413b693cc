/** A waiter's registration in the nodes' queues, as the acquire and release scripts take it (heir-queue.ts). */

/**
 * A caller's registration in the nodes' queue (heir-queue.ts), or with
 * `waitMs` 0 only its id (a caller that will not wait: its instance's
 * turn reservation still lets it in).
 */
export interface QueueArgs {
  readonly waiterId: string;
  /** "0" until the nodes gave one: then the same on every node. */
  readonly ticket: string;
  /** How long the registration lasts unless renewed, in ms (node time); 0: not queued. */
  readonly waitMs: number;
  /**
   * Whether an earlier attempt carried this waiter id, so that a node may
   * have queued it: only then does a grant have a registration to remove.
   */
  readonly mayBeQueued?: boolean;
}

/** A registration as the acquire and release scripts read it: waiter id, ticket, registration time (ms). */
export function registrationArgs(queue: QueueArgs): string[] {
  return [queue.waiterId, queue.ticket, String(queue.waitMs)];
}
