import { LuaScript } from "./lua-script.js";

/**
 * Lock scripts. KEYS are the lock's resources (with the prefix), ARGV[1] is
 * the lock's random value. Each script handles every key of a
 * multi-resource lock in one atomic call, so a node grants all or none.
 * Interoperable with node-redlock and redsync: the key is the resource name
 * and the value a plain string, so their locks and ours exclude each other.
 */

/** ARGV[2] = TTL in ms. Returns 1 when every key was free and is now ours, 0 when any key exists. */
export const acquireScript = new LuaScript(
  "acquire",
  `for i = 1, #KEYS do
  if redis.call('exists', KEYS[i]) == 1 then return 0 end
end
for i = 1, #KEYS do
  redis.call('set', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
return 1`,
);

/** Deletes only the keys that still hold our value. Returns how many it deleted. */
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
 * holds our value (1), else changes nothing (0). PEXPIRE never creates a key,
 * so an expired lock is never brought back.
 */
export const extendScript = new LuaScript(
  "extend",
  `for i = 1, #KEYS do
  if redis.call('get', KEYS[i]) ~= ARGV[1] then return 0 end
end
for i = 1, #KEYS do
  redis.call('pexpire', KEYS[i], ARGV[2])
end
return 1`,
);
