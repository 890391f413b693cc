/**
 * The nodes' wait queue for a lock key, and the heir a release reserves the
 * key for: how waiters in different processes take turns without racing.
 *
 * Waiters of every process that lost a round register on each node that
 * refused them, in a sorted set ordered by a ticket. The waiter chooses its
 * ticket (after its first refusal: the highest ticket any node reported),
 * so it is the same on every node, and a sorted set orders equal scores by
 * member: every node orders the waiters it knows alike, as Lamport's bakery
 * does with tickets. A release that frees the key reserves it for a short
 * time for the head of that node's queue and notifies that waiter's
 * instance alone (on its own channel). The heir's next round finds the key
 * free where it is reserved for it and reserved where it is not for anyone
 * else, so one release wakes one waiter and the round does not split the
 * votes; ZooKeeper's lock recipe and Redisson's fair lock wake only the
 * next waiter for the same reason. A reservation nobody takes up lapses
 * back into an ordinary free key, and a waiter that stops refreshing its
 * place (a crash) drops out when its registration expires.
 *
 * None of this decides who holds the lock: a grant still needs a majority
 * round of its own, validity counts from it, and a waiter that is not
 * redquorum (node-redlock polling the same key) ignores the reservation
 * and takes a free key as before. The queue only orders redquorum's
 * waiters, and times here come from the node's clock (TIME), where they
 * decide only who goes first.
 *
 * Within the releasing instance's turn (turns.ts) a release reserves the
 * key for that instance instead (the reservation names the instance, not
 * a waiter), so that its own next acquire takes it back; its first
 * release after the turn reserves for the head.
 *
 * A waiter gets one reservation per node until it shows up: a head that
 * is reserved the key again without having tried on that node since the
 * first time is dropped from that node's queue (it crashed, lost its
 * notice, or was granted by the others before its registration here was
 * removed), so a stale registration costs at most one lapsed reservation.
 * A waiter that did try (its round came after its reservation lapsed and
 * someone took the key, as under load) registers again with its refusal,
 * which clears that record: it keeps its turn, and the next release
 * reserves the key for it and tells it. Dropped instead, it would hear of
 * no later release and wait for its own poll.
 *
 * A waiter for several keys registers in the queue of each of them, under
 * one ticket, and a release of any of them reserves that key for it when
 * it heads that key's queue; its round takes all its keys, each free and
 * not reserved for another. A waiter has one ticket on every key and node,
 * and equal tickets are ordered by waiter id, so any two waiters are in
 * the same order in every queue they share: the first of them heads each
 * of its queues, and releases reserve its keys for it, not one key for
 * each of two waiters that both need the other's.
 *
 * A free key reserved for such a waiter while another of its keys is not
 * free for it (held, or reserved for another) would be kept idle from
 * everyone else. So when that waiter is refused on a node, the key is
 * passed on: reserved for the next waiter in its queue, if any, who is
 * told; the refused waiter keeps its place. Only when it is next in line
 * for the key that refused it (that key's release will reserve it for
 * it) is the key kept for it, for at most one reservation's life in ten
 * (`…:heir-kept:<key>`): held for it while the other key's holder
 * finishes, so that it gets both at last, and not held again and again
 * while a key is held for long. Two waiters each reserved a key the
 * other needs (nodes' queues disagreeing for a moment: a registration
 * from before its ticket was agreed, one that expired) thus do not wait
 * on each other: one not next in line for the other's key passes its own
 * on. A key it passed on is not reserved for it again for a while
 * (`…:heir-skip:<key>`, ten reservations' life): each release of that key
 * would tell it, and its round would be refused again for the same held
 * key, one wasted round per release of a busy key. The release of the key
 * that refused it still reserves that key for it and tells it; refused
 * for the key it passed on, it is that key's waiter again at once. Failing
 * all that (a refusal that never came), a reservation lapses after
 * `heirReservationMs`: nothing waits on one for ever.
 *
 * A try-lock (a caller that will not wait: no waiter id, or registration
 * time 0) has no use for a place in the queue. It barges, as node-redlock
 * does and as Java's `tryLock()` does even on a fair `ReentrantLock`: it
 * takes a free key however it is reserved. A reservation only ever keeps
 * callers from a free key; a held key is refused to everyone. The
 * reservation it passed over ends, and so does the record of its heir's
 * turn, so the release of the try-lock's lock reserves the key for that
 * heir again and tells it: the heir, whose round meanwhile found the key
 * held, keeps its place.
 *
 * The queue's keys, derived from the lock key, and its waiters' ids are
 * in queue-keys.ts; the notice that tells an heir, in heir-notice.ts.
 */

