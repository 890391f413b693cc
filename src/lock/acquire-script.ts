/**
 * The acquire script and its arguments. ARGV[1] is the lock's random
 * value. The script handles every key of a multi-resource lock in one
 * atomic call, so a node grants all or none. Interoperable with
 * node-redlock and redsync: the key is the resource name and the value a
 * plain string, so their locks and ours exclude each other.
 *
 * KEYS are the lock keys; the node-wide keys (marker, quarantine, fencing
 * floor and highest value) are fixed names and each fencing counter and
 * queue key is derived from its lock key inside the script. It starts with
 * the restart quarantine (see node/node-state.ts) and the fencing counters
 * (see fencing/scripts.ts); ARGV[3] is the quarantine argument
 * (node-state.ts, quarantineArgOf). Its replies are read in
 * acquire-reply.ts.
 */

import {
  fenceCountersLua,
  fencedScriptArgs,
  fenceFloorKey,
  fenceKeyPrefix,
  fenceMaxKey,
  fenceVote,
  fenceVoteLua,
} from "../fencing/scripts.js";
import { limits } from "../limits.js";
import { membershipRefusalLua } from "../membership/check.js";
import { stampKey } from "../membership/record.js";
import { LuaScript } from "../node/lua-script.js";
import { aliveKey, memoryCheckLua } from "../node/memory-check.js";
import { markerKey, quarantineCheck, quarantineKey } from "../node/node-state.js";
import { acquireReply } from "./acquire-reply.js";
import { heirQueueLua, leaveQueueLua } from "./heir-queue.js";
import { heirKeyPrefix, queueKeyPrefix } from "./queue-keys.js";
import { type QueueArgs, registrationArgs } from "./queue-registration.js";

/**
 * Acquire, fenced layout (see fencedScriptArgs): ARGV[2] = TTL in ms.
 * granted (or, with fences, {granted, current_1, accepted_1, ...}): every
 * key was free and is now ours; refused: a key exists, or, for a caller
 * that may wait, is reserved for another waiter or instance (a caller
 * that will not wait takes a free key however it is reserved:
 * heir-queue.ts); {quarantined, marker}; {unknown,
 * marker}: the fencing counters are unknown here. A fencing counter only
 * moves together with our lock key on the same node — what keeps tokens in
 * grant order.
 *
 * After the proposals: the value of a lock whose holder hands it to us
 * ("" for none): keys holding exactly that value count as free and are
 * overwritten; replaced instead of granted (also as the first element
 * with fences) says every key held that value, the releasing lock was
 * still held here (handoff.ts); replacedOthersWait says that too, and
 * that a waiter of another instance heads this node's queue. Then, for a
 * caller that may wait, its waiter id, ticket and registration time:
 * refused, it joins the node's queue of every key of the lock and the
 * reply is {refused, ticket, rank} (rank: the most ahead of it in any of
 * them; with a fencing counter: {refused, ticket, rank, current});
 * granted, it leaves them if the last argument ("1": an earlier attempt
 * carried the same waiter id) says it may be queued. Registration time
 * "0", or no waiter id: the caller will not wait (a try-lock).
 */
/**
 * When the acquire takes its fast path: one resource, at most one counter,
 * the handoff argument present ("" for none). Named so that the fast-path
 * test and bench/script-cost.ts can switch it off.
 */
export const acquireFastPathCondition =
  "#KEYS == 1 and (fenceCount == 0 or fenceCount == 1) and ARGV[5 + fenceCount]";

