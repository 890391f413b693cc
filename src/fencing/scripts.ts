/**
 * The fencing scripts, and the fencing part of the acquire: one counter per
 * resource on each node, raised only together with our lock key, plus the
 * node-wide state a repair after a memory loss needs (floor, highest value,
 * certified run_id). Reply codes are named here; lock/scripts.ts reads the
 * replies of the scripts a lock runs, fencing/issuer.ts those of repairs.
 *
 * Counter values are decimal strings without leading zeros, compared by
 * length then bytes (Lua numbers are doubles and would round above 2^53).
 */

import { luaDecimalLess, maxOf, parseCounter } from "../decimal.js";
import { LuaScript } from "../node/lua-script.js";
import { markerKey, quarantineCheck, quarantineKey } from "../node/node-state.js";

/**
 * Fencing state of the node as a whole: the floor below which no counter
 * of this node is trusted (written by the repair after a loss), and the
 * highest value any counter of this node ever accepted (what a repair of
 * another node reads).
 */
export const fenceFloorKey = "redquorum:fence-floor";
export const fenceMaxKey = "redquorum:fence-max";
/** The run_id of the server the fencing state was last certified on (see fenceCertifyScript). */
export const fenceRunKey = "redquorum:run";

/** The counter key of a resource's fencing tokens. */
export function fenceKeyOf(keyPrefix: string, resource: string): string {
  return `redquorum:fence:${keyPrefix}${resource}`;
}

/** Replies of the fenced scripts (the fence round, and the acquire with fencing on). */
export const fenceReply = {
  /** {counted, current_1, accepted_1, ...}: the node voted on every proposal. */
  counted: 1,
  /** A lock key no longer holds our value (fence round): no vote. */
  notHeld: 0,
  /** {unknown, marker}: the node lost its memory and its counters are not repaired yet. */
  unknown: -2,
} as const;

/** Per counter in a fenced reply: whether the node accepted our proposal (accepted_i). */
export const fenceVote = {
  accepted: 1,
  refused: 0,
} as const;

/**
 * The layout of the fenced lock scripts (acquire and fence): KEYS[1]
 * marker, KEYS[2] quarantine, KEYS[3] fence floor, KEYS[4] highest accepted
 * value, the lock keys from KEYS[5], then the counters. ARGV[1] the lock's
 * value, ARGV[2] its TTL in ms, ARGV[3] the quarantine in ms, ARGV[4] how
 * many counters, their proposals from ARGV[5]; the acquire may add one more.
 */
export function fencedScriptKeys(
  lockKeys: readonly string[],
  counterKeys: readonly string[],
): string[] {
  return [markerKey, quarantineKey, fenceFloorKey, fenceMaxKey, ...lockKeys, ...counterKeys];
}

export function fencedScriptArgs(
  value: string,
  ttl: string,
  quarantineArg: string,
  proposals: readonly bigint[],
): string[] {
  return [value, ttl, quarantineArg, String(proposals.length), ...proposals.map(String)];
}

/**
 * Lua, for the fenced scripts: `fencedLayout()` splits KEYS and ARGV as
 * above into the lock keys, the counters and the proposals.
 *
 * A counter's value here is max(counter or 0, floor). A node that lost its
 * memory (marker not "1") and has no floor yet knows none of its counters:
 * `readFences(marker, floorKey, counters, proposals)` answers nil and
 * {unknown, marker} there, until a repair sets the floor to the highest
 * value a set of other nodes that meets every majority has accepted — then
 * it is healthy for every resource, also ones first locked later. Else it
 * answers the reply {counted, current_1, accepted_1, ...}, where current is
 * the value before (accepted 1) or the value that refused the proposal
 * (accepted 0). `applyFences(highestKey, counters, proposals, reply)` then
 * raises each counter below its accepted proposal. Counters and the floor
 * are read with GET, never MGET: a key of the wrong type there must fail
 * the script (a node error), not read as a missing counter.
 */
const fenceCounters = `${luaDecimalLess}
local function fencedLayout()
  local fenceCount = tonumber(ARGV[4])
  local lockCount = #KEYS - 4 - fenceCount
  local locks, counters, proposals = {}, {}, {}
  for i = 1, lockCount do locks[i] = KEYS[4 + i] end
  for i = 1, fenceCount do
    counters[i] = KEYS[4 + lockCount + i]
    proposals[i] = ARGV[4 + i]
  end
  return locks, counters, proposals
end
-- The counters as readFences read them, by position.
local readCounters = {}
local function readFences(marker, floorKey, counters, proposals)
  local reply = {${fenceReply.counted}}
  if #counters == 0 then return reply end
  local floor = redis.call('get', floorKey)
  if not floor then
    if marker ~= '1' then return nil, {${fenceReply.unknown}, marker} end
    floor = '0'
  end
  for i = 1, #counters do
    local current = redis.call('get', counters[i]) or '0'
    readCounters[i] = current
    if less(current, floor) then current = floor end
    reply[2 * i] = current
    reply[2 * i + 1] = less(current, proposals[i]) and ${fenceVote.accepted} or ${fenceVote.refused}
  end
  return reply
end
local function applyFences(highestKey, counters, proposals, reply)
  local highest = redis.call('get', highestKey) or '0'
  local raised = false
  for i = 1, #counters do
    -- Only ever raises: with several counters read again, in case two
    -- names share one (a lone counter still holds what readFences read).
    local now = #counters == 1 and readCounters[1] or redis.call('get', counters[i]) or '0'
    if reply[2 * i + 1] == ${fenceVote.accepted} and less(now, proposals[i]) then
      redis.call('set', counters[i], proposals[i])
      if less(highest, proposals[i]) then
        highest = proposals[i]
        raised = true
      end
    end
  end
  if raised then redis.call('set', highestKey, highest) end
end`;

