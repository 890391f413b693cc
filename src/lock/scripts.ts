/**
 * The lock scripts (acquire, extend, release), their reply codes, and the
 * one function that runs a lock or fencing script and reads what a node
 * answers. ARGV[1] is the lock's random value. Each script handles every
 * key of a multi-resource lock in one atomic call, so a node grants all or
 * none. Interoperable with node-redlock and redsync: the key is the
 * resource name and the value a plain string, so their locks and ours
 * exclude each other.
 *
 * KEYS are the lock keys; the node-wide keys (marker, quarantine, fencing
 * floor and highest value) are fixed names and each fencing counter and
 * queue key is derived from its lock key inside the scripts. Acquire and
 * extend start with the restart quarantine (see node/node-state.ts),
 * acquire also with the fencing counters (see fencing/scripts.ts); ARGV[3]
 * is the quarantine argument (node-state.ts, quarantineArgOf).
 */

import { luaDecimalLess, parseCounter } from "../decimal.js";
import { NodeError } from "../errors.js";
import {
  fenceCountersLua,
  fencedScriptArgs,
  fenceFloorKey,
  fenceKeyPrefix,
  fenceMaxKey,
  fenceReply,
  fenceVote,
  fenceVoteLua,
} from "../fencing/scripts.js";
import { limits } from "../limits.js";
import { LuaScript } from "../node/lua-script.js";
import {
  aliveKey,
  identityCacheLua,
  memoryCheckLua,
  recordMemoryLua,
} from "../node/memory-check.js";
import {
  horizonKey,
  longestRecordLua,
  markerKey,
  nowMsLua,
  quarantineCheck,
  quarantineKey,
  quarantineReply,
  restartedMarkerPrefix,
  runKey,
  unjudgedLifetimeMs,
  unjudgedLua,
  unjudgedPrefix,
  uptimeSecondsLua,
} from "../node/node-state.js";
import type { RedisNode } from "../node/redis-node.js";
import { sameMemoryLua, sameServerLua, serverIdentityLua } from "../node/server-identity.js";
import type { Observer } from "../observe.js";
import { heirKeyPrefix, heirQueueLua, leaveQueueLua, queueKeyPrefix } from "./heir-queue.js";

/** The acquire's code: the reply itself, or with fences its first element. */
export const acquireReply = {
  /** A key exists (held by someone else). */
  refused: 0,
  /** Every key was free and is now ours. */
  granted: 1,
  /** Granted, and every key held the value of the lock handed to us (see handoff.ts). */
  replaced: 2,
  /**
   * Replaced, and a waiter of another instance heads this node's queue for
   * the key: the instance's run of handoffs is to end soon (wait-queue.ts).
   */
  replacedOthersWait: 3,
} as const;

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
-- calls in the same order, the same reply), without its tables and
-- closures: those cost Redis more than the calls themselves
-- (docs/benchmarks.md, "One worker"). Any other case, or a key found held,
-- goes on below with this MGET's reply.
local fenceCount = tonumber(ARGV[4])
local early, setTried
if ${acquireFastPathCondition} then
  local key = KEYS[1]
  local heir = '${heirKeyPrefix}' .. key
  local counter = fenceCount == 1 and '${fenceKeyPrefix}' .. key
  local from = ARGV[5 + fenceCount]
  local waiter = ARGV[6 + fenceCount]
  -- In readNode's order (marker, quarantine[, floor, highest, counter],
  -- reservation, the memory identity's cache).
  if counter then
    early = redis.call('mget', '${markerKey}', '${quarantineKey}', '${fenceFloorKey}', '${fenceMaxKey}', counter, heir, '${aliveKey}')
  else
    early = redis.call('mget', '${markerKey}', '${quarantineKey}', heir, '${aliveKey}')
  end
  local reserved = early[counter and 6 or 3]
  local mine = reserved and waiter and (reserved == waiter or reserved == string.match(waiter, '^[^:]*'))
  -- The node's memory checked lately (node/memory-check.ts, identityOf,
  -- inline: the general path below checks it again, and recomputes).
  local alive = early[counter and 7 or 4]
  local checkedAt = alive and tonumber(string.match(alive, '^(%d+)|'))
  local fresh = false
  if checkedAt then
    local t = redis.call('time')
    local age = t[1] * 1000 + math.floor(t[2] / 1000) - checkedAt
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
if select(2, checkMemory(node.alive)) then node = readNode(counters, reservation) end
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
});

