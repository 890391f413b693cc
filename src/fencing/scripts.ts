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
import { aliveKey, memoryCheckLua } from "../node/memory-check.js";
import {
  isRestartedLua,
  isUnjudgedLua,
  markerKey,
  quarantineCheck,
  quarantineKey,
  runKey,
} from "../node/node-state.js";
import { sameMemoryLua, serverIdentityLua } from "../node/server-identity.js";
import type { Witness } from "../quorum/counter-repair.js";

/**
 * Fencing state of the node as a whole: the floor below which no counter
 * of this node is trusted (written by the repair after a loss), and the
 * highest value any counter of this node ever accepted (what a repair of
 * another node reads).
 */
export const fenceFloorKey = "redquorum:fence-floor";
export const fenceMaxKey = "redquorum:fence-max";

/** The counter of a lock key's fencing tokens is this prefix and the lock key (the scripts derive it too). */
export const fenceKeyPrefix = "redquorum:fence:";

/** The counter key of a lock key's fencing tokens. */
export function fenceKeyOf(lockKey: string): string {
  return fenceKeyPrefix + lockKey;
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
 * The layout of the fenced lock scripts (acquire and fence): KEYS the lock
 * keys (each counter is derived from its lock key, the node-wide keys are
 * fixed names: fewer arguments to send and parse on every call). ARGV[1]
 * the lock's value, ARGV[2] its TTL in ms, ARGV[3] the quarantine in ms,
 * ARGV[4] how many counters (0, or one per lock key), their proposals from
 * ARGV[5]; the acquire adds more after them.
 */
export function fencedScriptArgs(
  value: string,
  ttl: string,
  quarantineArg: string,
  proposals: readonly bigint[],
): string[] {
  const args = [value, ttl, quarantineArg, String(proposals.length)];
  for (const proposal of proposals) args.push(String(proposal));
  return args;
}

/**
 * Lua, for the fenced scripts: `fencedLayout()` splits KEYS and ARGV as
 * above into the lock keys, the counters and the proposals.
 * `readNode(counters, extraKey[, got])` reads in one MGET what the node-wide
 * checks and the counters need: {marker, quarantined, floor, highest,
 * counters = {...}, extra, alive} (false where missing; `extra`: one more
 * key a script needs, such as a reservation; `alive`: the cached memory
 * identity, node/memory-check.ts, read last); `got`: the reply of that
 * same MGET when the script made it already (the acquire's fast path).
 *
 * A counter's value here is max(counter or 0, floor). A node that lost its
 * memory (marker not "1") and has no floor yet knows none of its counters:
 * `readFences(marker, node, counters, proposals)` answers nil and
 * {unknown, marker} there, until a repair sets the floor to the highest
 * value a set of other nodes that meets every majority has accepted — then
 * it is healthy for every resource, also ones first locked later. Else it
 * answers the reply {counted, current_1, accepted_1, ...}, where current is
 * the value before (accepted 1) or the value that refused the proposal
 * (accepted 0). `applyFences(node, counters, proposals, reply)` then
 * raises each counter below its accepted proposal, and the node's highest
 * accepted value with it (one MSET for a lone counter).
 *
 * MGET reads a key of the wrong type as missing, where GET fails the
 * script (a node error, as it should be: such a counter holds no value we
 * can trust). So whatever the MGET found missing is read again with GET
 * before it counts as missing — except the floor of a node whose marker
 * is "1": only a repair writes a floor, repairs run only on "lost:" and
 * "restarted:" nodes, and init marks "1" only a node without one, so
 * there is none to read.
 *
 * `fenceVote` and `raiseFence` (fenceVoteLua, which a script defines
 * before these) are one counter's part of them, shared with the acquire's
 * fast path (lock/scripts.ts).
 */
export const fenceCountersLua = `
local function fencedLayout()
  local fenceCount = tonumber(ARGV[4])
  local counters, proposals = {}, {}
  for i = 1, fenceCount do
    counters[i] = '${fenceKeyPrefix}' .. KEYS[i]
    proposals[i] = ARGV[4 + i]
  end
  return KEYS, counters, proposals
end
local function readNode(counters, extraKey, got)
  local fenced = #counters > 0
  local last = fenced and 4 + #counters or 2
  local alive = last + (extraKey and 2 or 1)
  if not got then
    local keys = {'${markerKey}', '${quarantineKey}'}
    if fenced then
      keys[3] = '${fenceFloorKey}'
      keys[4] = '${fenceMaxKey}'
      for i = 1, #counters do keys[4 + i] = counters[i] end
    end
    if extraKey then keys[last + 1] = extraKey end
    keys[alive] = '${aliveKey}'
    got = redis.call('mget', unpack(keys))
  end
  local node = {marker = got[1], quarantined = got[2], counters = {}, alive = got[alive]}
  if fenced then
    node.floor, node.highest = got[3], got[4]
    for i = 1, #counters do node.counters[i] = got[4 + i] end
  end
  if extraKey then node.extra = got[last + 1] end
  return node
end
local function readFences(marker, node, counters, proposals)
  local reply = {${fenceReply.counted}}
  if #counters == 0 then return reply end
  local floor = node.floor
  if not floor and marker == '1' then
    floor = '0'
  elseif not floor then
    floor = redis.call('get', '${fenceFloorKey}')
    if not floor then return nil, {${fenceReply.unknown}, marker} end
  end
  for i = 1, #counters do
    node.counters[i] = node.counters[i] or redis.call('get', counters[i]) or '0'
    reply[2 * i], reply[2 * i + 1] = fenceVote(node.counters[i], floor, proposals[i])
  end
  return reply
end
local function applyFences(node, counters, proposals, reply)
  local highest = node.highest or redis.call('get', '${fenceMaxKey}') or '0'
  if #counters == 1 then
    if reply[3] == ${fenceVote.accepted} then
      raiseFence(counters[1], node.counters[1], highest, proposals[1])
    end
    return
  end
  local raised = false
  for i = 1, #counters do
    -- Only ever raises: read again, in case two names share one counter.
    local now = redis.call('get', counters[i]) or '0'
    if reply[2 * i + 1] == ${fenceVote.accepted} and less(now, proposals[i]) then
      redis.call('set', counters[i], proposals[i])
      if less(highest, proposals[i]) then
        highest = proposals[i]
        raised = true
      end
    end
  end
  if raised then redis.call('set', '${fenceMaxKey}', highest) end
end`;

/**
 * Lua: one counter's vote and raise. `fenceVote(raw, floor, proposal)`:
 * the counter's value (max(raw, floor)) and whether it accepts the
 * proposal (fenceVote.accepted / refused). `raiseFence(counterKey, raw,
 * highest, proposal)`, for an accepted proposal: raises the counter (raw:
 * its own value) to it, and the node's highest accepted value with it in
 * the same MSET when that is lower. Defines `less` (decimal.ts).
 */
export const fenceVoteLua = `${luaDecimalLess}
local function fenceVote(raw, floor, proposal)
  local current = raw
  if less(current, floor) then current = floor end
  return current, less(current, proposal) and ${fenceVote.accepted} or ${fenceVote.refused}
end
local function raiseFence(counterKey, raw, highest, proposal)
  if not less(raw, proposal) then return end
  if less(highest, proposal) then
    redis.call('mset', counterKey, proposal, '${fenceMaxKey}', proposal)
  else
    redis.call('set', counterKey, proposal)
  end
end`;

/** The quarantine and memory checks and the counters, for a script that starts with them. */
export const fencedScriptPrelude = `${quarantineCheck}
${memoryCheckLua}
${fenceVoteLua}
${fenceCountersLua}`;

/**
 * The fencing round after an acquire whose proposals were stale: raises the
 * counters only on nodes where every lock key still holds our value
 * (notHeld otherwise), so, as in the acquire, a counter moves only under
 * our lock. Layout as above; ARGV[2] is unused.
 */
export const fenceScript = new LuaScript(
  "fence",
  `${fencedScriptPrelude}
local locks, counters, proposals = fencedLayout()
local node = readNode(counters)
-- A memory replaced in place puts the node in quarantine: read it again.
if select(2, checkMemory(node.alive, true)) then node = readNode(counters) end
local marker, refusal = checkQuarantine(node.marker, node.quarantined, ARGV[3])
if refusal then return refusal end
for _, key in ipairs(locks) do
  if redis.call('get', key) ~= ARGV[1] then return ${fenceReply.notHeld} end
end
local reply, unknown = readFences(marker, node, counters, proposals)
if unknown then return unknown end
applyFences(node, counters, proposals, reply)
return reply`,
  { checksMembership: true },
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
 * floor, KEYS[3] highest accepted value. {known, highest, floor, mayLag,
 * unjudged}: mayLag 1 for a node that restarted and is not repaired yet
 * (it kept its counters but may have come back older: counter-repair.ts);
 * {unknown, unjudged}. unjudged: the node's marker when its quarantine
 * waits for its judgement ("" otherwise): the memory check here may be the
 * first call to meet the loss, and starts that quarantine (unjudgedOf).
 */
export const fenceMaxReadScript = new LuaScript(
  "fence-max-read",
  `${memoryCheckLua}
checkMemory()
local floor = redis.call('get', KEYS[2])
local marker = redis.call('get', KEYS[1])
local quarantine = redis.call('get', '${quarantineKey}')
local unjudged = ''
if marker and ${isUnjudgedLua("quarantine")} then unjudged = marker end
local restarted = ${isRestartedLua("marker")}
if not floor and marker ~= '1' and not restarted then
  return {${fenceMaxReply.unknown}, unjudged}
end
local mayLag = (restarted and not floor) and 1 or 0
return {${fenceMaxReply.known}, redis.call('get', KEYS[3]) or '0', floor or '0', mayLag, unjudged}`,
);

/**
 * The marker of a loss that a fenceMaxReadScript reply found waiting for
 * its judgement (lock/quarantine-judge.ts), or "" for none.
 */
export function unjudgedOf(reply: unknown): string {
  if (!Array.isArray(reply)) return "";
  const marker = reply[reply.length - 1];
  return typeof marker === "string" ? marker : "";
}

/** The keys fenceMaxReadScript and fenceRepairScript take. */
export const fenceRepairKeys: readonly string[] = [markerKey, fenceFloorKey, fenceMaxKey];

/**
 * What a fenceMaxReadScript reply says: the highest value the node's
 * counters accepted (its highest accepted value or its floor) and whether
 * it may lag, or undefined when its own counters are unknown. A value that
 * is not a counter throws.
 */
export function fenceMaxOf(reply: unknown): Witness | undefined {
  if (!Array.isArray(reply) || reply[0] !== fenceMaxReply.known) return undefined;
  return { value: maxOf(parseCounter(reply[1]), parseCounter(reply[2])), mayLag: reply[3] === 1 };
}

/**
 * Lua statements of both floor writers (the repair, the operator's floor):
 * the node's floor (KEYS[2]) set to `value` (a Lua expression), and its
 * highest accepted value (KEYS[3]) raised to it, which a repair of another
 * node reads. Needs `less` (decimal.ts).
 */
function setFloorLua(value: string): string {
  return `redis.call('set', KEYS[2], ${value})
local highest = redis.call('get', KEYS[3])
if not highest or less(highest, ${value}) then redis.call('set', KEYS[3], ${value}) end`;
}

/**
 * Lua expression: whether this server's memory is the one its loss was
 * recorded on (the identity, node/server-identity.ts): not a restart, not
 * a copy restored in place since.
 */
const lossRecordedHereLua = `(function()
  local recorded = redis.call('get', '${runKey}')
  if not recorded then return false end
  local identity = ${serverIdentityLua}
  return ${sameMemoryLua("recorded", "identity")}
end)()`;

/** fenceRepairScript's reply when it raised the floor (else 0). */
export const fenceRepairApplied = 1;

/**
 * Repairs the fencing state of a node that lost its memory: KEYS[1]
 * marker, KEYS[2] floor, KEYS[3] highest accepted value; ARGV[1] the marker
 * value the loss was seen with, ARGV[2] the highest value read from the
 * other nodes. Applies only while that same loss is current on the server
 * it was recorded on and no floor is set yet: fenceRepairApplied, else 0.
 */
export const fenceRepairScript = new LuaScript(
  "fence-repair",
  `${luaDecimalLess}
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('exists', KEYS[2]) == 1 then return 0 end
-- Only on the server the loss was recorded on (the run_id written with
-- the "lost:" marker, node-state.ts, or by the certify that found the
-- restart): the repair is sent without a check first, and a node restored
-- from an older copy meanwhile must meet its certify (lock/scripts.ts),
-- which quarantines it, before anything counts its votes again.
if not ${lossRecordedHereLua} then return 0 end
${setFloorLua("ARGV[2]")}
return ${fenceRepairApplied}`,
);

/** Replies of fenceFloorScript: {state, marker, how the loss was found}. */
export const fenceFloorReply = {
  /** The node's counters were unknown: its floor is set now. */
  raised: 1,
  /** Its counters are known (in service, or repaired) and its floor is at the value or above: nothing to do. */
  known: 0,
  /** A loss whose run_id is not recorded on this server: a lock call there records it first. */
  unrecorded: 2,
  /** Its counters are known, and its floor was below the value (or unset): raised to it. */
  raisedKnown: 3,
} as const;

/**
 * An operator's repair of fencing counters that no repair could restore
 * (fencing/floor.ts): KEYS as fenceRepairScript's, ARGV[1] a value at
 * least every token issued (the operator's bound, or the highest value a
 * node knows if higher), ARGV[2] the operator's bound. A node without a marker is taken for one
 * that lost its memory, as a lock call would find it (the operator says
 * tokens were issued): it is marked "lost:…" and its quarantine starts
 * (quarantineCheck). Then the floor of a node whose counters are unknown
 * (a loss marker, no floor) is set, on the server the loss was recorded
 * on; the marker stays, and so does any quarantine. A node whose counters
 * are known gets its floor raised to the operator's bound if below it (never
 * lowered): a floor raised on a node only moves its later votes up, so
 * this is safe at any time, and it is how an operator corrects a floor
 * given too low (the unknown nodes, floored, count as known on a second
 * run). The reply's third element is 1 when this call found the marker
 * missing.
 */
export const fenceFloorScript = new LuaScript(
  "fence-floor",
  `${luaDecimalLess}
${quarantineCheck}
local found = redis.call('get', KEYS[1])
local marker = checkQuarantine(found, redis.call('get', '${quarantineKey}'), '-1')
local unmarked = found and 0 or 1
if marker == '1' or redis.call('exists', KEYS[2]) == 1 then
  local floor = redis.call('get', KEYS[2]) or '0'
  if not less(floor, ARGV[2]) then return {${fenceFloorReply.known}, marker, unmarked} end
  ${setFloorLua("ARGV[2]")}
  return {${fenceFloorReply.raisedKnown}, marker, unmarked}
end
if not ${lossRecordedHereLua} then return {${fenceFloorReply.unrecorded}, marker, unmarked} end
${setFloorLua("ARGV[1]")}
return {${fenceFloorReply.raised}, marker, unmarked}`,
);

/** Whether a fence round's reply votes on the proposals ({counted, current_1, accepted_1, ...}). */
export function isCounted(reply: unknown): boolean {
  return Array.isArray(reply) && reply[0] === fenceReply.counted;
}
