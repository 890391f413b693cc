/**
 * The heir notice: a node that reserved a key for a waiter (heir-queue.ts)
 * tells that waiter's instance alone, on the instance's own channel, which
 * it hears (heir-watch.ts) and reads (queue-place.ts, parseHeirNotice).
 */

import { fenceFloorKey, fenceKeyPrefix } from "../fencing/scripts.js";

/** The channel an instance hears that one of its waiters is the heir: "<waiter id>[ <fencing counter>]". */
export const heirChannelPrefix = "redquorum:heir-of:";

/**
 * Lua: `notifyHeir(key, heir)` tells the heir's instance, with the
 * resource's fencing counter (`<waiter> <counter>`), so that its proposal
 * is fresh and its grant needs no fencing round (once per heir and call:
 * each notice a node sends is one event). Part of `heirQueueLua`
 * (heir-queue.ts); needs `less` (decimal.ts) defined before it.
 */
export const notifyHeirLua = `-- The heirs told in this call: one notice each. A waiter of several keys
-- reserved here in one call is one event, and the instance takes a second
-- notice from this node for a later one (heir-watch.ts).
local told
local function notifyHeir(key, heir)
  told = told or {}
  if told[heir] then return end
  told[heir] = true
  local message = heir
  -- A hint (its proposal's start): one MGET, a key of the wrong type reads
  -- as missing (no fence in the notice).
  local read = redis.call('mget', '${fenceKeyPrefix}' .. key, '${fenceFloorKey}')
  local fence = read[1]
  if fence then
    local floor = read[2] or '0'
    if less(fence, floor) then fence = floor end
    message = message .. ' ' .. fence
  end
  redis.call('publish', '${heirChannelPrefix}' .. string.match(heir, '^[^:]*'), message)
end`;
