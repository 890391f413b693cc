/**
 * The scripts of a lock node's restart quarantine and the cluster's
 * horizon: the certify every client runs when it (re)checks a node, the
 * horizon read and the judgement of a lost node's quarantine
 * (quarantine-judge.ts, horizon.ts).
 */

import { fenceFloorKey } from "../fencing/scripts.js";
import { LuaScript } from "../node/lua-script.js";
import { identityCacheLua, memoryCheckLua, recordMemoryLua } from "../node/memory-check.js";
import {
  horizonKey,
  isUnjudgedLua,
  longestRecordLua,
  markerKey,
  nowMsLua,
  quarantineKey,
  runKey,
  unjudgedPrefix,
  uptimeSecondsLua,
} from "../node/node-state.js";
import { sameMemoryLua, sameServerLua, serverIdentityLua } from "../node/server-identity.js";

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
 * records now (horizonKey), this client's included; the marker of the loss
 * whose quarantine waits for its judgement, else ""}.
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
-- The marker of a loss whose quarantine waits for its judgement, if any:
-- the client judges it (a check may meet the loss first, or be the last
-- call of a client that is closing, with no vote to follow).
local function unjudged()
  local quarantine = redis.call('get', KEYS[4])
  if ${isUnjudgedLua("quarantine")} then return redis.call('get', KEYS[1]) or '' end
  return ''
end
local run = redis.call('get', KEYS[3])
if run and ${sameMemoryLua("run", "identity")} then
  -- Recorded as a bare run_id by an older version: the count too, now.
  if run ~= identity then redis.call('set', KEYS[3], identity) end
  return {0, horizon, unjudged()}
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
local outOfFencing = recordMemory(run, identity, durable, inPlace and 'replaced' or 'restart')
return {outOfFencing, horizon, unjudged()}`,
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
 * KEYS[1] the horizon records, KEYS[2] the quarantine, KEYS[3] the marker.
 * Replies {the longest maxTtlMs recorded and not lapsed (0 for none), 1
 * when the node is in a quarantine of its own or has no marker (it may
 * have lost records), else 0, and the marker of its loss when that
 * quarantine waits for its judgement, else ""}: the judge then judges that
 * loss too (this read may be the first to meet it, and no vote of the
 * caller's may follow).
 */
export const horizonReadScript = new LuaScript(
  "lock-horizon-read",
  `${memoryCheckLua}
-- A memory replaced in place (it may have lost records) starts its own
-- quarantine here, which the reply then says.
checkMemory()
${nowMsLua}
local quarantine = redis.call('get', KEYS[2])
local marker = redis.call('get', KEYS[3])
local unjudged = ''
if marker and ${isUnjudgedLua("quarantine")} then unjudged = marker end
-- No marker: a node that lost its memory and that no vote has met yet (a
-- vote would have marked it): it may have lost records too.
return {${longestRecordLua("KEYS[1]")}, (quarantine or not marker) and 1 or 0, unjudged}`,
);

export const horizonReadKeys: readonly string[] = [horizonKey, quarantineKey, markerKey];

/** A horizon read's reply as a repair witness (quorum/counter-repair.ts), and the marker of a loss it found unjudged ("" for none). */
export function readHorizonWitness(reply: unknown): {
  value: bigint;
  mayLag: boolean;
  unjudged: string;
} {
  const [horizon, quarantined, unjudged] = Array.isArray(reply) ? reply : [];
  if (typeof horizon !== "number" || !Number.isSafeInteger(horizon) || horizon < 0) {
    throw new Error(`horizon read: unexpected reply ${JSON.stringify(reply)}`);
  }
  return {
    value: BigInt(horizon),
    mayLag: quarantined !== 0,
    unjudged: typeof unjudged === "string" ? unjudged : "",
  };
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
 * Replies 0: not current (judged already, or another loss since); {0,
 * marker}: another loss since, not judged yet, which that marker names; 1:
 * in quarantine; 2: over.
 */
export const judgeQuarantineScript = new LuaScript(
  "lock-judge-quarantine",
  `local value = redis.call('get', KEYS[2])
local kind, untilMs, foundMs
if value then kind, untilMs, foundMs = string.match(value, '^${unjudgedPrefix}(%a+):(%d+):?(%d*)$') end
local current = redis.call('get', KEYS[1])
if current ~= ARGV[1] or not kind then
  -- Another loss since, not judged yet: named, for the caller to judge it
  -- (reading the other nodes again: it came after this judgement's reads).
  if kind and current then return {0, current} end
  return 0
end
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

/** judgeQuarantineScript's replies (besides {0, marker}: see judgedOrNewer). */
export type QuarantineJudgement = 0 | 1 | 2;

/**
 * A judgement's reply: the judgement, or the marker of a newer loss the
 * node holds unjudged (the reply {0, marker}).
 */
export function judgedOrNewer(reply: unknown): QuarantineJudgement | { newer: string } {
  if (Array.isArray(reply) && reply[0] === 0 && typeof reply[1] === "string") {
    return { newer: reply[1] };
  }
  if (reply === 0 || reply === 1 || reply === 2) return reply;
  throw new Error(`quarantine judgement: unexpected reply ${JSON.stringify(reply)}`);
}
