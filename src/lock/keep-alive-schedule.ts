/**
 * When the keep-alive of `Redlock.using` (keep-alive.ts) extends a lock and
 * when it gives up: pure maths from the TTL, the instance's node timeout
 * and drift allowance, and the caller's threshold or grace.
 */

import { driftAllowanceMs } from "../quorum/validity.js";
import { requireInteger } from "../validate.js";
import type { ResolvedRedlockOptions } from "./options.js";

/** A keep-alive's schedule (what the functions below give), and whom it tells its deadline. */
export interface KeepAliveOptions {
  /** The TTL each extension asks for, in milliseconds. */
  ttlMs: number;
  /** Extend once the validity left drops to this, in milliseconds. */
  extendThresholdMs: number;
  /** Give up (abort with LockLostError) once the validity left drops to this, in milliseconds. */
  marginMs: number;
  /** Wait before another try after a failed extension, in milliseconds. */
  retryDelayMs: number;
  /**
   * Told the validity left, in milliseconds, each time the deadline is set
   * again: after the start, every extension and every change of validity
   * (`redquorum lock` passes it on to its guard process).
   */
  onDeadline?: (validityLeftMs: number) => void;
}

/**
 * When `using` extends a lock of `ttlMs` and when it gives up, from the
 * instance's node timeout and drift allowance; `extendThresholdMs` is the
 * caller's option (checked here: an `InvalidArgumentError` names the range
 * allowed).
 */
export function usingSchedule(
  ttlMs: number,
  options: ScheduleInputs,
  extendThresholdMs: number | undefined,
): KeepAliveOptions {
  return graceSchedule(ttlMs, options, 0, extendThresholdMs).schedule;
}

type ScheduleInputs = Pick<ResolvedRedlockOptions, "nodeTimeoutMs" | "driftMs" | "driftFactor">;

/**
 * A schedule for a routine that needs `graceMs` between being told the
 * lock is going and the lock's end (`redquorum lock`: SIGTERM, then
 * SIGKILL after --kill-after, and the command must be gone before another
 * holder can have the lock). The routine is told `graceMs` earlier than
 * `using` tells its own; the extensions start early enough to have a node
 * timeout before that. `graceMs` is what the TTL leaves room for, at most
 * `wantedGraceMs`; `endMarginMs` is `using`'s own margin: the routine must
 * be stopped by the time the validity left is down to it.
 */
export function graceSchedule(
  ttlMs: number,
  options: ScheduleInputs,
  wantedGraceMs: number,
  extendThresholdMs?: number,
): { schedule: KeepAliveOptions; graceMs: number; endMarginMs: number } {
  const { nodeTimeoutMs, driftMs, driftFactor } = options;
  // Give up with two node timeouts of validity left, so the abort always
  // comes before the validity ends; extend at half the TTL by default.
  const endMarginMs = Math.min(Math.floor(ttlMs / 4), 2 * nodeTimeoutMs + driftMs);
  // Extensions at least a quarter of the TTL apart: a threshold near what
  // one extension gives (the TTL less the drift allowance) would start the
  // next one at once, a loop of rounds. Within that, an extension must
  // have time to finish (a node timeout) before the deadline at marginMs
  // aborts the routine.
  const extendedMs = ttlMs - driftAllowanceMs(ttlMs, driftFactor, driftMs);
  const thresholdMaxMs = Math.max(0, Math.floor(extendedMs - ttlMs / 4));
  const graceMs = Math.max(
    0,
    Math.min(Math.floor(wantedGraceMs), thresholdMaxMs - nodeTimeoutMs - 1 - endMarginMs),
  );
  const marginMs = endMarginMs + graceMs;
  const thresholdMinMs = Math.min(marginMs + nodeTimeoutMs + 1, thresholdMaxMs);
  const threshold =
    extendThresholdMs === undefined
      ? Math.min(Math.max(Math.floor(ttlMs / 2), thresholdMinMs), thresholdMaxMs)
      : requireInteger(
          "options.extendThresholdMs",
          extendThresholdMs,
          thresholdMinMs,
          thresholdMaxMs,
        );
  return {
    schedule: {
      ttlMs,
      extendThresholdMs: Math.max(threshold, marginMs + 1),
      marginMs,
      retryDelayMs: Math.max(1, nodeTimeoutMs),
    },
    graceMs,
    endMarginMs,
  };
}