/**
 * A caller's registration in the nodes' queue (heir-queue.ts), or with
 * `waitMs` 0 only its id (a caller that will not wait: its instance's
 * turn reservation still lets it in).
 */
export interface QueueArgs {
  readonly waiterId: string;
  /** "0" until the nodes gave one: then the same on every node. */
  readonly ticket: string;
  /** How long the registration lasts unless renewed, in ms (node time); 0: not queued. */
  readonly waitMs: number;
  /**
   * Whether an earlier attempt carried this waiter id, so that a node may
   * have queued it: only then does a grant have a registration to remove.
   */
  readonly mayBeQueued?: boolean;
}

/** A registration as the acquire and release scripts read it: waiter id, ticket, registration time (ms). */
export function registrationArgs(queue: QueueArgs): string[] {
  return [queue.waiterId, queue.ticket, String(queue.waitMs)];
}

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

/** Whether an acquire reply grants the lock; `fenced`: the acquire carried counters. */
export function isGrantedBy(fenced: boolean): (reply: unknown) => boolean {
  return fenced ? isFencedGrant : isPlainGrant;
}

const isReplacedCode = (code: unknown) =>
  code === acquireReply.replaced || code === acquireReply.replacedOthersWait;
const isGrantCode = (code: unknown) => code === acquireReply.granted || isReplacedCode(code);
const codeOf = (reply: unknown) => (Array.isArray(reply) ? reply[0] : reply);
const isPlainGrant = (reply: unknown) => isGrantCode(reply);
const isFencedGrant = (reply: unknown) => Array.isArray(reply) && isGrantCode(reply[0]);

/** Whether an acquire reply says the keys held the value of the lock handed to us. */
export function replacedHandedOff(reply: unknown): boolean {
  return isReplacedCode(codeOf(reply));
}

/** Whether a handoff's acquire reply says a waiter of another instance heads the node's queue. */
export function othersWaitAfterHandoff(reply: unknown): boolean {
  return codeOf(reply) === acquireReply.replacedOthersWait;
}

export const extendReply = {
  /** Every key still held our value and has the new TTL. */
  extended: 1,
  /** Some key no longer holds our value: nothing changed. */
  notHeld: 0,
} as const;

/**
 * KEYS the lock keys; ARGV[2] = new TTL in ms. Sets the TTL of every
 * key only if every key still holds our value, else changes nothing;
 * {quarantined, marker}. PEXPIRE never creates a key, so an expired lock
 * is never brought back.
 */
export const extendScript = new LuaScript(
  "extend",
  `${quarantineCheck}
local guard = redis.call('mget', '${markerKey}', '${quarantineKey}')
local _, refusal = checkQuarantine(guard[1], guard[2], ARGV[3])
if refusal then return refusal end
for i = 1, #KEYS do
  if redis.call('get', KEYS[i]) ~= ARGV[1] then return ${extendReply.notHeld} end
end
for i = 1, #KEYS do
  redis.call('pexpire', KEYS[i], ARGV[2])
end
return ${extendReply.extended}`,
  { checksMembership: true },
);

export function extendArgs(value: string, ttl: number, quarantineArg: string): string[] {
  return [value, String(ttl), quarantineArg];
}

export const isExtended = (reply: unknown) => reply === extendReply.extended;

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
local waited = {}
local ours = {}
local anyWaited = ARGV[5] ~= nil
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
-- Nobody to queue and nobody waiting: done, before the queue's functions
-- are even defined (most releases; a script pays for every closure it makes).
if not anyWaited then return {deleted, ''} end
if ARGV[2] == 'keep' then
  for i = 1, #KEYS do
    local heir = '${heirKeyPrefix}' .. KEYS[i]
    if ours[i] and waited[i] and not redis.call('get', heir) then
      redis.call('set', heir, ARGV[4], 'PX', ARGV[3])
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
  local free = waited[i] and redis.call('exists', KEYS[i]) == 0
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
 * the next. Returns how many reservations it had.
 */
