/**
 * The options Redlock and NextId share: the node timeout (each with its own
 * default), the node checks' timeout and interval, and what they are told
 * and run on (onWarning, logger/onEvent, clock, random); and the NodeGroup
 * options both build from them. Each owner's resolver calls these in its
 * own order (the first problem found is the one reported).
 */
import { type Clock, cryptoRandom, type RandomSource, systemClock } from "./clock.js";
import { InvalidArgumentError } from "./errors.js";
import { defaults, limits } from "./limits.js";
import type { NodeWarning } from "./node/admission.js";
import type { Observer } from "./observe.js";
import { callHook, type ObserveOptions, resolveObserveOptions } from "./observe.js";
import type { NodeGroupOptions } from "./quorum/node-group.js";
import { requireFunction, requireInteger, requireMethods } from "./validate.js";

/** The node checks' bounds, resolved. */
export interface ResolvedNodeChecks {
  readonly checkTimeoutMs: number;
  readonly recheckIntervalMs: number;
}

/** What an owner is told and runs on, resolved. */
export interface ResolvedRuntime {
  readonly onWarning: (warning: NodeWarning) => void;
  readonly observe: ObserveOptions;
  readonly clock: Clock;
  readonly random: RandomSource;
}

/** All an owner's NodeGroup is built from. */
export interface ResolvedSharedOptions extends ResolvedNodeChecks, ResolvedRuntime {
  readonly nodeTimeoutMs: number;
  readonly nodeStallMs: number;
}

/** `options.nodeTimeoutMs`, or the owner's default; at most `limits.nodeTimeoutMsMax` for every owner. */
export function requireNodeTimeoutMs(value: unknown, defaultMs: number): number {
  return requireInteger("options.nodeTimeoutMs", value ?? defaultMs, 1, limits.nodeTimeoutMsMax);
}

/**
 * `options.nodeStallMs` (default `defaults.nodeStallMs`): at least twice the
 * owner's node timeout, so that every call still waiting on a node that
 * counts as stalled has long timed out (no vote that could still count is
 * refused).
 */
export function requireNodeStallMs(value: unknown, nodeTimeoutMs: number): number {
  return requireInteger(
    "options.nodeStallMs",
    value ?? defaults.nodeStallMs,
    2 * nodeTimeoutMs,
    limits.ttlMsMax,
  );
}

/**
 * `options.repairDelayMs` (default `defaults.repairDelayMs`): above every
 * client's node timeout, so that a repair reads only once every round that
 * might still count the lost node's old vote has ended, whichever client
 * ran it.
 */
export function requireRepairDelayMs(value: unknown): number {
  const repairDelayMs = requireInteger(
    "options.repairDelayMs",
    value ?? defaults.repairDelayMs,
    1,
    limits.ttlMsMax,
  );
  if (repairDelayMs <= limits.nodeTimeoutMsMax) {
    throw new InvalidArgumentError(
      "options.repairDelayMs",
      `must exceed ${limits.nodeTimeoutMsMax} ms, the largest nodeTimeoutMs any client may use: ` +
        "a repair may only read once every round that could count the lost node's vote has ended",
    );
  }
  return repairDelayMs;
}

/** `options.checkTimeoutMs` then `options.recheckIntervalMs`. */
export function resolveNodeChecks(options: Record<string, unknown>): ResolvedNodeChecks {
  return {
    checkTimeoutMs: requireInteger(
      "options.checkTimeoutMs",
      options.checkTimeoutMs ?? defaults.checkTimeoutMs,
      1,
      limits.checkTimeoutMsMax,
    ),
    recheckIntervalMs: requireInteger(
      "options.recheckIntervalMs",
      options.recheckIntervalMs ?? defaults.recheckIntervalMs,
      1,
      limits.ttlMsMax,
    ),
  };
}

/**
 * `options.onWarning`, then `logger` and `onEvent`, then `clock` and
 * `random` (their methods must be functions; what they return is the
 * injector's to get right).
 */
export function resolveRuntime(options: Record<string, unknown>): ResolvedRuntime {
  return {
    onWarning: hookOption("options.onWarning", options.onWarning ?? emitNodeWarning),
    observe: resolveObserveOptions("options", options),
    clock: clockOption(options.clock),
    random: randomOption(options.random),
  };
}

/**
 * A hook of the application's (`onWarning`, `onRepair`), checked to be a
 * function and called so that it cannot fail what calls it: a hook that
 * throws or rejects is the application's own failure, and must not take a node out of
 * service or fail a lock or an ID (as `logger` and `onEvent`: observe.ts).
 */
export function hookOption<T>(name: string, hook: unknown): (value: T) => void {
  const call = requireFunction<(value: T) => void>(name, hook);
  return (value) => callHook(call, undefined, value);
}

/** The clock and random source used when none is given: the one place that names them. */
export const defaultRuntime: { readonly clock: Clock; readonly random: RandomSource } = {
  clock: systemClock,
  random: cryptoRandom,
};

/** `options.clock`: `systemClock` when not given, else an object with `now` and `sleep`. */
export function clockOption(clock: unknown): Clock {
  if (clock === undefined) return defaultRuntime.clock;
  return requireMethods<Clock>("options.clock", clock, ["now", "sleep"]);
}

/** `options.random`: the CSPRNG when not given, else an object with `bytes` and `integer`. */
export function randomOption(random: unknown): RandomSource {
  if (random === undefined) return defaultRuntime.random;
  return requireMethods<RandomSource>("options.random", random, ["bytes", "integer"]);
}

/**
 * The NodeGroup options of an owner: the shared part from its resolved
 * options (first contact waits one node timeout for the slow ones), the
 * owner's own checks and scripts from `own`.
 */
export function nodeGroupOptionsOf(
  resolved: ResolvedSharedOptions,
  observer: Observer,
  own: Pick<NodeGroupOptions, "extraCheck" | "certify" | "scripts">,
): NodeGroupOptions {
  return {
    observer,
    checkTimeoutMs: resolved.checkTimeoutMs,
    recheckIntervalMs: resolved.recheckIntervalMs,
    graceMs: resolved.nodeTimeoutMs,
    onWarning: resolved.onWarning,
    ...own,
  };
}

function emitNodeWarning(warning: NodeWarning): void {
  process.emitWarning(warning.message, { code: warning.code });
}