import { limits } from "../limits.js";
import { notifyHeirLua } from "./heir-notice.js";
import {
  heirKeptKeyPrefix,
  heirKeyPrefix,
  heirLastKeyPrefix,
  heirSkipKeyPrefix,
  queueExpiryKeyPrefix,
  queueKeyPrefix,
} from "./queue-keys.js";

/**
 * Lua statement: removes `waiter` (a Lua expression) from the queue of
 * `key` (one too), and from its expiries if it was queued. `leave` below
 * is this; the acquire's fast path inlines it (no closure to make).
 */
export function leaveQueueLua(key: string, waiter: string): string {
  return `if redis.call('zrem', '${queueKeyPrefix}' .. ${key}, ${waiter}) == 1 then
  redis.call('zrem', '${queueExpiryKeyPrefix}' .. ${key}, ${waiter})
end`;
}

/**
 * Lua: `enqueue(key, waiter, ticket, waitMs)` registers (or refreshes) a
 * waiter for `key`, ticket "0" meaning "after the last one here", and
 * returns {ticket, rank}; `enqueueAll(keys, waiter, ticket, waitMs)` does
 * it for every key of a lock under one ticket ("0": after the last one in
 * each of those queues) and returns {ticket, the highest rank};
 * `overtake(key, heir)` ends the reservation for `heir` that a try-lock
 * passed over, and the record of its turn; `passOrKeep(keys, waiter,
 * blocking)`: the free keys reserved for a waiter of several keys that
 * `blocking` refused are kept for it or passed on (see above);
 * `nextHeir(key)` drops expired registrations and returns the head, or
 * nil; `heirKey(key)` the key naming the reservation; `reservedFor(key)`
 * the waiter (or, within a turn, the instance) the key is reserved for,
 * or nil; `reserve(key, ms)` reserves a free key for the head and returns
 * it, or nil; `notifyHeir(key, heir)` tells the heir's instance
 * (heir-notice.ts). Whether anyone waits is the existence of
 * `queueKeyPrefix .. key` (the release reads it).
 * Needs `less` (decimal.ts) defined before it; its times are the script's
 * `clockMs()` (node/lua-script.ts).
 */