export const leaveQueueScript = new LuaScript(
  "leave-queue",
  `${luaDecimalLess}
${heirQueueLua}
local had = 0
for _, key in ipairs(KEYS) do
  leave(key, ARGV[1])
  if reservedFor(key) == ARGV[1] then
    had = had + 1
    redis.call('del', heirKey(key))
    if redis.call('exists', key) == 0 then
      local heir = reserve(key, tonumber(ARGV[2]))
      if heir and ARGV[3] == '1' then notifyHeir(key, heir) end
    end
  end
end
return had`,
);

/**
 * Run whenever a client (re)checks a lock node, before its votes count
 * (node/admission.ts): KEYS as certifyKeys; ARGV[1] the node's run_id as
 * the client read it (unused: the script reads the memory identity itself,
 * node/server-identity.ts), ARGV[2] "1" when the node keeps every acknowledged write (appendonly
 * yes, appendfsync always, no-appendfsync-on-rewrite no:
 * node/durability.ts), ARGV[3] the client's own maxTtlMs and ARGV[4] how
 * long the node keeps that record after this check (lock/horizon.ts).
 *
 * A node restarted with its data (another run_id) may have come back
 * older than what it acknowledged: without the last second of writes
 * (appendfsync everysec), from an RDB snapshot (Redis's default save
 * points), a restored backup, a replica promoted with lag. Its marker
 * survived, so the lock scripts' quarantine (node-state.ts) cannot see
 * the loss, yet lock keys it granted may be gone. Unless it keeps every
 * write, it is put in the restart quarantine here, for what is left of the
 * quarantine since the server started (a lock it granted before the
 * restart has expired by then), also by a client that has the quarantine
 * off (which does not wait it out). And its fencing state: its marker
 * becomes "restarted:<time>" and its floor goes, so it does not vote on
 * fences until repaired (raising is always safe; until then it is a
 * repair witness only when every other node answers:
 * quorum/counter-repair.ts). A node that lost its memory and is not
 * repaired yet stays "lost:". A marked node without a recorded run_id
 * counts as restarted for the quarantine (see the script). The same
 * server with its data replaced in place (its count of data-replacing
 * commands moved) is quarantined from now whatever its persistence
 * (node/memory-check.ts, recordMemory, which the vote scripts share). Replies {1
 * when it was taken out of fencing, else 0; the longest maxTtlMs the node
 * records now (horizonKey), this client's included}.
 */
export const certifyScript = new LuaScript(
  "lock-certify",
  `${identityCacheLua}
${recordMemoryLua}
-- The cluster's horizon (lock/horizon.ts): each client's maxTtlMs (member)
-- until its record lapses (score, server time in ms); the longest live one.
${nowMsLua}
redis.call('zremrangebyscore', KEYS[5], '-inf', nowMs)
local expires = nowMs + tonumber(ARGV[4])
local recorded = tonumber(redis.call('zscore', KEYS[5], ARGV[3]))
if not recorded or recorded < expires then redis.call('zadd', KEYS[5], expires, ARGV[3]) end
local horizon = ${longestRecordLua("KEYS[5]")}
-- The memory identity, read now (node/server-identity.ts), and cached for
-- the vote scripts (node/memory-check.ts).
local identity = ${serverIdentityLua}
cacheIdentity(identity)
local run = redis.call('get', KEYS[3])
if run and ${sameMemoryLua("run", "identity")} then
  -- Recorded as a bare run_id by an older version: the count too, now.
  if run ~= identity then redis.call('set', KEYS[3], identity) end
  return {0, horizon}
end
-- No memory recorded yet on a marked node: init and LocalCluster record it
-- when they mark, and every client's check since, so this is a node marked
-- by an older version, or back from data older than its first check: it
-- counts as restarted. Unmarked nodes: the lock scripts' own quarantine
-- (node-state.ts) decides. The same server with a memory replaced in place
-- (its count moved) lost what it held whatever its persistence: quarantined
-- from now. A restart is quarantined from the server's start unless the
-- node keeps every write; "restart" and "replaced" kinds: init() must not
-- lift them (node-state.ts, initNodeScript).
local inPlace = run and ${sameServerLua("run", "identity")}
local durable = not inPlace and ARGV[2] == '1'
return {recordMemory(run, identity, durable, inPlace and 'replaced' or 'restart'), horizon}`,
);

