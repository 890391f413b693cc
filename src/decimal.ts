/** Exact counter values, shared by IDs and fencing tokens: bigint in the library, decimal strings on the wire and in Redis. */

/** The largest ID: Redis integers and most databases' BIGINT stop at 2^63 - 1. */
export const maxId = 2n ** 63n - 1n;

const decimal = /^(0|[1-9][0-9]{0,18})$/;

/** Parses a counter value a node returned; anything else is a protocol error. */
export function parseCounter(value: unknown): bigint {
  const text =
    typeof value === "string" ? value : Buffer.isBuffer(value) ? value.toString() : undefined;
  if (text === undefined || !decimal.test(text)) {
    throw new Error(`not a counter value: ${JSON.stringify(String(value)).slice(0, 60)}`);
  }
  const parsed = BigInt(text);
  if (parsed > maxId) throw new Error(`counter value ${text} is above 2^63 - 1`);
  return parsed;
}

export function maxOf(a: bigint, b: bigint): bigint {
  return a > b ? a : b;
}

export function minOf(a: bigint, b: bigint): bigint {
  return a < b ? a : b;
}

/**
 * Lua, for the scripts of both counters: `less(a, b)` compares two counter
 * values as Redis holds them (decimal strings without leading zeros):
 * shorter is less, then bytewise. Lua numbers are doubles and would round
 * above 2^53.
 */
export const luaDecimalLess = `
local function less(a, b)
  return #a < #b or (#a == #b and a < b)
end`;
