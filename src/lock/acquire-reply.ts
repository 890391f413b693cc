/** What an acquire's reply says (acquire-script.ts): granted, refused, or handed over. */

/** The acquire's code: the reply itself, or with fences its first element. */
export const acquireReply = {
  /** A key exists (held by someone else). */
  refused: 0,
  /** Every key was free and is now ours. */
  granted: 1,
  /** Granted, and every key held the value of the lock handed to us (see handoff.ts). */
  replaced: 2,
  /**
   * Replaced, and a waiter of another instance heads this node's queue for
   * the key: the instance's run of handoffs is to end soon (wait-queue.ts).
   */
  replacedOthersWait: 3,
} as const;

/** Whether an acquire reply grants the lock; `fenced`: the acquire carried counters. */
export function isGrantedBy(fenced: boolean): (reply: unknown) => boolean {
  return fenced ? isFencedGrant : isPlainGrant;
}

const isReplacedCode = (code: unknown) =>
  code === acquireReply.replaced || code === acquireReply.replacedOthersWait;
export const isGrantCode = (code: unknown) => code === acquireReply.granted || isReplacedCode(code);
const codeOf = (reply: unknown) => (Array.isArray(reply) ? reply[0] : reply);
const isPlainGrant = (reply: unknown) => isGrantCode(reply);
const isFencedGrant = (reply: unknown) => Array.isArray(reply) && isGrantCode(reply[0]);

/** Whether an acquire reply says the keys held the value of the lock handed to us. */
export function replacedHandedOff(reply: unknown): boolean {
  return isReplacedCode(codeOf(reply));
}

/** Whether a handoff's acquire reply says a waiter of another instance heads the node's queue. */
export function othersWaitAfterHandoff(reply: unknown): boolean {
  return codeOf(reply) === acquireReply.replacedOthersWait;
}
