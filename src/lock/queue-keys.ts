/**
 * The nodes' wait queue's names (heir-queue.ts): the keys a lock key's
 * queue, reservation and their records are kept under on each node, and
 * the ids its waiters are known by there.
 *
 * The queue's keys are derived from the lock key inside the scripts
 * (`redquorum:queue:<key>`, `…:queue-expiry:<key>`, `…:heir:<key>`,
 * `…:heir-last:<key>`, `…:heir-kept:<key>`, `…:heir-skip:<key>`): like the marker, they only
 * work on independent masters, not Redis Cluster.
 */

/** A lock key's wait queue (a sorted set of waiter ids) is this prefix and the lock key. */
export const queueKeyPrefix = "redquorum:queue:";

/** A lock key's queue's registration expiries (a sorted set: waiter id by expiry time) are this prefix and the lock key. */
export const queueExpiryKeyPrefix = "redquorum:queue-expiry:";

/** A lock key's reservation (the waiter or instance it is kept for) is this prefix and the lock key. */
export const heirKeyPrefix = "redquorum:heir:";

/** The last waiter a lock key was reserved for (one turn each, see `reserve`) is this prefix and the lock key. */
export const heirLastKeyPrefix = "redquorum:heir-last:";

/** The waiter a free key is being kept for while its other keys are held (see `passOrKeep`) is this prefix and the lock key. */
export const heirKeptKeyPrefix = "redquorum:heir-kept:";

/**
 * The waiters a free key is not reserved for a while, as they passed it on
 * (see `passOrKeep`): a sorted set, each waiter scored by when that ends,
 * under this prefix and the lock key.
 */
export const heirSkipKeyPrefix = "redquorum:heir-skip:";

/** A waiter's id: its instance's id, a colon, a sequence number. */
export function waiterIdOf(instanceId: string, sequence: number): string {
  return `${instanceId}:${sequence}`;
}

/** The instance part of a waiter id. */
export function instanceOfWaiter(waiterId: string): string {
  return waiterId.slice(0, waiterId.indexOf(":"));
}
