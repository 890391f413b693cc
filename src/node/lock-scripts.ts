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
 * has passed. ARGV[3] = "0" turns the quarantine off (the marker is still
 * kept). Every client sees the same server-side quarantine.
 */

export const markerKey = "redquorum:marker";
export const quarantineKey = "redquorum:quarantine";

const quarantineCheck = `
if ARGV[3] ~= '0' and redis.call('exists', KEYS[2]) == 1 then return -1 end
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('set', KEYS[1], '1')
  if ARGV[3] ~= '0' then
    redis.call('set', KEYS[2], '1', 'PX', ARGV[3])
    return -1
  end
end`;

/** ARGV[2] = TTL in ms. 1: every key was free and is now ours; 0: a key exists; -1: quarantined. */
export const acquireScript = new LuaScript(
  "acquire",
  `${quarantineCheck}
for i = 3, #KEYS do
  if redis.call('exists', KEYS[i]) == 1 then return 0 end
end
for i = 3, #KEYS do
  redis.call('set', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
return 1`,
);

/** KEYS: the resources. Deletes only the keys that still hold our value; returns how many it deleted. */
export const releaseScript = new LuaScript(
  "release",
  `local deleted = 0
for i = 1, #KEYS do
  if redis.call('get', KEYS[i]) == ARGV[1] then
    redis.call('del', KEYS[i])
    deleted = deleted + 1
  end
end
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
 * a lock could be held. Otherwise writes the marker, lifts a quarantine and
 * returns 0.
 */
export const initNodeScript = new LuaScript(
  "init-node",
  `local ours = redis.call('exists', KEYS[1]) + redis.call('exists', KEYS[2])
local others = redis.call('dbsize') - ours
if others > 0 then return others end
redis.call('set', KEYS[1], '1')
redis.call('del', KEYS[2])
return 0`,
);
