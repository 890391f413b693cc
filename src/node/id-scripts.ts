import { LuaScript } from "./lua-script.js";

/**
 * ID counter scripts. KEYS[1] is the counter, KEYS[2] its marker (written
 * by init and by repair, lost together with the counter when a node
 * restarts empty or is flushed). Values are non-negative decimal strings
 * without leading zeros, compared by length then bytes, so they are exact
 * up to 2^63 - 1 (Lua numbers are doubles and would round above 2^53).
 *
 * Status codes (first element of the reply):
 *   0 refused, {0, current}      the counter is already >= the proposal
 *   1 accepted, {1, previous}    the counter was below and is now the proposal
 *   2 amnesia                    the marker is gone: the node lost its data
 *   3 missing                    marker present, counter missing (deleted, or init never reached it)
 */
const compare = `
local function less(a, b)
  return #a < #b or (#a == #b and a < b)
end`;

/** ARGV[1] = proposal; ARGV[2] = "1" to skip the marker check (test-only negative control). */
export const proposeScript = new LuaScript(
  "id-propose",
  `${compare}
local skipMarker = ARGV[2] == '1'
if not skipMarker and redis.call('exists', KEYS[2]) == 0 then return {2} end
local current = redis.call('get', KEYS[1])
if not current then
  if not skipMarker then return {3} end
  current = '0'
end
if less(current, ARGV[1]) then
  redis.call('set', KEYS[1], ARGV[1])
  return {1, current}
end
return {0, current}`,
);

/** Reads the counter: {1, value}, or {2} / {3} as above. */
export const readScript = new LuaScript(
  "id-read",
  `if redis.call('exists', KEYS[2]) == 0 then return {2} end
local current = redis.call('get', KEYS[1])
if not current then return {3} end
return {1, current}`,
);

/**
 * Repair: raises the counter to ARGV[1] (never lowers it) and writes the
 * marker, in one step, so the node votes again with a value at least the
 * healthy majority's maximum.
 */
export const repairScript = new LuaScript(
  "id-repair",
  `${compare}
local current = redis.call('get', KEYS[1])
if not current or less(current, ARGV[1]) then
  redis.call('set', KEYS[1], ARGV[1])
end
redis.call('set', KEYS[2], '1')
return 1`,
);

/**
 * Init on one node: {1} when it set the counter to 0 (or found 0, from an
 * earlier partial init), {0, current} when the counter holds IDs already.
 */
export const initScript = new LuaScript(
  "id-init",
  `local current = redis.call('get', KEYS[1])
if current and current ~= '0' then return {0, current} end
redis.call('set', KEYS[1], '0')
redis.call('set', KEYS[2], '1')
return {1}`,
);
