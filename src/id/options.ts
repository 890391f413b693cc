/**
 * NextId's options: what a caller may pass, their defaults and bounds, and
 * the resolver that checks them once (the first problem found is reported).
 */
import type { Clock, RandomSource } from "../clock.js";
import { InvalidArgumentError } from "../errors.js";
import { idDefaults, idLimits, limits } from "../limits.js";
import type { NodeWarning } from "../node/admission.js";
import type { Logger, RedquorumEvent } from "../observe.js";
import {
  hookOption,
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
  requireOptionsObject,
} from "../validate.js";
import { requireIdKey } from "./keys.js";

export { idKeySuffixes } from "./keys.js";

/**
 * `range`: one conditional write per round, concurrent calls share a round
 * (group commit), rounds pipelined. `read-then-write`: per ID, a round that
 * reads a majority, then a round that writes their maximum + 1 (two round
 * trips per ID, no sharing between calls); kept for comparison.
 */
export type IdStrategy = "range" | "read-then-write" | SeedStrategy;

/**
 * @deprecated `"seed"` is the former name of `"read-then-write"`: still
 * accepted, and it behaves identically. Use `"read-then-write"`.
 */
export type SeedStrategy = "seed";

/** A strategy as NextId runs it (the deprecated alias resolved). */
export type ResolvedIdStrategy = "range" | "read-then-write";

/**
 * What a `range` round proposes. `dense`: just above the highest value
 * known (IDs 1, 2, 3, … with holes only after lost rounds). `clock`: at
 * least the wall clock in microseconds since the Unix epoch (a hybrid
 * logical clock), so the rounds of independent instances reach the nodes
 * nearly in the order of their values and most of them win; the IDs are
 * then ~1.8e15 and grow with time, and a counter that took one never goes
 * back to small IDs. Safety never rests on the clock: a proposal still wins
 * only above what a majority holds.
 */
export type IdProposals = "dense" | "clock";

export interface RepairEvent {
  /** The node whose counter was lost (restart without data, flush, deletion). */
  readonly endpoint: string;
  /**
   * The value it was raised to: the maximum read from N - Q + 1 other nodes
   * that kept their counter (`repairReadsOf`), which meet every winning majority.
   */
  readonly value: bigint;
}

export interface IdRetryOptions {
  /** Failed rounds a call may take part in before it fails. Default 30. */
  retries?: number;
  /** First backoff after a lost round, in milliseconds; doubles per loss. Default 1. */
  delayMs?: number;
  /** Largest backoff, in milliseconds. Each wait is a random amount up to the current bound. Default 100. */
  delayMsMax?: number;
}

export interface NextIdOptions {
  /** The counter's Redis key (its marker is `<key>:marker`). Default "redquorum:id". */
  key?: string;
  /**
   * How IDs are won. Default "range"; "read-then-write" for comparison.
   * `"seed"` is a deprecated alias of "read-then-write".
   */
  strategy?: IdStrategy;
  /** Default "dense"; "clock" for many independent instances (see IdProposals). `range` only. */
  proposals?: IdProposals;
  /** Bound on each node's answer in a round, in milliseconds, at most 1000. Default 200 (fsync on every write takes time). */
  nodeTimeoutMs?: number;
  /** Bound on the first-contact checks of a node, in milliseconds. Default 2000. */
  checkTimeoutMs?: number;
  /**
   * How long a node's checks (durability, master role, run_id) are trusted
   * before they are made again, in milliseconds; they are also made again
   * after every reconnect. Default 10000.
   */
  recheckIntervalMs?: number;
  retry?: IdRetryOptions;
  /** Rounds one instance may have in flight at once (`range` only). Default 4. */
  pipelineDepth?: number;
  /**
   * How long to wait after a node is found to have lost its counter before
   * reading the healthy majority and repairing it, in milliseconds: every
   * round that might still count the lost node's old vote has ended by then.
   * Must exceed 1000 ms, the cap on every client's `nodeTimeoutMs`. Default 2000.
   */
  repairDelayMs?: number;
  /**
   * How long a node may leave every command unanswered before it counts as
   * stalled and new calls to it fail at once instead of queueing on its
   * connection, in milliseconds; at least twice `nodeTimeoutMs`. Default 2000.
   */
  nodeStallMs?: number;
  /**
   * Accept nodes without `appendonly yes` + `appendfsync always`. Unsafe: a
   * node that loses acknowledged writes (power loss) can make IDs repeat.
   */
  unsafeAllowNonDurableNodes?: boolean;
  /**
   * Test-only: treat a node whose marker is gone as a node at 0 instead of
   * excluding it. Reproduces the repeated IDs the marker check prevents.
   */
  unsafeSkipMarkerCheck?: boolean;
  /** Called after a node's lost counter was repaired. Default: `process.emitWarning`. */
  onRepair?: (event: RepairEvent) => void;
  onWarning?: (warning: NodeWarning) => void;
  /** Node state changes (unreachable, quarantined, repaired, excluded, back in service), as log lines. */
  logger?: Logger;
  /** Every event (node state changes, lock operations or ID rounds with outcome and duration), for metrics. */
  onEvent?: (event: RedquorumEvent) => void;
  clock?: Clock;
  random?: RandomSource;
}

export interface ResolvedIdRetry {
  readonly retries: number;
  readonly delayMs: number;
  readonly delayMsMax: number;
}