export const heirQueueLua = `
local function queueKeys(key)
  return '${queueKeyPrefix}' .. key, '${queueExpiryKeyPrefix}' .. key
end
local function nextHeir(key)
  local queue, expiry = queueKeys(key)
  local dead = redis.call('zrangebyscore', expiry, '-inf', clockMs())
  for _, waiter in ipairs(dead) do
    redis.call('zrem', queue, waiter)
    redis.call('zrem', expiry, waiter)
  end
  return redis.call('zrange', queue, 0, 0)[1]
end
local function heirLastKey(key)
  return '${heirLastKeyPrefix}' .. key
end
-- Waiters that passed a key on lately (passOrKeep) are passed over for it
-- until their time in the set ends (its score).
local function skipKey(key)
  return '${heirSkipKeyPrefix}' .. key
end
local function isSkipped(key, waiter)
  local untilMs = redis.call('zscore', skipKey(key), waiter)
  return untilMs ~= false and tonumber(untilMs) > clockMs()
end
-- The waiter to reserve a key for: the first live one in its queue that is
-- not passed over (among the first few: nil when they all are).
local function headFor(key)
  local heir = nextHeir(key)
  if not heir or not isSkipped(key, heir) then return heir end
  for _, waiter in ipairs(redis.call('zrange', (queueKeys(key)), 1, 7)) do
    if not isSkipped(key, waiter) then return waiter end
  end
  return nil
end
-- A queue and its expiries hold the same waiters (each is added to, and
-- removed from, both at once), so they exist together, and every enqueue
-- gives both the same life: one PTTL serves both.
local function keepFor(queue, expiry, ms)
  if redis.call('pttl', queue) < ms then
    redis.call('pexpire', queue, ms)
    redis.call('pexpire', expiry, ms)
  end
end
local function enqueue(key, waiter, ticket, waitMs)
  local queue, expiry = queueKeys(key)
  local score = redis.call('zscore', queue, waiter)
  if ticket ~= '0' then
    score = ticket
  elseif not score then
    local last = redis.call('zrange', queue, -1, -1, 'withscores')
    score = tostring((tonumber(last[2]) or 0) + 1)
  end
  redis.call('zadd', queue, score, waiter)
  redis.call('zadd', expiry, clockMs() + waitMs, waiter)
  keepFor(queue, expiry, waitMs)
  local rank = redis.call('zrank', queue, waiter)
  -- It came (a refusal, or an undo that keeps its place): a reservation it
  -- had and could not take is not held against it (see reserve, which
  -- looks only at the head).
  if rank == 0 then
    local last = heirLastKey(key)
    if redis.call('get', last) == waiter then redis.call('del', last) end
  end
  return {score, rank}
end
local function enqueueAll(keys, waiter, ticket, waitMs)
  if #keys == 1 then return enqueue(keys[1], waiter, ticket, waitMs) end
  -- One ticket on every key's queue (the latest of their places), so that
  -- all queues order this waiter alike with every other.
  if ticket == '0' then
    local latest = 0
    for _, key in ipairs(keys) do
      local queue = queueKeys(key)
      local score = redis.call('zscore', queue, waiter)
      if not score then
        score = (tonumber(redis.call('zrange', queue, -1, -1, 'withscores')[2]) or 0) + 1
      end
      latest = math.max(latest, tonumber(score))
    end
    ticket = tostring(latest)
  end
  local rank = 0
  for _, key in ipairs(keys) do
    rank = math.max(rank, enqueue(key, waiter, ticket, waitMs)[2])
  end
  return {ticket, rank}
end
local function leave(key, waiter)
  ${leaveQueueLua("key", "waiter")}
end
local function heirKey(key)
  return '${heirKeyPrefix}' .. key
end
local function reservedFor(key)
  return redis.call('get', heirKey(key))
end
local function overtake(key, heir)
  local last = heirLastKey(key)
  redis.call('del', heirKey(key))
  if redis.call('get', last) == heir then redis.call('del', last) end
end
local function reserve(key, ms)
  local last = heirLastKey(key)
  local heir = headFor(key)
  if not heir then return nil end
  -- One turn each: a head that was reserved the key before and has not
  -- tried here since (enqueue clears the record) never came (crashed,
  -- gone, or granted elsewhere before its registration here was
  -- removed): it leaves, the next one gets it. The record is read and
  -- replaced in one call (SET … GET); for a head that leaves, it is
  -- written again below with the next one.
  if heir == redis.call('set', last, heir, 'PX', 10 * ms, 'GET') then
    leave(key, heir)
    heir = headFor(key)
    if not heir then return nil end
    redis.call('set', last, heir, 'PX', 10 * ms)
  end
  redis.call('set', heirKey(key), heir, 'PX', ms)
  return heir
end
${notifyHeirLua}
local function passOrKeep(keys, waiter, blocking)
  -- A key it passed on that is now the only one held of its keys is the
  -- one it waits for: it is that key's waiter again. (Refused for it while
  -- another is held too, or for its reservation for another, as a key it
  -- passed on has, changes nothing.)
  if isSkipped(blocking, waiter) and redis.call('exists', blocking) == 1 then
    local alone = true
    for _, key in ipairs(keys) do
      if key ~= blocking and redis.call('exists', key) == 1 then alone = false end
    end
    if alone then redis.call('zrem', skipKey(blocking), waiter) end
  end
  local isNext = nextHeir(blocking) == waiter
  for _, key in ipairs(keys) do
    if reservedFor(key) == waiter and redis.call('exists', key) == 0 then
      -- Kept for a waiter next in line for one reservation's life in ten,
      -- from its first such refusal (a later one within it keeps it too).
      local kept = '${heirKeptKeyPrefix}' .. key
      local first = isNext and redis.call('get', kept) ~= waiter
      if first then
        redis.call('set', kept, waiter, 'PX', ${10 * limits.heirReservationMs})
      elseif not (isNext and redis.call('pttl', kept) > ${9 * limits.heirReservationMs}) then
        -- Not reserved for it again for a while: refused again for the
        -- same held key, it would cost a round per release of this one.
        -- Nor passed to another that passed it on lately: two waiters
        -- refused for the same held key would pass it back and forth.
        local skip, now = skipKey(key), clockMs()
        redis.call('zremrangebyscore', skip, '-inf', now)
        redis.call('zadd', skip, now + ${10 * limits.heirReservationMs}, waiter)
        redis.call('pexpire', skip, ${10 * limits.heirReservationMs})
        -- The next waiter other than this one (\`a == w and b or a\` gave
        -- this one back when it was alone: reserved and told again, it was
        -- refused again at once, in a loop).
        local heir = headFor(key)
        if heir then
          redis.call('set', heirKey(key), heir, 'PX', ${limits.heirReservationMs})
          redis.call('set', heirLastKey(key), heir, 'PX', ${10 * limits.heirReservationMs})
          notifyHeir(key, heir)
        else
          -- Nobody else waits (but those that passed it on lately): the key
          -- is free for whoever comes.
          redis.call('del', heirKey(key))
        end
      end
    end
  end
end
`;
