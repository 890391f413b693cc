/**
 * A lock call's own arguments, checked before anything is sent: the
 * resources, the TTL, and the per-call options of acquire and init. The
 * instance's options are options.ts's.
 */
import { InvalidArgumentError } from "../errors.js";
import { limits } from "../limits.js";
import { driftAllowanceMs } from "../quorum/validity.js";
import {
  describe,
  rejectUnknownOptions,
  requireBoolean,
  requireInteger,
  requireOptionsObject,
  requireSignal,
  requireWellFormed,
} from "../validate.js";
import {
  foreignOptionHints,
  type ResolvedRedlockOptions,
  type ResolvedRetry,
  resolveRetry,
} from "./options.js";

export interface ResolvedAcquireOptions {
  readonly signal: AbortSignal | undefined;
  readonly waitMs: number | undefined;
  readonly retry: ResolvedRetry;
}

export function resolveAcquireOptions(input: unknown, base: ResolvedRetry): ResolvedAcquireOptions {
  const options = requireOptionsObject("acquire options", input);
  rejectUnknownOptions(
    "acquire options",
    options,
    ["signal", "waitMs", "retry"],
    foreignOptionHints,
  );
  return {
    signal: requireSignal("acquire options.signal", options.signal),
    waitMs:
      options.waitMs === undefined
        ? undefined
        : requireInteger("acquire options.waitMs", options.waitMs, 0, limits.ttlMsMax),
    retry: resolveRetry("acquire options.retry", options.retry, base),
  };
}

/** `Redlock.init()`'s options (lock/init.ts, InitOptions). */
export function resolveInitOptions(input: unknown): { readonly liftQuarantines: boolean } {
  const options = requireOptionsObject("init options", input);
  rejectUnknownOptions("init options", options, ["liftQuarantines"]);
  return {
    liftQuarantines:
      options.liftQuarantines === undefined
        ? false
        : requireBoolean("init options.liftQuarantines", options.liftQuarantines),
  };
}

export function requireTtl(
  ttlMs: unknown,
  options: Pick<ResolvedRedlockOptions, "maxTtlMs" | "driftFactor" | "driftMs">,
): number {
  const ttl = requireInteger("ttlMs", ttlMs, 1, options.maxTtlMs);
  // A TTL within the drift allowance can never give a positive validity.
  if (ttl - driftAllowanceMs(ttl, options.driftFactor, options.driftMs) <= 0) {
    throw new InvalidArgumentError(
      "ttlMs",
      `${ttl} ms leaves no validity after the drift allowance (ttl * ${options.driftFactor} + ${options.driftMs} ms)`,
    );
  }
  return ttl;
}

export function requireResources(resources: unknown): readonly string[] {
  if (!Array.isArray(resources) || resources.length === 0) {
    throw new InvalidArgumentError(
      "resources",
      `expected a non-empty array of resource names, got ${describe(resources)}`,
    );
  }
  if (resources.length > limits.resourceCountMax) {
    throw new InvalidArgumentError(
      "resources",
      `${resources.length} resources given, at most ${limits.resourceCountMax} per lock`,
    );
  }
  const seen = new Set<string>();
  // Every index, holes of a sparse array too (forEach skips them: a hole
  // would pass as the key "undefined").
  for (let index = 0; index < resources.length; index++) {
    const resource: unknown = resources[index];
    if (typeof resource !== "string" || resource.length === 0) {
      throw new InvalidArgumentError(
        `resources[${index}]`,
        `expected a non-empty string, got ${describe(resource)}`,
      );
    }
    // length is a cheap first test: a UTF-16 length above the limit is always too many bytes.
    if (
      resource.length > limits.resourceBytesMax ||
      Buffer.byteLength(resource) > limits.resourceBytesMax
    ) {
      throw new InvalidArgumentError(
        `resources[${index}]`,
        `a resource name is at most ${limits.resourceBytesMax} bytes, got ${describe(resource)}`,
      );
    }
    requireWellFormed(`resources[${index}]`, resource);
    if (seen.has(resource)) {
      throw new InvalidArgumentError(
        `resources[${index}]`,
        `${JSON.stringify(resource)} is listed twice`,
      );
    }
    seen.add(resource);
  }
  return Object.freeze([...resources]) as readonly string[];
}