export interface ResolvedNextIdOptions extends ResolvedSharedOptions {
  readonly key: string;
  readonly strategy: ResolvedIdStrategy;
  readonly proposals: IdProposals;
  readonly retry: ResolvedIdRetry;
  readonly pipelineDepth: number;
  readonly repairDelayMs: number;
  readonly unsafeAllowNonDurableNodes: boolean;
  readonly unsafeSkipMarkerCheck: boolean;
  readonly onRepair: (event: RepairEvent) => void;
}

const optionNames = [
  "key",
  "strategy",
  "proposals",
  "nodeTimeoutMs",
  "checkTimeoutMs",
  "recheckIntervalMs",
  "retry",
  "pipelineDepth",
  "repairDelayMs",
  "nodeStallMs",
  "unsafeAllowNonDurableNodes",
  "unsafeSkipMarkerCheck",
  "onRepair",
  "onWarning",
  "logger",
  "onEvent",
  "clock",
  "random",
] as const;

export function resolveNextIdOptions(input: unknown): ResolvedNextIdOptions {
  const options = requireOptionsObject("options", input);
  rejectUnknownOptions("options", options, optionNames);
  // Checked in this order (the first problem is the one reported).
  const key = requireIdKey(options.key ?? idDefaults.key);
  const strategy = requireStrategy(options.strategy ?? idDefaults.strategy);
  const proposals = requireProposals(options.proposals ?? idDefaults.proposals, strategy);
  const nodeTimeoutMs = requireNodeTimeoutMs(options.nodeTimeoutMs, idDefaults.nodeTimeoutMs);
  const nodeStallMs = requireNodeStallMs(options.nodeStallMs, nodeTimeoutMs);
  const repairDelayMs = requireRepairDelayMs(options.repairDelayMs ?? idDefaults.repairDelayMs);
  const retry = resolveIdRetry(options.retry);
  const resolved: ResolvedNextIdOptions = {
    key,
    strategy,
    proposals,
    nodeTimeoutMs,
    nodeStallMs,
    ...resolveNodeChecks(options),
    retry,
    pipelineDepth: requireInteger(
      "options.pipelineDepth",
      options.pipelineDepth ?? idDefaults.pipelineDepth,
      1,
      idLimits.pipelineDepthMax,
    ),
    repairDelayMs,
    unsafeAllowNonDurableNodes: requireBoolean(
      "options.unsafeAllowNonDurableNodes",
      options.unsafeAllowNonDurableNodes ?? false,
    ),
    unsafeSkipMarkerCheck: requireBoolean(
      "options.unsafeSkipMarkerCheck",
      options.unsafeSkipMarkerCheck ?? false,
    ),
    onRepair: hookOption("options.onRepair", options.onRepair ?? emitRepairWarning),
    ...resolveRuntime(options),
  };
  if (proposals === "clock" && typeof resolved.clock.epochMicros !== "function") {
    throw new InvalidArgumentError(
      "options.clock",
      'proposals: "clock" needs a clock with epochMicros() (microseconds since the Unix epoch)',
    );
  }
  return resolved;
}

/** The strategy by its name; the deprecated "seed" is the same as "read-then-write". */
function requireStrategy(strategy: unknown): ResolvedIdStrategy {
  if (strategy === "seed") return "read-then-write";
  if (strategy !== "range" && strategy !== "read-then-write") {
    throw new InvalidArgumentError(
      "options.strategy",
      `expected "range" or "read-then-write" ("seed" is its deprecated alias), got ${describe(strategy)}`,
    );
  }
  return strategy;
}

function requireProposals(proposals: unknown, strategy: ResolvedIdStrategy): IdProposals {
  if (proposals !== "dense" && proposals !== "clock") {
    throw new InvalidArgumentError(
      "options.proposals",
      `expected "dense" or "clock", got ${describe(proposals)}`,
    );
  }
  if (proposals === "clock" && strategy !== "range") {
    throw new InvalidArgumentError(
      "options.proposals",
      `"clock" applies to the "range" strategy; the "read-then-write" strategy always proposes the highest value read + 1`,
    );
  }
  return proposals;
}

function resolveIdRetry(input: unknown): ResolvedIdRetry {
  const retry = requireOptionsObject("options.retry", input);
  rejectUnknownOptions("options.retry", retry, ["retries", "delayMs", "delayMsMax"]);
  const delayMs = requireInteger(
    "options.retry.delayMs",
    retry.delayMs ?? idDefaults.retry.delayMs,
    0,
    limits.delayMsMax,
  );
  return {
    retries: requireInteger(
      "options.retry.retries",
      retry.retries ?? idDefaults.retry.retries,
      0,
      limits.retriesMax,
    ),
    delayMs,
    delayMsMax: requireInteger(
      "options.retry.delayMsMax",
      retry.delayMsMax ?? Math.max(delayMs, idDefaults.retry.delayMsMax),
      delayMs,
      limits.delayMsMax,
    ),
  };
}

export function requireBatchCount(count: unknown): number {
  return requireInteger("count", count, 1, idLimits.batchCountMax);
}

function emitRepairWarning(event: RepairEvent): void {
  process.emitWarning(
    `redquorum repaired the ID counter on ${event.endpoint} (it had lost its data, or may have come back older) to ${event.value}`,
    { code: "REDQUORUM_REPAIR" },
  );
}
