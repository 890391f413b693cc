/**
 * Validity maths of seed 1, on the monotonic clock. A lock whose acquire
 * round started at `startMs` is valid until `startMs + ttl - drift`, where
 * drift = ttl * driftFactor + driftMs covers the rate difference between the
 * client's and the nodes' clocks. Measuring from the start of the round (not
 * from the replies) is what makes it safe: every key was set after `startMs`,
 * so each expires no earlier than `startMs + ttl` by the node's clock.
 */
export function driftAllowanceMs(ttlMs: number, driftFactor: number, driftMs: number): number {
  return ttlMs * driftFactor + driftMs;
}

export function validUntilMs(
  startMs: number,
  ttlMs: number,
  driftFactor: number,
  driftMs: number,
): number {
  return startMs + ttlMs - driftAllowanceMs(ttlMs, driftFactor, driftMs);
}

/** Seed 1's validity = ttl − elapsed − drift, as of `nowMs`. */
export function validityMs(
  startMs: number,
  nowMs: number,
  ttlMs: number,
  driftFactor: number,
  driftMs: number,
): number {
  return validUntilMs(startMs, ttlMs, driftFactor, driftMs) - nowMs;
}
