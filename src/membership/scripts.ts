/**
 * The Lua side of membership: the check every vote script makes
 * (`membershipCheckLua`, put in front of a script by `LuaScript` when it is
 * made with `checksMembership`), and the one script that writes a record.
 */
import { LuaScript } from "../node/lua-script.js";
import { aliveKey } from "../node/memory-check.js";
import {
  markerKey,
  quarantineKey,
  runKey,
  unjudgedLifetimeMs,
  unjudgedPrefix,
} from "../node/node-state.js";
import { joinsKey, serverIdentityLua } from "../node/server-identity.js";
import { changingPrefix, nodeIdKey, proposalKey, recordKey, stampKey } from "./record.js";

export { membershipRefusalOf } from "./check.js";

/** The promise a node that rejoined after losing its memory holds (above every ballot). */
export const amnesiacPromise = "amnesiac";

/**
 * The mark of a member taken back after losing its memory when too few
 * members answered to tell up to which epoch it may have forgotten a
 * change: it never lapses by itself; a change that reads a majority works
 * the epoch out (resolveMarkScript).
 */
export const unknownMark = Number.MAX_SAFE_INTEGER;

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
 * holds (\`held\` without the prefix of a change it accepted: choose.ts);
 * \`epochOf(stamp)\` a stamp's epoch (nil for ""); \`markUpTo(epochText)\`
 * marks the node as a member that lost its memory, up to that epoch (kept
 * as text: Lua prints unknownMark in exponent form).
 */
const heldStampsLua = `local held = redis.call('get', '${stampKey}') or ''
local committed = held
if string.sub(held, 1, ${changingPrefix.length}) == '${changingPrefix}' then
  committed = string.sub(held, ${changingPrefix.length + 1})
end
local function epochOf(stamp) return tonumber(string.match(stamp, '^[^:]*:(%d+):')) end
local function markUpTo(epochText)
  redis.call('set', '${proposalKey}', epochText .. '\\n${amnesiacPromise}\\n\\n\\n')
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
 * whatever its server's uptime or its marker (a node taken back by its
 * address, membership/view.ts, joins so too). Its memory identity moves
 * (node/server-identity.ts, joinsKey): state recorded on the node before,
 * ID counters included, is repaired before it votes. Replies {writeReply, the stamp it
 * holds now or "", its member id or ""}. ARGV[6] "1": the node may be a
 * member that lost its memory: it is marked with unknownMark, and takes no
 * part in changes until a change works the mark's epoch out (choose.ts).
 * The stamps compared are those of
 * the records held: a node that accepted a change (choose.ts) is at the
 * record it holds until that change, or a later one, is written; a write
 * ends what it accepted (the change chosen is the one written: a record
 * with a higher epoch comes only from it).
 */
