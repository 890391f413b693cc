/**
 * Invariant checks for programmer errors (never for bad input or failing
 * nodes: those get typed errors). A failed assertion is a bug in redquorum.
 */
export class AssertionError extends Error {
  override name = "AssertionError";
}

export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new AssertionError(`redquorum invariant violated: ${message}`);
}
