import { LuaScript } from "./lua-script.js";

/**
 * Lock scripts. ARGV[1] is the lock's random value. Each script handles
 * every key of a multi-resource lock in one atomic call, so a node grants
 * all or none. Interoperable with node-redlock and redsync: the key is the
 * resource name and the value a plain string, so their locks and ours
 * exclude each other.
 *
 * Acquire and extend also enforce the restart quarantine (seed 1, "delayed
 * restart"): KEYS[1] is the node's marker, KEYS[2] its quarantine key, the
 * resources follow from KEYS[3]. A node whose marker is gone lost its memory
 * (restart without persistence, FLUSHALL): it may have forgotten keys of
 * locks that are still held, so it stays out of service (answers -1) until a
 * quarantine of ARGV[3] ms (the cluster's maxTtlMs, longer than any lock)
 * has passed. ARGV[3] = "0" turns the quarantine off for this client (the
 * marker is still kept, and a quarantine another client started is still
 * honoured). Every client sees the same server-side quarantine.
 */

export const markerKey = "redquorum:marker";
export const quarantineKey = "redquorum:quarantine";

// A marker found missing is rewritten as "lost:<server time>": the node keeps
// in mind that it lost its memory (so a missing fencing counter there means
// "unknown", not 0), and the value names this loss for repairs. init writes "1".
const quarantineCheck = `
local guard = redis.call('mget', KEYS[1], KEYS[2])
if guard[2] then return -1 end
local marker = guard[1]
if not marker then
  local now = redis.call('time')
  marker = 'lost:' .. now[1] .. '.' .. now[2]
  redis.call('set', KEYS[1], marker)
  if ARGV[3] ~= '0' then
    redis.call('set', KEYS[2], '1', 'PX', ARGV[3])
    return -1
  end
end`;

/**
 * Fencing counters, one per resource: KEYS[3 + locks + i] with the proposal
 * ARGV[4 + i] (ARGV[4] = how many). Reads every counter first: a missing one
 * on a node that lost its memory is unknown, and the node does not vote
 * ({-2, counter key, marker}); elsewhere a missing counter is 0. Then \`applyFences()\`
 * raises each counter below its proposal. Reply: {1, current_1, accepted_1,
 * ...}, where current is the value before (accepted 1) or the value that
 * refused the proposal (accepted 0).
 */
const fences = `
local function less(a, b)
  return #a < #b or (#a == #b and a < b)
end
local fenceCount = tonumber(ARGV[4])
local lockCount = #KEYS - 2 - fenceCount
local fenceReply = {1}
local function readFences()
  for i = 1, fenceCount do
    local current = redis.call('get', KEYS[2 + lockCount + i])
    if not current then
      if marker ~= '1' then return {-2, KEYS[2 + lockCount + i], marker} end
      current = '0'
    end
    fenceReply[2 * i] = current
    fenceReply[2 * i + 1] = less(current, ARGV[4 + i]) and 1 or 0
  end
  return nil
end
local function applyFences()
  for i = 1, fenceCount do
    if fenceReply[2 * i + 1] == 1 then redis.call('set', KEYS[2 + lockCount + i], ARGV[4 + i]) end
  end
end`;

/**
 * ARGV[2] = TTL in ms. 1 (or, with fences, {1, ...}): every key was free and
 * is now ours; 0: a key exists; -1: quarantined; {-2, ...}: a fencing counter
 * is unknown here. A fencing counter only moves together with our lock key
 * on the same node — what keeps tokens in grant order.
 *
 * Handoff: ARGV[5 + fences], when given, is the value of a lock whose holder
 * hands it to us; keys holding exactly that value count as free and are
 * overwritten. 2 instead of 1 (also as the first element with fences) says
 * every key held that value: the releasing lock was still held here.
 */
