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
import { nodeIdKey, recordKey, stampKey } from "./record.js";

export { membershipRefusalOf } from "./check.js";

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
 * holds now or "", its member id or ""}.
 */
export const writeRecordScript = new LuaScript(
  "membership-write",
  `local held = redis.call('get', '${stampKey}') or ''
local id = redis.call('get', '${nodeIdKey}') or ''
if held == ARGV[2] and (ARGV[4] == '' or id == ARGV[4]) then return {${writeReply.already}, held, id} end
if held ~= ARGV[1] or (ARGV[4] ~= '' and id ~= '' and id ~= ARGV[4]) then
  return {${writeReply.conflict}, held, id}
end
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
return {${writeReply.written}, ARGV[2], id}`,
);

/** The keys a check reads, in this order, with one MGET. */
export const readKeys: readonly string[] = [nodeIdKey, recordKey];