/**
 * The keys certifyScript takes: marker, fence floor, the run_id certified
 * on, quarantine, the cluster's horizon (lock/horizon.ts).
 */
export const certifyKeys: readonly string[] = [
  markerKey,
  fenceFloorKey,
  runKey,
  quarantineKey,
  horizonKey,
];

/**
 * A quarantine judge's read of another node (lock/quarantine-judge.ts):
 * KEYS[1] the horizon records, KEYS[2] the quarantine. Replies {the
 * longest maxTtlMs recorded and not lapsed (0 for none), 1 when the node is
 * in a quarantine of its own (it may have lost records), else 0}.
 */
export const horizonReadScript = new LuaScript(
  "lock-horizon-read",
  `${memoryCheckLua}
-- A memory replaced in place (it may have lost records) starts its own
-- quarantine here, which the reply then says.
checkMemory()
${nowMsLua}
return {${longestRecordLua("KEYS[1]")}, redis.call('exists', KEYS[2])}`,
);

export const horizonReadKeys: readonly string[] = [horizonKey, quarantineKey];

/** A horizon read's reply as a repair witness (quorum/counter-repair.ts). */
export function readHorizonWitness(reply: unknown): { value: bigint; mayLag: boolean } {
  const [horizon, quarantined] = Array.isArray(reply) ? reply : [];
  if (typeof horizon !== "number" || !Number.isSafeInteger(horizon) || horizon < 0) {
    throw new Error(`horizon read: unexpected reply ${JSON.stringify(reply)}`);
  }
  return { value: BigInt(horizon), mayLag: quarantined !== 0 };
}

/**
 * The judgement of a lost node's quarantine (lock/quarantine-judge.ts):
 * KEYS[1] marker, KEYS[2] quarantine, KEYS[3] its horizon records; ARGV[1]
 * the marker that named the loss, ARGV[2] the longest maxTtlMs read from
 * the other nodes (or a longer one this node still records). Only while
 * that loss is current and unjudged: the quarantine becomes what is left
 * of ARGV[2] since the loss — from the server's start (a restart, or an
 * empty start), or one second before the marker was found missing (a
 * flush; whole seconds, so never more than has passed) — or ends.
 * Replies 0: not current (judged already, or another loss since); 1: in
 * quarantine; 2: over.
 */
export const judgeQuarantineScript = new LuaScript(
  "lock-judge-quarantine",
  `local value = redis.call('get', KEYS[2])
local kind, untilMs, foundMs
if value then kind, untilMs, foundMs = string.match(value, '^${unjudgedPrefix}(%a+):(%d+):?(%d*)$') end
if redis.call('get', KEYS[1]) ~= ARGV[1] or not kind then return 0 end
${nowMsLua}
-- Redis counts uptime as the difference of two times in whole seconds: it
-- can be up to a second more than has passed, so one second less.
local sinceMs = math.max(0, ${uptimeSecondsLua} - 1) * 1000
if kind == 'flushed' then
  -- Whole seconds too: one second less, never more than has passed.
  local nowS = math.floor(nowMs / 1000)
  local found = tonumber(string.match(ARGV[1], '^lost:(%d+)')) or nowS
  sinceMs = math.min(sinceMs, math.max(0, nowS - found - 1) * 1000)
elseif kind == 'replaced' then
  -- Replaced in place: from when that was found (node/memory-check.ts).
  sinceMs = math.min(sinceMs, math.max(0, nowMs - (tonumber(foundMs) or nowMs)))
end
-- Records this node kept (a restart from older data): a floor too.
local horizon = math.max(tonumber(ARGV[2]), ${longestRecordLua("KEYS[3]")})
local left = math.max(horizon - sinceMs, tonumber(untilMs) - nowMs)
if left <= 0 then
  redis.call('del', KEYS[2])
  return 2
end
redis.call('set', KEYS[2], (kind == 'restart' or kind == 'replaced') and 'restart' or '1', 'PX', math.floor(left))
return 1`,
);

