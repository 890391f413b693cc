import { LuaScript } from "./lua-script.js";

/**
 * ID counter scripts. KEYS[1] is the counter, KEYS[2] its marker (written
 * by init and by repair, lost together with the counter when a node
 * restarts empty or is flushed), KEYS[3] the loss token: written once when
 * a proposal finds the counter or marker gone, and required by the repair,
 * so a repair meant for one loss can never apply to a later one. Values are non-negative decimal strings
 * without leading zeros, compared by length then bytes, so they are exact
 * up to 2^63 - 1 (Lua numbers are doubles and would round above 2^53).
 *
 * Status codes (first element of the reply):
 *   0 refused, {0, current}      the counter is already >= the proposal
 *   1 accepted, {1, previous}    the counter was below and is now the proposal
 *   2 amnesia, {2, token}        the marker is gone: the node lost its data
 *   3 missing, {3, token}        marker present, counter missing (deleted, or init never reached it)
 *   4 suspect, {4, token}        the node restarted (a new run_id, see certifyScript): its
 *                                counter may be older than what it acknowledged
 */
const compare = `
local function less(a, b)
  return #a < #b or (#a == #b and a < b)
end`;

const lossToken = `
local function lost(status)
  local token = redis.call('get', KEYS[3])
  if not token then
    local now = redis.call('time')
    token = now[1] .. '.' .. now[2]
    redis.call('set', KEYS[3], token)
  end
  return {status, token}
end`;

/** ARGV[1] = proposal; ARGV[2] = "1" to skip the marker check (test-only negative control). */
export const proposeScript = new LuaScript(
  "id-propose",
  `${compare}
${lossToken}
local skipMarker = ARGV[2] == '1'
if not skipMarker then
  local marker = redis.call('get', KEYS[2])
  if marker == 'suspect' then return lost(4) end
  if marker ~= '1' then return lost(2) end
end
local current = redis.call('get', KEYS[1])
if not current then
  if not skipMarker then return lost(3) end
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
 * Repair, ARGV[1] = value, ARGV[2] = loss token: only while the node is
 * still in the loss that token names (marker gone or "suspect", or counter
 * gone, same token),
 * raises the counter to ARGV[1] (never lowers it), writes the marker and
 * clears the token, in one step: 1. Otherwise changes nothing: 0.
 */
export const repairScript = new LuaScript(
  "id-repair",
  `${compare}
local current = redis.call('get', KEYS[1])
if redis.call('get', KEYS[2]) == '1' and current then return 0 end
if redis.call('get', KEYS[3]) ~= ARGV[2] then return 0 end
if not current or less(current, ARGV[1]) then
  redis.call('set', KEYS[1], ARGV[1])
end
redis.call('set', KEYS[2], '1')
redis.call('del', KEYS[3])
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
redis.call('del', KEYS[3])
return {1}`,
);

/**
 * Run whenever a client (re)checks a node: KEYS[1] counter, KEYS[2] marker,
 * KEYS[3] loss token, KEYS[4] the run_id the counter was certified on;
 * ARGV[1] the node's run_id now. A node restarted with its data (another
 * run_id) may have come back with an older counter and its marker intact
 * (a restored backup or disk snapshot, a replica promoted with lag): its
 * marker becomes "suspect", so it does not vote until repaired — raised to
 * what other nodes hold, which is always safe. Reads still answer its
 * value (it may lag, it did not forget). 1 when it was made suspect, else 0.
 */
export const certifyScript = new LuaScript(
  "id-certify",
  `local run = redis.call('get', KEYS[4])
if run == ARGV[1] then return 0 end
redis.call('set', KEYS[4], ARGV[1])
if run and redis.call('get', KEYS[2]) == '1' then
  redis.call('set', KEYS[2], 'suspect')
  return 1
end
return 0`,
);
