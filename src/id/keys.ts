/**
 * The Redis keys of one ID counter: its name (the `key` option) and the
 * keys NextId keeps beside it, in the order the counter scripts take them,
 * and the rules that keep them apart from Redlock's state and from other
 * counters' keys.
 */
import { InvalidArgumentError } from "../errors.js";
import { idDefaults, limits } from "../limits.js";
import { internalKeyPrefix } from "../node/node-state.js";
import { describe, requireWellFormed } from "../validate.js";

/** The counter's key unless the `key` option says otherwise. */
const defaultIdKey = idDefaults.key;

/** The keys NextId keeps beside its counter `key`: marker, loss token, certified run_id. */
export const idKeySuffixes = [":marker", ":lost", ":run"] as const;

/**
 * KEYS of the counter scripts (id/counter.ts): the counter, its marker, its
 * loss token, the run_id the counter was certified on. Every script takes
 * all four, so each that writes the marker can also record the run_id.
 */
export type CounterKeys = readonly [string, string, string, string];

export function counterKeys(key: string): CounterKeys {
  return [key, key + idKeySuffixes[0], key + idKeySuffixes[1], key + idKeySuffixes[2]];
}

/** The `key` option, checked: a well-formed name, and none of its keys in another's place. */
export function requireIdKey(key: unknown): string {
  if (
    typeof key !== "string" ||
    key.length === 0 ||
    Buffer.byteLength(key) > limits.resourceBytesMax
  ) {
    throw new InvalidArgumentError(
      "options.key",
      `expected a non-empty string of at most ${limits.resourceBytesMax} bytes, got ${describe(key)}`,
    );
  }
  requireWellFormed("options.key", key);
  requireKeysOwnPlace(key);
  return key;
}

/**
 * The counter and the keys beside it must not be Redlock's node state
 * (marker, quarantine, fencing): an ID repair writing "redquorum:marker"
 * would hide a lost node from the restart quarantine. Under "redquorum:",
 * only "redquorum:id" and names below it are NextId's; and a key that
 * ends like one of another counter's own keys would alias that counter.
 */
function requireKeysOwnPlace(key: string): void {
  const own = (k: string) =>
    !k.startsWith(internalKeyPrefix) || k === defaultIdKey || k.startsWith(`${defaultIdKey}:`);
  const clash = [key, ...idKeySuffixes.map((suffix) => key + suffix)].find((k) => !own(k));
  if (clash !== undefined) {
    throw new InvalidArgumentError(
      "options.key",
      `${JSON.stringify(key)} would use ${JSON.stringify(clash)}, in the namespace of redquorum's lock ` +
        `state ("${internalKeyPrefix}…"); use a key outside it, or "${defaultIdKey}" or a name below it`,
    );
  }
  const suffix = idKeySuffixes.find((s) => key.endsWith(s));
  if (suffix !== undefined) {
    throw new InvalidArgumentError(
      "options.key",
      `${JSON.stringify(key)} ends with "${suffix}", the name of the key NextId keeps beside a counter`,
    );
  }
}