export const judgeKeys: readonly string[] = [markerKey, quarantineKey, horizonKey];

/** judgeQuarantineScript's replies. */
export type QuarantineJudgement = 0 | 1 | 2;

/** Runs a lock or fencing script on node `index` and reads its reply. */
export type ScriptRunner = (
  node: RedisNode,
  index: number,
  script: LuaScript,
  keys: readonly string[],
  args: readonly string[],
) => Promise<unknown>;

export interface ScriptGuard {
  readonly observer: Observer;
  /** The quarantine in ms (lock/horizon.ts), for the error's text. */
  readonly quarantineMs: number;
  /** Told of a node that may have lost its memory (`marker` names the loss): fencing repairs it. */
  onMemoryLoss(index: number, marker: string): void;
  /** Told of a node whose quarantine waits for its length (lock/quarantine-judge.ts). */
  onUnjudged(index: number, marker: string): void;
}

/**
 * A runner for the lock and fencing scripts. A node in quarantine
 * ({quarantined, marker}), or whose fencing counters are unknown ({unknown,
 * marker}: it lost its memory), is a failed vote that says so, and the
 * guard is told of the loss. A reply that is not what the scripts answer (a
 * counter that is not a decimal) is that node's error too: nothing a node
 * says escapes untyped.
 */
export function guardedRunner(guard: ScriptGuard): ScriptRunner {
  return (node, index, script, keys, args) =>
    node.evalScript(script, keys, args).then((reply) => checkedReply(guard, node, index, reply));
}

function checkedReply(guard: ScriptGuard, node: RedisNode, index: number, reply: unknown) {
  if (!Array.isArray(reply)) return reply;
  const [code, marker] = reply as [unknown, unknown];
  if (code === fenceReply.unknown) {
    guard.observer.node(
      node.endpoint,
      "needs repair",
      `fencing counters unknown (marker ${String(marker)})`,
    );
    guard.onMemoryLoss(index, String(marker));
    throw new NodeError(
      node.endpoint,
      new Error(
        "fencing counters unknown: the node lost its memory, and a repair from the other nodes " +
          "is scheduled (it needs N - Q + 1 of them with known counters; if more nodes lost " +
          "theirs, see redlock.raiseFencingFloor / redquorum fencing-floor; if these are new " +
          "nodes redquorum never used, call redlock.init() once)",
      ),
    );
  }
  if (code === quarantineReply.quarantined) {
    guard.observer.node(node.endpoint, "quarantined", "it may have lost its memory");
    guard.onMemoryLoss(index, String(marker));
    if (String(reply[2]).startsWith(unjudgedPrefix)) guard.onUnjudged(index, String(marker));
    throw new NodeError(
      node.endpoint,
      new Error(
        "quarantined: it may have lost lock keys (no redquorum marker: restarted without its data, " +
          "or flushed; or restarted from data that may be older, without appendfsync always), " +
          `and stays out of service for the longest maxTtlMs of the cluster's clients (${guard.quarantineMs} ms or more); ` +
          "if these are new nodes that never held a lock, call redlock.init({ liftQuarantines: true }) once",
      ),
    );
  }
  if (code === fenceReply.counted || isGrantCode(code)) {
    // {code, current_1, accepted_1, ...}: every current value is a counter.
    try {
      for (let i = 1; i < reply.length; i += 2) parseCounter(reply[i]);
    } catch (error) {
      throw new NodeError(node.endpoint, error);
    }
  }
  return reply;
}
