/**
 * The Lua side of membership: the check every vote script makes
 * (`membershipCheckLua`, put in front of a script by `LuaScript` when it is
 * made with `checksMembership`), and the one script that writes a record.
 */
import { LuaScript } from "../node/lua-script.js";
import {
  markerKey,
  quarantineKey,
  runKey,
  unjudgedLifetimeMs,
  unjudgedPrefix,
} from "../node/node-state.js";
import { serverIdentityLua } from "../node/server-identity.js";
import { changingPrefix, nodeIdKey, proposalKey, recordKey, stampKey } from "./record.js";

export { membershipRefusalOf } from "./check.js";

/** The promise a node that rejoined after losing its memory holds (above every ballot). */
export const amnesiacPromise = "amnesiac";

/** writeRecordScript's replies (first element). */
export const writeReply = {
  /** Written. */
  written: 1,
  /** The node already held the new stamp (a step run again): nothing to do. */
  already: 2,
  /** The node held neither the expected stamp nor the new one: nothing written. */
  conflict: 0,
} as const;

/**
 * Lua: \`held\` the node's stamp, \`committed\` the stamp of the record it
 * holds (\`held\` without the prefix of a change it accepted: choose.ts).
 */
const heldStampsLua = `local held = redis.call('get', '${stampKey}') or ''
local committed = held
if string.sub(held, 1, ${changingPrefix.length}) == '${changingPrefix}' then
  committed = string.sub(held, ${changingPrefix.length + 1})
end
`;

/**
 * Writes a record, compare-and-set: ARGV[1] the stamp the writer read
 * ("" for none), ARGV[2] the new stamp, ARGV[3] the record (JSON), ARGV[4]
 * the member id to give the node ("" to keep the one it holds; a node
 * holding another id is a conflict), ARGV[5] "join" for a node joining the
 * cluster: it has no memory the cluster can trust, so it starts as a node
 * that lost its memory does, from now — its marker "lost:", so its fencing
 * counters are unknown until repaired, and the restart quarantine
 * (unjudged, counted from now: lock/scripts.ts, judgeQuarantineScript) —
 * whatever its server's uptime; "rejoin" for a node taken back by its
 * address (membership/view.ts): it joins so unless its marker, read in the
 * same call, says it is in service ("1"). Replies {writeReply, the stamp it
 * holds now or "", its member id or ""}. The stamps compared are those of
 * the records held: a node that accepted a change (choose.ts) is at the
 * record it holds until that change, or a later one, is written; a write
 * ends what it accepted (the change chosen is the one written: a record
 * with a higher epoch comes only from it).
 */
export const writeRecordScript = new LuaScript(
  "membership-write",
  `${heldStampsLua}local id = redis.call('get', '${nodeIdKey}') or ''
if held == ARGV[2] and (ARGV[4] == '' or id == ARGV[4]) then return {${writeReply.already}, held, id} end
if committed ~= ARGV[1] or (ARGV[4] ~= '' and id ~= '' and id ~= ARGV[4]) then
  return {${writeReply.conflict}, committed, id}
end
-- A change under way ends with the record written; a node that lost its
-- memory stays marked so (for the epoch after this record) until a change
-- tells it what the other members accepted (choose.ts).
local amnesiac = string.find(redis.call('get', '${proposalKey}') or '', '\\n${amnesiacPromise}\\n', 1, true)
redis.call('del', '${proposalKey}')
if ARGV[4] ~= '' then
  redis.call('set', '${nodeIdKey}', ARGV[4])
  id = ARGV[4]
end
redis.call('set', '${stampKey}', ARGV[2])
redis.call('set', '${recordKey}', ARGV[3])
if ARGV[5] == 'join' or (ARGV[5] == 'rejoin' and redis.call('get', '${markerKey}') ~= '1') then
  local t = redis.call('time')
  local nowMs = t[1] * 1000 + math.floor(t[2] / 1000)
  redis.call('set', '${markerKey}', 'lost:' .. t[1] .. '.' .. t[2])
  redis.call('set', '${runKey}', ${serverIdentityLua})
  redis.call('set', '${quarantineKey}', '${unjudgedPrefix}replaced:0:' .. string.format('%d', nowMs), 'PX', ${unjudgedLifetimeMs})
end
-- A node taken back after losing its memory may have promised or accepted
-- a change of the next epoch, and forgotten it (choose.ts).
if ARGV[5] == 'rejoin' or amnesiac then
  local epoch = tonumber(string.match(ARGV[2], '^[^:]*:(%d+):'))
  if epoch then
    redis.call('set', '${proposalKey}', (epoch + 1) .. '\\n${amnesiacPromise}\\n\\n')
  end
end
return {${writeReply.written}, ARGV[2], id}`,
);

