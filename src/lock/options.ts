/**
 * A Redlock instance's options: their types and their checks, with the
 * defaults from limits.ts. A call's own arguments (resources, TTL,
 * per-call options) are checked in call-arguments.ts.
 */
import type { Clock, RandomSource } from "../clock.js";
import { InvalidArgumentError } from "../errors.js";
import { defaults, limits } from "../limits.js";
import { internalKeyPrefix } from "../node/node-state.js";
import type { Logger, RedquorumEvent } from "../observe.js";
import type { NodeWarning } from "../quorum/node-group.js";
import {
  type ResolvedSharedOptions,
  requireNodeStallMs,
  requireNodeTimeoutMs,
  requireRepairDelayMs,
  resolveNodeChecks,
  resolveRuntime,
} from "../shared-options.js";
import {
  describe,
  rejectUnknownOptions,
  requireBoolean,
  requireInteger,
  requireNumber,
  requireOptionsObject,
  requireWellFormed,
} from "../validate.js";

export interface RetryOptions {
  /**
   * Attempts after the first. Default 10. A round a release's notice woke
   * a multi-resource waiter for counts a tenth of one.
   */
  retries?: number;
  /** Wait between attempts, in milliseconds. Default 200. */
  delayMs?: number;
  /** Each wait is `delayMs ± a random amount up to jitterMs`, in milliseconds. Default 100. */
  jitterMs?: number;
}

export interface RedlockOptions {
  /** Clock drift allowance as a fraction of the TTL. Default 0.01. */
  driftFactor?: number;
  /** Fixed drift allowance in milliseconds, added to `ttl * driftFactor`. Default 2. */
  driftMs?: number;
  /** Bound on each call to one node, in milliseconds. Default 50. */
  nodeTimeoutMs?: number;
  /** Bound on the first-contact check of a node (INFO, includes connecting), in milliseconds. Default 2000. */
  checkTimeoutMs?: number;
  /** Longest TTL any lock may ask for, in milliseconds. Default 300000 (5 minutes). */
  maxTtlMs?: number;
  /**
   * How long a node's checks (master role, run_id, not the same server as
   * another node) are trusted before they are made again, in milliseconds;
   * they are also made again after every reconnect. Default 10000.
   */
  recheckIntervalMs?: number;
  /**
   * The restart quarantine: a node that lost its data (restart without
   * persistence, FLUSHALL) stays out of service for `maxTtlMs`, so it cannot
   * help a second client take a lock it forgot. Turn it off only for nodes
   * with `appendonly yes` + `appendfsync always`. Default true.
   */
  quarantine?: boolean;
  /**
   * Fencing tokens: every grant carries `lock.fence`, strictly increasing
   * per resource across all clients. Default true; turning it off saves a
   * counter write per acquire but leaves the protected resource no way to
   * reject a writer whose lock silently expired (a paused process).
   */
  fencing?: boolean;
  /** Prepended to every resource name to form the Redis key. Default "" (the key is the resource). */
  keyPrefix?: string;
  /**
   * How long to wait after a node is found to have lost its fencing
   * counters before reading the others and repairing them, in
   * milliseconds: every round that might still count the lost node's old
   * vote has ended by then. Must exceed 1000 ms, the cap on every client's
   * `nodeTimeoutMs`. Default 2000.
   */
  repairDelayMs?: number;
  /**
   * How long a node may leave every command unanswered before it counts as
   * stalled and new calls to it fail at once instead of queueing on its
   * connection, in milliseconds; at least twice `nodeTimeoutMs`. Default 2000.
   */
  nodeStallMs?: number;
  retry?: RetryOptions;
  /**
   * How long this instance may keep taking back a single-key lock it
   * releases while waiters of other instances queue for it, in
   * milliseconds, counted from the grant that began its turn; then the
   * nodes hand the key to the longest waiter. Retaking saves the round a
   * handoff to another process costs; the turn bounds how long the others
   * wait (about one turn, or about 16 in-process handoffs, per instance
   * ahead). 0: every release that is not an in-process handoff hands over
   * (strict first come, first served across instances). Default 2.
   */
  turnMs?: number;
  /** Called for a node setting that endangers locks (eviction). Default: `process.emitWarning`. */
  onWarning?: (warning: NodeWarning) => void;
  /** Node state changes (unreachable, quarantined, repaired, excluded, back in service), as log lines. */
  logger?: Logger;
  /** Every event (node state changes, lock operations or ID rounds with outcome and duration), for metrics. */
  onEvent?: (event: RedquorumEvent) => void;
  /** Monotonic time source (tests and simulation). Default: `performance.now()`. */
  clock?: Clock;
  /** Randomness for lock values and jitter (tests and simulation). Default: `node:crypto`. */
  random?: RandomSource;
}

export interface AcquireOptions {
  /** Aborts the acquire (between and during attempts); it rejects with `signal.reason`. */
  signal?: AbortSignal;
  /**
   * Upper bound on the wait for the lock, retries included, in
   * milliseconds (0: one attempt). An instance's first call reaches the
   * nodes before it (within `checkTimeoutMs`); `signal` bounds everything.
   */
  waitMs?: number;
  /** Overrides the instance's retry settings for this call. */
  retry?: RetryOptions;
}