export const writeRecordScript = new LuaScript(
  "membership-write",
  `${heldStampsLua}local id = redis.call('get', '${nodeIdKey}') or ''
-- The record held already (a step run again): nothing to write, and what
-- the node promised or accepted for the next epoch must stay (choose.ts).
if committed == ARGV[2] and (ARGV[4] == '' or id == ARGV[4]) then return {${writeReply.already}, held, id} end
if committed ~= ARGV[1] or (ARGV[4] ~= '' and id ~= '' and id ~= ARGV[4]) then
  return {${writeReply.conflict}, committed, id}
end
-- Records only move forward: one chosen for an epoch is the only one there is.
local epoch = epochOf(ARGV[2])
if not epoch or (committed ~= '' and epoch <= (epochOf(committed) or 0)) then
  return {${writeReply.conflict}, committed, id}
end
-- A change under way ends with the record written. A node that lost its
-- memory stays marked (choose.ts) until a record of the epoch its mark
-- names, or a later one, is written on it.
local markText = string.match(redis.call('get', '${proposalKey}') or '', '^(%d+)\\n${amnesiacPromise}\\n')
if markText and epoch >= tonumber(markText) then markText = nil end
redis.call('del', '${proposalKey}')
if ARGV[4] ~= '' then
  redis.call('set', '${nodeIdKey}', ARGV[4])
  id = ARGV[4]
end
redis.call('set', '${stampKey}', ARGV[2])
redis.call('set', '${recordKey}', ARGV[3])
-- A node that joins, or is taken back by its address, brings nothing the
-- cluster can trust, whatever its marker says: it starts as a node that
-- lost its memory, from now (its marker "lost:", so its fencing counters
-- are unknown until repaired; the quarantine, unjudged, counted from now),
-- and under a memory identity of its own (node/server-identity.ts), so
-- that its ID counters, recorded under the old one, are repaired too.
if ARGV[5] == 'join' then
  -- GET and SET, not INCR: the ACL the operations guide gives allows these.
  redis.call('set', '${joinsKey}', (tonumber(redis.call('get', '${joinsKey}')) or 0) + 1)
  redis.call('del', '${aliveKey}')
  local t = redis.call('time')
  local nowMs = t[1] * 1000 + math.floor(t[2] / 1000)
  redis.call('set', '${markerKey}', 'lost:' .. t[1] .. '.' .. t[2])
  redis.call('set', '${runKey}', ${serverIdentityLua})
  redis.call('set', '${quarantineKey}', '${unjudgedPrefix}replaced:0:' .. string.format('%d', nowMs), 'PX', ${unjudgedLifetimeMs})
end
-- ARGV[6] "1": the node may be a member that lost its memory, and may
-- have promised or accepted a change it forgot (choose.ts).
if ARGV[6] == '1' then markText = '${unknownMark}' end
if markText then markUpTo(markText) end
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
   * Taken back after losing its memory (view.ts): what it promised and
   * accepted is lost, so it takes no part until the epochs it may have
   * forgotten are decided without it (choose.ts).
   */
  amnesiac: 3,
  /**
   * Accept: the node lost its memory since it promised this ballot (its
   * incarnation differs): the promise it gave is not one it keeps.
   */
  forgot: 4,
} as const;

/**
 * The proposal's parts as Lua locals (\`promised\`, \`acceptedBallot\`,
 * \`incarnation\`, \`acceptedRecord\`), for ARGV[2]'s epoch: a proposal
 * of another epoch is one the node's record moved past, and counts as
 * none. The key: "<epoch>\\n<promised>\\n<accepted ballot>\\n<incarnation>\\n<accepted record>".
 * The incarnation is drawn when the node first promises for the epoch
 * (the prepare's ARGV[4]) and lost with the node's memory: an accept
 * carries the one its prepare was answered with, so a promise made before
 * a loss of memory, and forgotten, never lets its ballot be accepted.
 */
const proposalLua = `${heldStampsLua}if committed ~= ARGV[1] then return {${proposalReply.moved}, committed} end
local promised, acceptedBallot, incarnation, acceptedRecord = '', '', '', ''
local proposal = redis.call('get', '${proposalKey}')
if proposal then
  local epoch, p, b, i, r = string.match(proposal, '^([^\\n]*)\\n([^\\n]*)\\n([^\\n]*)\\n([^\\n]*)\\n(.*)$')
  if epoch == ARGV[2] then promised, acceptedBallot, incarnation, acceptedRecord = p, b, i, r
  elseif p == '${amnesiacPromise}' then promised = p end
end
local function keep(promise, ballot, record)
  redis.call('set', '${proposalKey}', ARGV[2] .. '\\n' .. promise .. '\\n' .. ballot .. '\\n' .. incarnation .. '\\n' .. record)
end
`;

/**
 * Phase 1 of choosing a change (choose.ts): ARGV[1] the stamp of the record
 * the change starts from, ARGV[2] the new epoch, ARGV[3] the ballot, ARGV[4]
 * a fresh random incarnation (kept if the node has one for the epoch).
 * Promises to accept nothing below the ballot; replies {ok, the ballot and
 * record accepted before ("" for none), the incarnation}, {outbid, the
 * ballot promised}, or {moved, the stamp of the record held}. A member
 * taken back after losing its memory replies {amnesiac}: it takes no part.
 */
export const prepareScript = new LuaScript(
  "membership-prepare",
  `${proposalLua}if promised == '${amnesiacPromise}' then return {${proposalReply.amnesiac}} end
if promised ~= '' and promised >= ARGV[3] then return {${proposalReply.outbid}, promised} end
if incarnation == '' then incarnation = ARGV[4] end
keep(ARGV[3], acceptedBallot, acceptedRecord)
return {${proposalReply.ok}, acceptedBallot, acceptedRecord, incarnation}`,
);

/**
 * Phase 2 (choose.ts): ARGV[1..3] as for prepareScript, ARGV[4] the
 * incarnation this node's prepare answered with, ARGV[5] the record.
 * Accepts it unless promised to a higher ballot, or its memory was lost
 * since ({forgot}), and from then on refuses every vote (its stamp takes
 * the changing prefix) until a record is written: no vote of the epoch it
 * leaves can win once a majority accepted. Replies {ok}, {outbid, the
 * ballot promised}, {forgot} or {moved, the stamp held}.
 */
export const acceptScript = new LuaScript(
  "membership-accept",
  `${proposalLua}if promised == '${amnesiacPromise}' or incarnation ~= ARGV[4] then return {${proposalReply.forgot}} end
if promised ~= '' and promised > ARGV[3] then return {${proposalReply.outbid}, promised} end
keep(ARGV[3], ARGV[3], ARGV[5])
if held == committed then redis.call('set', '${stampKey}', '${changingPrefix}' .. held) end
return {${proposalReply.ok}}`,
);

/**
 * ARGV[1]: the epoch a change worked out, from a majority's answers, for a
 * member whose mark is unknownMark (change.ts, forgottenUpTo): the mark
 * becomes it, or ends if the member holds a record of that epoch already.
 * Any other mark is left as it is. Replies 1 if it changed the mark.
 */
export const resolveMarkScript = new LuaScript(
  "membership-resolve-mark",
  `${heldStampsLua}local proposal = redis.call('get', '${proposalKey}') or ''
if string.sub(proposal, 1, ${String(unknownMark).length + 1}) ~= '${unknownMark}\\n' then return 0 end
if (epochOf(committed) or 0) >= tonumber(ARGV[1]) then redis.call('del', '${proposalKey}')
else markUpTo(ARGV[1]) end
return 1`,
);

/** The keys a check reads, in this order, with one MGET. */
export const readKeys: readonly string[] = [nodeIdKey, recordKey, stampKey, proposalKey];

/** The epoch a member's mark names (writeRecordScript, ARGV[6]), from its proposal key; undefined if unmarked. */
export function markOf(proposal: unknown): number | undefined {
  if (typeof proposal !== "string") return undefined;
  const match = new RegExp(`^(\\d+)\\n${amnesiacPromise}\\n`).exec(proposal);
  return match ? Number(match[1]) : undefined;
}
