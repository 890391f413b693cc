/**
 * The release script, which deletes the keys that still hold our value and
 * reserves each key left free for the head of its queue (heir-queue.ts),
 * and the script a waiter that gives up leaves the queues with.
 */

import { luaDecimalLess } from "../decimal.js";
import { LuaScript } from "../node/lua-script.js";
import { heirQueueLua } from "./heir-queue.js";
import { heirKeyPrefix, queueKeyPrefix } from "./queue-keys.js";

/**
 * KEYS: the resources. Deletes only the keys that still hold our value.
 * ARGV[2]: a reservation time in ms, "0" for none: then each key left free
 * and not reserved (or reserved for our own instance, ARGV[4]) is reserved
 * for the head of its queue, and with ARGV[3] = "1" that waiter's instance
 * is told on its channel (heir-queue.ts). ARGV[2] = "keep": the releaser's
 * turn goes on (turns.ts): a key we deleted that has waiters is reserved
 * for our instance for ARGV[3] ms instead, so that only its next acquire
 * (or a client that is not redquorum) takes it, and the reply says that
 * someone waits. ARGV[5..7], when given (never with "keep"): a waiter id,
 * ticket and registration time to queue after the delete (the undo of a
 * failed attempt keeps its place). Returns {deleted, the first key's heir
 * or ""}, with "keep" and a queue: {deleted, "", 1}.
 */
export const releaseScript = LuaScript.batchable(
  "release",
  "",
  `local deleted = 0
-- Which keys have waiters to reserve for (with a reservation time): a
-- requeued waiter is one; else the queue's existence, read once here.
local waited, ours
local anyWaited = ARGV[5] ~= nil
if #KEYS == 1 and not anyWaited then
  -- One key, nobody to queue (most releases): the loop below, in the same
  -- calls and order, without its tables unless someone waits (a script
  -- pays for every table and closure it makes: docs/benchmarks.md).
  if redis.call('get', KEYS[1]) == ARGV[1] then
    redis.call('del', KEYS[1])
    deleted = 1
  end
  if ARGV[2] == '0' or redis.call('exists', '${queueKeyPrefix}' .. KEYS[1]) == 0 then
    return {deleted, ''}
  end
  waited, ours, anyWaited = {true}, {deleted == 1}, true
else
  waited, ours = {}, {}
  for i = 1, #KEYS do
    if redis.call('get', KEYS[i]) == ARGV[1] then
      redis.call('del', KEYS[i])
      deleted = deleted + 1
      ours[i] = true
    end
    if ARGV[2] ~= '0' then
      waited[i] = ARGV[5] ~= nil or redis.call('exists', '${queueKeyPrefix}' .. KEYS[i]) == 1
      anyWaited = anyWaited or waited[i]
    end
  end
end
-- Nobody to queue and nobody waiting: done, before the queue's functions
-- are even defined (most releases; a script pays for every closure it makes).
if not anyWaited then return {deleted, ''} end
if ARGV[2] == 'keep' then
  for i = 1, #KEYS do
    local heir = '${heirKeyPrefix}' .. KEYS[i]
    if ours[i] and waited[i] then
      -- Unless reserved already (NX).
      redis.call('set', heir, ARGV[4], 'PX', ARGV[3], 'NX')
    end
  end
  return {deleted, '', 1}
end
${luaDecimalLess}
${heirQueueLua}
local first = ''
local reserveMs = tonumber(ARGV[2])
if ARGV[5] then enqueueAll(KEYS, ARGV[5], ARGV[6], tonumber(ARGV[7])) end
for i = 1, #KEYS do
  -- A key this call deleted is free (nothing above writes a lock key).
  local free = waited[i] and (ours[i] or redis.call('exists', KEYS[i]) == 0)
  local reserved = free and reservedFor(KEYS[i])
  if free and (not reserved or reserved == ARGV[4]) then
    local heir = reserve(KEYS[i], reserveMs)
    if heir then
      if i == 1 then first = heir end
      if ARGV[3] == '1' then notifyHeir(KEYS[i], heir) end
    end
  end
end
return {deleted, first}`,
);

/** How many keys a release deleted. */
export function releasedCount(reply: unknown): unknown {
  return Array.isArray(reply) ? reply[0] : reply;
}

/** Whether a release that kept the key free (ARGV[2] "keep") found waiters queued for it. */
export function waitersQueued(reply: unknown): boolean {
  return Array.isArray(reply) && reply[2] === 1;
}

/** The waiter a release reserved its first key for, if any. */
export function heirOf(reply: unknown): string | undefined {
  return Array.isArray(reply) && typeof reply[1] === "string" && reply[1] !== ""
    ? reply[1]
    : undefined;
}

/**
 * KEYS: a lock's keys; ARGV: waiter id, reservation ms, notify. A waiter
 * that gives up leaves each key's queue; a reservation it had passes to
 * the next. So does a free key reserved for no one with waiters queued: the
 * leaving waiter may have taken its reservation up with an attempt it then
 * undid (aborted, or granted by too few nodes), which frees the key without
 * reserving it (the undo keeps the waiter's own place, and telling it would
 * only wake it into the same refusals). Returns how many reservations it had.
 */
export const leaveQueueScript = new LuaScript(
  "leave-queue",
  `${luaDecimalLess}
${heirQueueLua}
local had = 0
for _, key in ipairs(KEYS) do
  leave(key, ARGV[1])
  local reserved = reservedFor(key)
  if reserved == ARGV[1] then
    had = had + 1
    redis.call('del', heirKey(key))
    reserved = false
  end
  if not reserved and redis.call('exists', key) == 0 then
    local heir = reserve(key, tonumber(ARGV[2]))
    if heir and ARGV[3] == '1' then notifyHeir(key, heir) end
  end
end
return had`,
);