export interface UsingOptions extends AcquireOptions {
  /**
   * Extend once this much validity is left, in milliseconds. Default: half
   * the TTL, or the minimum below if it is more. At least the give-up
   * margin (two node timeouts and `driftMs`, at most a quarter of the TTL)
   * plus one node timeout, so that an extension can end before the routine
   * is given up on; at most what one extension gives (the TTL less the
   * drift allowance) less a quarter of the TTL, so that extensions are a
   * quarter TTL apart (the upper bound wins when the TTL is too short for
   * both).
   */
  extendThresholdMs?: number;
}

export interface ResolvedRetry {
  readonly retries: number;
  readonly delayMs: number;
  readonly jitterMs: number;
}

export interface ResolvedRedlockOptions extends ResolvedSharedOptions {
  readonly driftFactor: number;
  readonly driftMs: number;
  readonly maxTtlMs: number;
  readonly keyPrefix: string;
  readonly quarantine: boolean;
  readonly fencing: boolean;
  readonly repairDelayMs: number;
  readonly retry: ResolvedRetry;
  readonly turnMs: number;
}

const redlockOptionNames = [
  "driftFactor",
  "driftMs",
  "nodeTimeoutMs",
  "checkTimeoutMs",
  "maxTtlMs",
  "recheckIntervalMs",
  "keyPrefix",
  "quarantine",
  "fencing",
  "repairDelayMs",
  "nodeStallMs",
  "retry",
  "turnMs",
  "onWarning",
  "logger",
  "onEvent",
  "clock",
  "random",
] as const;

/** Option names of node-redlock and friends, mapped to ours. */
export const foreignOptionHints: Record<string, string> = {
  retryCount: "use retry: { retries }",
  retryDelay: "use retry: { delayMs }",
  retryJitter: "use retry: { jitterMs }",
  automaticExtensionThreshold:
    "use redlock.using(resources, ttlMs, routine, { extendThresholdMs })",
  timeout: "use nodeTimeoutMs (per node call) or waitMs (per acquire)",
};

export function resolveRedlockOptions(input: unknown): ResolvedRedlockOptions {
  const options = requireOptionsObject("options", input);
  rejectUnknownOptions("options", options, redlockOptionNames, foreignOptionHints);
  const maxTtlMs = requireInteger(
    "options.maxTtlMs",
    options.maxTtlMs ?? defaults.maxTtlMs,
    1,
    limits.ttlMsMax,
  );
  const nodeTimeoutMs = requireNodeTimeoutMs(options.nodeTimeoutMs, defaults.nodeTimeoutMs);
  const keyPrefix = requireKeyPrefix(options.keyPrefix ?? "");
  return {
    driftFactor: requireNumber(
      "options.driftFactor",
      options.driftFactor ?? defaults.driftFactor,
      0,
      0.5,
    ),
    driftMs: requireNumber(
      "options.driftMs",
      options.driftMs ?? defaults.driftMs,
      0,
      limits.ttlMsMax,
    ),
    nodeTimeoutMs,
    nodeStallMs: requireNodeStallMs(options.nodeStallMs, nodeTimeoutMs),
    ...resolveNodeChecks(options),
    maxTtlMs,
    keyPrefix,
    quarantine: requireBoolean("options.quarantine", options.quarantine ?? true),
    fencing: requireBoolean("options.fencing", options.fencing ?? true),
    repairDelayMs: requireRepairDelayMs(options.repairDelayMs),
    retry: resolveRetry("options.retry", options.retry, defaults.retry),
    turnMs: requireInteger(
      "options.turnMs",
      options.turnMs ?? defaults.turnMs,
      0,
      limits.turnMsMax,
    ),
    ...resolveRuntime(options),
  };
}

/** `options.keyPrefix`: a well-formed string within a resource name's bytes, outside redquorum's own keys. */
function requireKeyPrefix(keyPrefix: unknown): string {
  if (typeof keyPrefix !== "string" || Buffer.byteLength(keyPrefix) > limits.resourceBytesMax) {
    throw new InvalidArgumentError(
      "options.keyPrefix",
      `expected a string of at most ${limits.resourceBytesMax} bytes, got ${describe(keyPrefix)}`,
    );
  }
  requireWellFormed("options.keyPrefix", keyPrefix);
  if (keyPrefix.startsWith(internalKeyPrefix)) {
    throw new InvalidArgumentError(
      "options.keyPrefix",
      `${JSON.stringify(keyPrefix)} is in redquorum's own namespace ("${internalKeyPrefix}…": node markers, ` +
        "quarantine, fencing counters, IDs); choose another prefix",
    );
  }
  return keyPrefix;
}

export function resolveRetry(name: string, input: unknown, base: ResolvedRetry): ResolvedRetry {
  const retry = requireOptionsObject(name, input);
  rejectUnknownOptions(name, retry, ["retries", "delayMs", "jitterMs"], foreignOptionHints);
  const delayMs = requireInteger(
    `${name}.delayMs`,
    retry.delayMs ?? base.delayMs,
    0,
    limits.delayMsMax,
  );
  return {
    retries: requireInteger(`${name}.retries`, retry.retries ?? base.retries, 0, limits.retriesMax),
    delayMs,
    // Jitter beyond the delay would allow negative waits.
    jitterMs: requireInteger(
      `${name}.jitterMs`,
      retry.jitterMs ?? Math.min(base.jitterMs, delayMs),
      0,
      delayMs,
    ),
  };
}