/** The quarantine check and the counters, for a script that starts with both. */
export const fencedScriptPrelude = `${quarantineCheck}
${fenceCounters}`;

/**
 * The fencing round after an acquire whose proposals were stale: raises the
 * counters only on nodes where every lock key still holds our value
 * (notHeld otherwise), so, as in the acquire, a counter moves only under
 * our lock. Layout as above; ARGV[2] is unused.
 */
export const fenceScript = new LuaScript(
  "fence",
  `${fencedScriptPrelude}
local marker, refusal = checkQuarantine(KEYS[1], KEYS[2], ARGV[3])
if refusal then return refusal end
local locks, counters, proposals = fencedLayout()
for _, key in ipairs(locks) do
  if redis.call('get', key) ~= ARGV[1] then return ${fenceReply.notHeld} end
end
local reply, unknown = readFences(marker, KEYS[3], counters, proposals)
if unknown then return unknown end
applyFences(KEYS[4], counters, proposals, reply)
return reply`,
);

/** Replies of fenceMaxReadScript. */
const fenceMaxReply = {
  /** {known, highest, floor} */
  known: 1,
  /** {unknown}: this node's own counters are unknown (it lost its memory, not repaired). */
  unknown: fenceReply.unknown,
} as const;

/**
 * What a repair of another node reads here: KEYS[1] marker, KEYS[2] fence
 * floor, KEYS[3] highest accepted value.
 */
export const fenceMaxReadScript = new LuaScript(
  "fence-max-read",
  `local floor = redis.call('get', KEYS[2])
local marker = redis.call('get', KEYS[1])
if not floor and marker ~= '1' and not (marker and marker:sub(1, 10) == 'restarted:') then
  return {${fenceMaxReply.unknown}}
end
return {${fenceMaxReply.known}, redis.call('get', KEYS[3]) or '0', floor or '0'}`,
);

/** The keys fenceMaxReadScript and fenceRepairScript take. */
export const fenceRepairKeys: readonly string[] = [markerKey, fenceFloorKey, fenceMaxKey];

/**
 * What a fenceMaxReadScript reply says: the highest value the node's
 * counters accepted (its highest accepted value or its floor), or undefined
 * when its own counters are unknown. A value that is not a counter throws.
 */
export function fenceMaxOf(reply: unknown): bigint | undefined {
  if (!Array.isArray(reply) || reply[0] !== fenceMaxReply.known) return undefined;
  return maxOf(parseCounter(reply[1]), parseCounter(reply[2]));
}

/**
 * Run whenever a client (re)checks a node: KEYS[1] marker, KEYS[2] fence
 * floor, KEYS[3] the run_id the fencing state was certified on; ARGV[1]
 * the node's run_id now. A node restarted with its data (another run_id)
 * may have come back older than what it acknowledged (a restored backup,
 * a replica promoted with lag): its marker becomes "restarted:<time>" and
 * its floor goes, so it does not vote on fences until repaired (raising is
 * always safe). Its values still count when repairing others: it did not
 * forget, it may only lag. A node that lost its memory and is not repaired
 * yet stays "lost:". 1 when it was taken out of fencing, else 0.
 */
export const fenceCertifyScript = new LuaScript(
  "fence-certify",
  `local run = redis.call('get', KEYS[3])
if run == ARGV[1] then return 0 end
redis.call('set', KEYS[3], ARGV[1])
if not run then return 0 end
local marker = redis.call('get', KEYS[1])
if not marker then return 0 end
local repaired = redis.call('exists', KEYS[2]) == 1
if marker == '1' or repaired then
  local now = redis.call('time')
  redis.call('set', KEYS[1], 'restarted:' .. now[1] .. '.' .. now[2])
  redis.call('del', KEYS[2])
  return 1
end
return 0`,
);

/** The keys fenceCertifyScript takes. */
export const fenceCertifyKeys: readonly string[] = [markerKey, fenceFloorKey, fenceRunKey];

/** fenceRepairScript's reply when it raised the floor (else 0). */
export const fenceRepairApplied = 1;

/**
 * Repairs the fencing state of a node that lost its memory: KEYS[1]
 * marker, KEYS[2] floor, KEYS[3] highest accepted value; ARGV[1] the marker
 * value the loss was seen with, ARGV[2] the highest value read from the
 * other nodes. Applies only while that same loss is current and no floor is
 * set yet: fenceRepairApplied, else 0.
 */
export const fenceRepairScript = new LuaScript(
  "fence-repair",
  `${luaDecimalLess}
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('exists', KEYS[2]) == 1 then return 0 end
redis.call('set', KEYS[2], ARGV[2])
local highest = redis.call('get', KEYS[3])
if not highest or less(highest, ARGV[2]) then redis.call('set', KEYS[3], ARGV[2]) end
return ${fenceRepairApplied}`,
);

/** Whether a fence round's reply votes on the proposals ({counted, current_1, accepted_1, ...}). */
export function isCounted(reply: unknown): boolean {
  return Array.isArray(reply) && reply[0] === fenceReply.counted;
}
