/**
 * An acquire's arguments checked and turned into what its attempts send:
 * the lock keys (never in redquorum's own namespace), the fencing counters,
 * the TTL, the retry budget and the deadline. Nothing is sent before this.
 */

import { InvalidArgumentError } from "../errors.js";
import { fenceKeyOf } from "../fencing/scripts.js";
import { internalKeyPrefix } from "../node/node-state.js";
import type { AttemptRequest } from "./attempt.js";
import { requireResources, requireTtl, resolveAcquireOptions } from "./call-arguments.js";
import type { AcquireOptions, ResolvedRedlockOptions, ResolvedRetry } from "./options.js";

export interface AcquireRequest extends AttemptRequest {
  readonly retry: ResolvedRetry;
  /** On the instance's clock; infinite without `waitMs`. */
  readonly deadlineMs: number;
}

/**
 * The Redis key of a resource. redquorum keeps its own state (node marker,
 * quarantine, fencing counters, IDs) under "redquorum:": a lock key there
 * could quarantine nodes or corrupt a counter, so such names are refused.
 */
function lockKeyOf(keyPrefix: string, resource: string, index: number): string {
  const key = keyPrefix + resource;
  if (key.startsWith(internalKeyPrefix)) {
    throw new InvalidArgumentError(
      `resources[${index}]`,
      `the key ${JSON.stringify(key)} is in redquorum's own namespace ("${internalKeyPrefix}…": node ` +
        "markers, quarantine, fencing counters, IDs); choose another resource name or keyPrefix",
    );
  }
  return key;
}

/** Checks an acquire's arguments (throwing InvalidArgumentError) and resolves them. */
export function resolveAcquireRequest(
  options: ResolvedRedlockOptions,
  resources: readonly string[],
  ttlMs: number,
  acquireOptions: AcquireOptions,
): AcquireRequest {
  const { keyPrefix, fencing, clock } = options;
  const names = requireResources(resources);
  const ttl = requireTtl(ttlMs, options);
  const { signal, waitMs, retry } = resolveAcquireOptions(acquireOptions, options.retry);
  signal?.throwIfAborted();
  const keys = names.map((name, i) => lockKeyOf(keyPrefix, name, i));
  const counterKeys = fencing ? keys.map(fenceKeyOf) : [];
  const deadlineMs = waitMs === undefined ? Number.POSITIVE_INFINITY : clock.now() + waitMs;
  return { names, keys, counterKeys, ttl, signal, retry, deadlineMs };
}