/** The replies of the proposal scripts (first element). */
export const proposalReply = {
  /** Promised (prepare: then the ballot and record it accepted before, "" for none) or accepted. */
  ok: 1,
  /** Promised to a higher ballot: then that ballot. */
  outbid: 2,
  /** Holds another record than the one the change starts from: then its stamp. */
  moved: 0,
  /**
   * Rejoined after losing its memory (view.ts): what it promised and
   * accepted for this epoch is lost, so it takes part only once told what
   * every other member accepted (prepareScript).
   */
  amnesiac: 3,
} as const;

/**
 * The proposal's parts as Lua locals (\`epoch\`, \`promised\`, \`acceptedBallot\`,
 * \`acceptedRecord\`), for ARGV[2]'s epoch: a proposal of another epoch is
 * one the node's record moved past, and counts as none.
 */
const proposalLua = `${heldStampsLua}if committed ~= ARGV[1] then return {${proposalReply.moved}, committed} end
local promised, acceptedBallot, acceptedRecord = '', '', ''
local proposal = redis.call('get', '${proposalKey}')
if proposal then
  local epoch, p, b, r = string.match(proposal, '^([^\\n]*)\\n([^\\n]*)\\n([^\\n]*)\\n(.*)$')
  if epoch == ARGV[2] then promised, acceptedBallot, acceptedRecord = p, b, r
  elseif p == '${amnesiacPromise}' then promised = p end
end
`;

/**
 * Phase 1 of choosing a change (choose.ts): ARGV[1] the stamp of the record
 * the change starts from, ARGV[2] the new epoch, ARGV[3] the ballot. Promises
 * to accept nothing below the ballot; replies {ok, the ballot and record
 * accepted before ("" for none)}, {outbid, the ballot promised}, or {moved,
 * the stamp of the record held}. A node that rejoined after losing its
 * memory replies {amnesiac}, unless given ARGV[4] and ARGV[5]: the ballot
 * and record accepted under it that the change found highest among the
 * other members' promises (enough of them to meet every majority), which
 * it then holds as accepted.
 */
export const prepareScript = new LuaScript(
  "membership-prepare",
  `${proposalLua}if promised == '${amnesiacPromise}' then
  if not ARGV[4] then return {${proposalReply.amnesiac}} end
  acceptedBallot, acceptedRecord = ARGV[4], ARGV[5]
elseif promised ~= '' and promised >= ARGV[3] then return {${proposalReply.outbid}, promised} end
redis.call('set', '${proposalKey}', ARGV[2] .. '\\n' .. ARGV[3] .. '\\n' .. acceptedBallot .. '\\n' .. acceptedRecord)
return {${proposalReply.ok}, acceptedBallot, acceptedRecord}`,
);

/**
 * Phase 2 (choose.ts): ARGV[1..3] as for prepareScript, ARGV[4] the record.
 * Accepts it unless promised to a higher ballot, and from then on refuses
 * every vote (its stamp takes the changing prefix) until a record is
 * written: no vote of the epoch it leaves can win once a majority accepted.
 * Replies {ok}, {outbid, the ballot promised} or {moved, the stamp held}.
 */
export const acceptScript = new LuaScript(
  "membership-accept",
  `${proposalLua}if promised ~= '' and promised > ARGV[3] then return {${proposalReply.outbid}, promised} end
redis.call('set', '${proposalKey}', ARGV[2] .. '\\n' .. ARGV[3] .. '\\n' .. ARGV[3] .. '\\n' .. ARGV[4])
if held == committed then redis.call('set', '${stampKey}', '${changingPrefix}' .. held) end
return {${proposalReply.ok}}`,
);

/** The keys a check reads, in this order, with one MGET. */
export const readKeys: readonly string[] = [nodeIdKey, recordKey, stampKey];