/** The acquire script's body (after fenceVoteLua): the fast-path test cuts it. */
export const acquireBodyLua = `-- The fast path, for most grants: one resource, on a healthy node (marker
-- "1", no quarantine), not reserved or reserved for this caller or its
-- instance (a waiter's turn, or its instance's: heir-queue.ts, turns.ts);
-- free (SET NX), or for a handoff free or holding the releasing lock's
-- value. It is the general path below narrowed to that case (the same
-- calls in the same order, the same reply; its MGET also reads the
-- membership stamp, which the general path reads with a GET of its own),
-- without its tables and closures: those cost Redis more than the calls
-- themselves (docs/benchmarks.md, "One worker"). Any other case, or a key
-- found held, goes on below with this MGET's reply.
local fenceCount = tonumber(ARGV[4])
local early, setTried
if ${acquireFastPathCondition} then
  local key = KEYS[1]
  local heir = '${heirKeyPrefix}' .. key
  local counter = fenceCount == 1 and '${fenceKeyPrefix}' .. key
  local from = ARGV[5 + fenceCount]
  local waiter = ARGV[6 + fenceCount]
  -- In readNode's order (marker, quarantine[, floor, highest, counter],
  -- reservation, the memory identity's cache), then the membership stamp.
  if counter then
    early = redis.call('mget', '${markerKey}', '${quarantineKey}', '${fenceFloorKey}', '${fenceMaxKey}', counter, heir, '${aliveKey}', '${stampKey}')
  else
    early = redis.call('mget', '${markerKey}', '${quarantineKey}', heir, '${aliveKey}', '${stampKey}')
  end
  -- The membership check (membership/check.ts), before anything is
  -- written. Missing to the MGET is read again with GET, which fails on a
  -- key of the wrong type, as the check's own GET does.
  local held = early[counter and 8 or 5] or redis.call('get', '${stampKey}') or ''
  ${membershipRefusalLua("held")}
  local reserved = early[counter and 6 or 3]
  local mine = reserved and waiter and (reserved == waiter or reserved == string.match(waiter, '^[^:]*'))
  -- The node's memory checked lately (node/memory-check.ts, identityOf,
  -- inline: the general path below checks it again, and recomputes).
  local alive = early[counter and 7 or 4]
  local checkedAt = alive and tonumber(string.match(alive, '^(%d+)|'))
  local fresh = false
  if checkedAt then
    -- The script's clock (node/lua-script.ts): the general path below and
    -- the queue's times read the same TIME.
    local age = clockMs() - checkedAt
    fresh = age >= 0 and age < ${limits.memoryCheckIntervalMs}
  end
  if fresh and early[1] == '1' and not early[2] and (mine or not reserved) then
    local code, raw, current, accepted
    if from == '' then
      setTried = true
      if redis.call('set', key, ARGV[1], 'NX', 'PX', ARGV[2]) then code = ${acquireReply.granted} end
    else
      -- A handoff: the key holds the releasing lock's value (replaced), or
      -- it expired here (granted). The vote comes before the SET, as below:
      -- a counter that fails the script leaves the key as it was.
      local held = redis.pcall('get', key)
      if held == from or held == false then
        if counter then
          raw = early[5] or redis.call('get', counter) or '0'
          current, accepted = fenceVote(raw, early[3] or '0', ARGV[5])
        end
        redis.call('set', key, ARGV[1], 'PX', ARGV[2])
        code = held and ${acquireReply.replaced} or ${acquireReply.granted}
      end
    end
    if code then
      if counter and not raw then
        raw = early[5] or redis.call('get', counter) or '0'
        current, accepted = fenceVote(raw, early[3] or '0', ARGV[5])
      end
      -- As below: a reservation taken up ends, and a place in the queue
      -- that an earlier attempt may have left here is removed.
      if mine then redis.call('del', heir) end
      if waiter and ARGV[9 + fenceCount] == '1' then
        ${leaveQueueLua("key", "waiter")}
      end
      -- As below: a handoff within one instance says when another
      -- instance's waiter heads the queue.
      if code == ${acquireReply.replaced} and waiter then
        local head = redis.call('zrange', '${queueKeyPrefix}' .. key, 0, 0)[1]
        if head and string.match(head, '^[^:]*') ~= string.match(waiter, '^[^:]*') then
          code = ${acquireReply.replacedOthersWait}
        end
      end
      if not counter then return code end
      local highest = early[4] or redis.call('get', '${fenceMaxKey}') or '0'
      if accepted == ${fenceVote.accepted} then raiseFence(counter, raw, highest, ARGV[5]) end
      return {code, current, accepted}
    end
  end
end
-- The membership check, where the fast path did not make it.
if not early then
  local held = redis.call('get', '${stampKey}') or ''
  ${membershipRefusalLua("held")}
end
${quarantineCheck}
${memoryCheckLua}
${fenceCountersLua}
${heirQueueLua}
local locks, counters, proposals = fencedLayout()
-- One MGET: the node's state, the counters and, for one resource, its
-- reservation (made above already when the fast path was tried).
local reservation = #locks == 1 and heirKey(locks[1]) or nil
local node = readNode(counters, reservation, early)
-- A memory replaced in place puts the node in quarantine: read it again.
if select(2, checkMemory(node.alive, true)) then node = readNode(counters, reservation) end
local marker, refusal = checkQuarantine(node.marker, node.quarantined, ARGV[3])
if refusal then return refusal end
local from = ARGV[5 + #counters]
if from == '' then from = nil end
local waiter = ARGV[6 + #counters]
-- Whether an earlier attempt carried this waiter id (it may be queued here).
local mayBeQueued = ARGV[9 + #counters] == '1'
-- A caller that will not wait (registration time "0") is never queued.
local function refuse(blocking)
  if not waiter or ARGV[8 + #counters] == '0' then return ${acquireReply.refused} end
  -- A key reserved for it here that it cannot take with the others now is
  -- kept for it a while, or goes to the next waiter (heir-queue.ts).
  if #locks > 1 then passOrKeep(locks, waiter, blocking) end
  local place = enqueueAll(locks, waiter, ARGV[7 + #counters], tonumber(ARGV[8 + #counters]))
  local reply = {${acquireReply.refused}, place[1], place[2]}
  -- The fencing counter as it stands: the waiter's next proposal is then
  -- above the holder's token, and its grant needs no fencing round. A hint
  -- only: as the MGET read it (a counter or floor of the wrong type reads 0).
  if #counters == 1 then
    local current, floor = node.counters[1] or '0', node.floor or '0'
    reply[4] = less(current, floor) and floor or current
  end
  return reply
end
-- A key reserved for another waiter, or for another instance whose turn
-- goes on (turns.ts: the reservation names the instance), counts as held
-- for a caller that waits; one that will not (no waiter id, or
-- registration time "0": a try-lock) takes it if free (heir-queue.ts).
local instance = waiter and string.match(waiter, '^[^:]*')
local barges = not waiter or ARGV[8 + #counters] == '0'
local reserved = false
for _, key in ipairs(locks) do
  local heir
  if #locks == 1 then heir = node.extra else heir = reservedFor(key) end
  if heir then
    if heir ~= waiter and heir ~= instance and not barges then return refuse(key) end
    reserved = true
  end
end
local replaced = 0
-- One resource, free: SET NX takes it in one call (undone below if the
-- fencing counters turn out unknown). Otherwise check every key first: also
-- for a handoff, whose key is expected to hold the releasing lock's value
-- (a SET NX would fail there), and after the fast path's SET NX failed.
local placed = #locks == 1 and not from and not setTried and
  redis.call('set', locks[1], ARGV[1], 'NX', 'PX', ARGV[2])
if not placed then
  for _, key in ipairs(locks) do
    local held = redis.pcall('get', key)
    -- A key of another type is no lock anyone will release: this node
    -- fails, saying so, instead of looking held until the caller gives up
    -- (no lock key or queue entry is written before this point).
    if type(held) == 'table' then
      return redis.error_reply('WRONGTYPE the key ' .. key .. ' holds a ' ..
        redis.call('type', key).ok .. ', not a lock: no lock can be taken on it here')
    end
    if held then
      if held ~= from then return refuse(key) end
      replaced = replaced + 1
    end
  end
end
local reply, unknown = readFences(marker, node, counters, proposals)
if unknown then
  if placed then redis.call('del', locks[1]) end
  return unknown
end
if not placed then
  for _, key in ipairs(locks) do
    redis.call('set', key, ARGV[1], 'PX', ARGV[2])
  end
end
-- Reservations taken up end; one passed over ends too, and its heir is
-- reserved the key again at this lock's release (heir-queue.ts).
if reserved then
  for _, key in ipairs(locks) do
    local heir
    if #locks == 1 then heir = node.extra else heir = reservedFor(key) end
    if heir and (heir == waiter or heir == instance) then redis.call('del', heirKey(key))
    elseif heir then overtake(key, heir) end
  end
end
if waiter and mayBeQueued then
  for _, key in ipairs(locks) do leave(key, waiter) end
end
local granted = replaced == #locks and ${acquireReply.replaced} or ${acquireReply.granted}
-- A handoff inside one instance: if a waiter of another instance heads
-- this node's queue, the reply says so, so that the instance ends its run
-- of handoffs (an expired head says so too: one short run, no harm).
if replaced == 1 and #locks == 1 and instance then
  local head = redis.call('zrange', (queueKeys(locks[1])), 0, 0)[1]
  if head and string.match(head, '^[^:]*') ~= instance then
    granted = ${acquireReply.replacedOthersWait}
  end
end
if #counters == 0 then return granted end
applyFences(node, counters, proposals, reply)
reply[1] = granted
return reply`;

export const acquireScript = LuaScript.batchable("acquire", fenceVoteLua, acquireBodyLua, {
  checksMembership: true,
  readsStamp: true,
});

export function acquireArgs(
  value: string,
  ttl: number,
  quarantineArg: string,
  proposals: readonly bigint[],
  fromValue: string | undefined,
  queue: QueueArgs | undefined,
): string[] {
  const args = fencedScriptArgs(value, String(ttl), quarantineArg, proposals);
  args.push(fromValue ?? "");
  if (queue) {
    args.push(...registrationArgs(queue), queue.mayBeQueued ? "1" : "0");
  }
  return args;
}
