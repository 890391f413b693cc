/**
 * node-redlock v5's settings (its names, defaults and merging), checked as
 * redquorum checks its own options, and the redquorum options the drop-in
 * accepts besides them under `redquorum`.
 */
import { InvalidArgumentError } from "../errors.js";
import { limits } from "../limits.js";
import type { RedlockOptions } from "../lock/options.js";
import {
  describe,
  rejectUnknownOptions,
  requireBoolean,
  requireNumber,
  requireOptionsObject,
} from "../validate.js";

/** node-redlock v5's settings, with its names and units (milliseconds). */
export interface Settings {
  /** Clock drift allowance as a fraction of the duration (plus 2 ms). Default 0.01. */
  readonly driftFactor: number;
  /** Attempts after the first; 0: one attempt (a try-lock); -1: until it succeeds. Default 10. */
  readonly retryCount: number;
  /** Wait between attempts, in milliseconds. Default 200. */
  readonly retryDelay: number;
  /** Each wait is `retryDelay` ± a random amount up to this, in milliseconds (never below 0). Default 100. */
  readonly retryJitter: number;
  /** `using` extends the lock once this much of it is left, in milliseconds. Default 500. */
  readonly automaticExtensionThreshold: number;
}

/**
 * redquorum's options for the drop-in (the constructor's
 * `settings.redquorum`): Redlock's, less the two node-redlock's own settings
 * replace (`driftFactor`, `retry`), plus `init`.
 */
export interface RedquorumSettings extends Omit<RedlockOptions, "driftFactor" | "retry"> {
  /**
   * Call redquorum's `init()` before this instance's first lock call (and
   * again at the next call, at most every `recheckIntervalMs`, until a
   * majority of nodes is in service). Default true. Turn it off to mark a
   * new cluster yourself (`redquorum init`), so no process start ever
   * marks a cluster whose every node lost its memory at once.
   */
  readonly init?: boolean;
}

/** The constructor's settings: node-redlock's, and redquorum's under `redquorum`. */
export interface RedlockSettings extends Partial<Settings> {
  readonly redquorum?: RedquorumSettings;
}

/**
 * node-redlock v5's defaults: part of the behaviour a node-redlock program
 * relies on, so they are its, not redquorum's (src/limits.ts).
 */
export const nodeRedlockDefaults: Settings = Object.freeze({
  driftFactor: 0.01,
  retryCount: 10,
  retryDelay: 200,
  retryJitter: 100,
  automaticExtensionThreshold: 500,
});

/**
 * The drop-in's bound on each node's answer, where redquorum's Redlock has
 * 50 ms (for Redis on a network of its own). node-redlock waits for a node
 * as long as its client does; a drop-in must not start failing rounds on a
 * busy machine where node-redlock did not, so it allows 200 ms, as NextId
 * does. `settings.redquorum.nodeTimeoutMs` sets it.
 */
export const dropInNodeTimeoutMs = 200;

const settingNames = [
  "driftFactor",
  "retryCount",
  "retryDelay",
  "retryJitter",
  "automaticExtensionThreshold",
] as const;

/** redquorum's names for what node-redlock's settings already say. */
const replacedHints: Record<string, string> = {
  driftFactor: "give driftFactor beside retryCount, as node-redlock takes it",
  retry: "use node-redlock's retryCount, retryDelay and retryJitter",
};

/**
 * `input` merged over `base` (a call's settings over the instance's, as
 * node-redlock merges them), each checked; `name` is how errors call it.
 */
export function mergeSettings(
  name: string,
  input: unknown,
  base: Settings,
  extra: readonly string[] = [],
): Settings {
  const given = requireOptionsObject(name, input);
  rejectUnknownOptions(name, given, [...settingNames, ...extra]);
  const pick = (key: (typeof settingNames)[number]) =>
    given[key] === undefined ? base[key] : given[key];
  return Object.freeze({
    // redquorum's bound: a larger drift allowance leaves a lock no validity.
    driftFactor: requireNumber(`${name}.driftFactor`, pick("driftFactor"), 0, 0.5),
    retryCount: requireRetryCount(`${name}.retryCount`, pick("retryCount")),
    retryDelay: requireNumber(`${name}.retryDelay`, pick("retryDelay"), 0, limits.delayMsMax),
    retryJitter: requireNumber(`${name}.retryJitter`, pick("retryJitter"), 0, limits.delayMsMax),
    automaticExtensionThreshold: requireNumber(
      `${name}.automaticExtensionThreshold`,
      pick("automaticExtensionThreshold"),
      0,
      limits.ttlMsMax,
    ),
  });
}

/** An integer from -1 (retry until it succeeds, node-redlock's "infinity") up. */
function requireRetryCount(name: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < -1) {
    throw new InvalidArgumentError(
      name,
      `expected an integer: 0 or more retries, or -1 to retry until it succeeds; got ${describe(value)}`,
    );
  }
  return value;
}

/** The constructor's `settings.redquorum`, split into Redlock's options and `init`. */
export function resolveRedquorumSettings(input: unknown): {
  readonly options: Omit<RedlockOptions, "driftFactor" | "retry">;
  readonly init: boolean;
} {
  const given = requireOptionsObject("settings.redquorum", input);
  for (const key of Object.keys(replacedHints)) {
    if (given[key] !== undefined) {
      throw new InvalidArgumentError(
        `settings.redquorum.${key}`,
        `not an option here; ${replacedHints[key]}`,
      );
    }
  }
  // Fenced grants would carry a token that node-redlock's Lock has no
  // field for (and a failure of their own): off, as the docs say.
  if (given.fencing !== undefined && given.fencing !== false) {
    throw new InvalidArgumentError(
      "settings.redquorum.fencing",
      `got ${JSON.stringify(given.fencing)}: the drop-in's locks carry no fencing token ` +
        "(node-redlock's Lock has no field for one); only false is allowed. " +
        "For fencing tokens use redquorum's own Redlock",
    );
  }
  const { init, ...options } = given;
  // The other names are Redlock's, which checks them (and refuses unknown ones).
  return {
    options,
    init: init === undefined ? true : requireBoolean("settings.redquorum.init", init),
  };
}

/** node-redlock's wait before the next attempt: the delay ± jitter, never below 0. */
export function retryWaitMs(settings: Settings, random: () => number): number {
  return Math.max(0, settings.retryDelay + Math.floor((random() * 2 - 1) * settings.retryJitter));
}

/** The attempts a call may make: retryCount + 1, or unbounded for -1. */
export function maxAttemptsOf(settings: Settings): number {
  return settings.retryCount === -1 ? Number.POSITIVE_INFINITY : settings.retryCount + 1;
}