export const acquireScript = new LuaScript(
  "acquire",
  `${quarantineCheck}
${fences}
local from = ARGV[5 + fenceCount]
local replaced = 0
-- One resource, free: SET NX takes it in one call (undone below if a
-- fencing counter turns out unknown). Otherwise check every key first.
local placed = lockCount == 1 and redis.call('set', KEYS[3], ARGV[1], 'NX', 'PX', ARGV[2])
if not placed then
  for i = 3, 2 + lockCount do
    if redis.call('exists', KEYS[i]) == 1 then
      if not from or redis.pcall('get', KEYS[i]) ~= from then return 0 end
      replaced = replaced + 1
    end
  end
end
local unknown = readFences()
if unknown then
  if placed then redis.call('del', KEYS[3]) end
  return unknown
end
if not placed then
  for i = 3, 2 + lockCount do
    redis.call('set', KEYS[i], ARGV[1], 'PX', ARGV[2])
  end
end
local granted = replaced == lockCount and 2 or 1
if fenceCount == 0 then return granted end
applyFences()
fenceReply[1] = granted
return fenceReply`,
);

/**
 * The fencing round after an acquire whose proposals were stale: raises the
 * counters only on nodes where every lock key still holds our value (0
 * otherwise), so, as in the acquire, a counter moves only under our lock.
 */
export const fenceScript = new LuaScript(
  "fence",
  `${quarantineCheck}
${fences}
for i = 3, 2 + lockCount do
  if redis.call('get', KEYS[i]) ~= ARGV[1] then return 0 end
end
local unknown = readFences()
if unknown then return unknown end
applyFences()
return fenceReply`,
);

/** KEYS[1] marker, KEYS[2] a fencing counter: {1, value}, or {-2} when unknown here. */
export const fenceReadScript = new LuaScript(
  "fence-read",
  `local current = redis.call('get', KEYS[2])
if current then return {1, current} end
if redis.call('get', KEYS[1]) ~= '1' then return {-2} end
return {1, '0'}`,
);

/**
 * Repairs an unknown fencing counter: KEYS[1] marker, KEYS[2] the counter;
 * ARGV[1] the marker value the loss was seen with, ARGV[2] the value read
 * from a majority. Applies only while that same loss is current and the
 * counter is still missing: 1, else 0.
 */
export const fenceRepairScript = new LuaScript(
  "fence-repair",
  `if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('exists', KEYS[2]) == 1 then return 0 end
redis.call('set', KEYS[2], ARGV[2])
return 1`,
);

/**
 * KEYS: the resources. Deletes only the keys that still hold our value;
 * returns how many it deleted. With ARGV[2] (a tag), announces each deleted
 * key on \`redquorum:released:<key>\` for waiters in other processes, and
 * returns {deleted, most subscribers any announcement reached}; the
 * clean-up of a failed attempt passes none (nothing was granted to release).
 */
export const releaseScript = new LuaScript(
  "release",
  `local deleted = 0
local heard = 0
for i = 1, #KEYS do
  if redis.call('get', KEYS[i]) == ARGV[1] then
    redis.call('del', KEYS[i])
    deleted = deleted + 1
    if ARGV[2] then
      heard = math.max(heard, redis.call('publish', 'redquorum:released:' .. KEYS[i], ARGV[2]))
    end
  end
end
if ARGV[2] then return {deleted, heard} end
return deleted`,
);

/**
 * ARGV[2] = new TTL in ms. Sets the TTL of every key only if every key still
 * holds our value (1), else changes nothing (0); -1: quarantined. PEXPIRE
 * never creates a key, so an expired lock is never brought back.
 */
export const extendScript = new LuaScript(
  "extend",
  `${quarantineCheck}
for i = 3, #KEYS do
  if redis.call('get', KEYS[i]) ~= ARGV[1] then return 0 end
end
for i = 3, #KEYS do
  redis.call('pexpire', KEYS[i], ARGV[2])
end
return 1`,
);

/**
 * init on one node: KEYS[1] marker, KEYS[2] quarantine. Refused (returns
 * the number of other keys) when the node holds any key that is not ours:
 * a lock could be held. Otherwise returns 0 and, with ARGV[1] = "write",
 * writes the marker and lifts a quarantine. init first checks every node,
 * and writes only when all of them are empty: a refused init changes nothing.
 */
export const initNodeScript = new LuaScript(
  "init-node",
  `local ours = redis.call('exists', KEYS[1]) + redis.call('exists', KEYS[2])
local others = redis.call('dbsize') - ours
if others > 0 then return others end
if ARGV[1] == 'write' then
  redis.call('set', KEYS[1], '1')
  redis.call('del', KEYS[2])
end
return 0`,
);
