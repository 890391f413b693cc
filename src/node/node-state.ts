/**
 * A node's own state, kept for the node as a whole rather than for one lock
 * or counter: the keys redquorum keeps for itself, the node marker, the
 * restart quarantine, and init's script that marks the nodes of a cluster
 * never used. Node-level because a node that lost its memory is out of
 * service for every lock and every fencing counter on it; the lock scripts
 * (lock/quarantine-scripts.ts) and the fencing scripts (fencing/scripts.ts) start with
 * the quarantine fragment below, and NextId's keys share the prefix.
 *
 * The restart quarantine (seed 1, "delayed restart"): a node whose marker
 * is gone lost its memory (restart without persistence, FLUSHALL): it may
 * have forgotten keys of locks that are still held, so it stays out of
 * service (answers {quarantined, marker}) until a quarantine of the
 * cluster's maxTtlMs (longer than any lock) has passed. Every client sees
 * the same server-side quarantine.
 */

import { LuaScript } from "./lua-script.js";
import { replacedSinceStartLua, serverIdentityLua } from "./server-identity.js";

export const markerKey = "redquorum:marker";
export const quarantineKey = "redquorum:quarantine";
/**
 * The memory a lock node was last certified on: "<run_id>/<count of
 * data-replacing commands>" (server-identity.ts; a bare run_id from older
 * versions); lock/quarantine-scripts.ts, certifyScript, and memory-check.ts.
 */
export const runKey = "redquorum:run";
/**
 * The maxTtlMs of the clients that checked this node lately, each until
 * its record lapses (a sorted set: certifyScript; lock/horizon.ts): how
 * long the cluster's locks may last.
 */
export const horizonKey = "redquorum:horizon";
/**
 * A lock node's marker after a restart with its data (lock/quarantine-scripts.ts,
 * certifyScript): "restarted:<server time>".
 */
export const restartedMarkerPrefix = "restarted:";

/** Lua: whether the Lua expression `marker` (a marker's value, or false) says the node restarted. */
export function isRestartedLua(marker: string): string {
  return `(${marker} and ${marker}:sub(1, ${restartedMarkerPrefix.length}) == '${restartedMarkerPrefix}')`;
}

/** Lua expression over the server's INFO: its uptime in whole seconds (rounded down). */
export const uptimeSecondsLua =
  "(tonumber(string.match(redis.call('info', 'server'), 'uptime_in_seconds:(%d+)')) or 0)";

/**
 * The quarantine's value until its length is judged from the other nodes
 * (lock/quarantine-judge.ts): "unjudged:<kind>:<until>". The kind says
 * when the loss happened: "start" (no marker, never flushed: the server
 * started empty), "flushed" (no marker after a flush: at the latest when
 * the marker was found missing), "restart" (restarted from data that may
 * be older: the server's start). <until> is the server time in ms until
 * which a quarantine that was running already had to last (0 for none):
 * the judgement keeps at least that. Judged, the value is "1" (the first
 * two kinds) or "restart".
 */
export const unjudgedPrefix = "unjudged:";
export function unjudgedLua(kind: "start" | "flushed" | "restart", untilMs = "'0'"): string {
  return `'${unjudgedPrefix}${kind}:' .. ${untilMs}`;
}
/** Lua: whether the Lua expression `value` (a quarantine's value, or false) waits for its judgement. */
export function isUnjudgedLua(value: string): string {
  return `(${value} and string.sub(${value}, 1, ${unjudgedPrefix.length}) == '${unjudgedPrefix}')`;
}
/**
 * Lua: whether the Lua expression `value` (a quarantine's value, or false)
 * is unjudged of kind restart or replaced (a memory replaced in place:
 * node/memory-check.ts), the kinds of a node that served before.
 */
export function isUnjudgedRestartLua(value: string): string {
  return `(${value} and (${value}:sub(1, ${unjudgedPrefix.length + 8}) == '${unjudgedPrefix}restart:' or ${value}:sub(1, ${unjudgedPrefix.length + 9}) == '${unjudgedPrefix}replaced:'))`;
}
/** Lua: the server's time now in whole ms (the script's clock, node/lua-script.ts), as the local `nowMs`. */
export const nowMsLua = "local nowMs = clockMs()";

/**
 * Lua expression: the longest maxTtlMs among the records of the sorted set
 * `key` (a Lua expression) that have not lapsed at `nowMs` (0 for none).
 */
export function longestRecordLua(key: string): string {
  return `(function()
  local longest = 0
  for _, member in ipairs(redis.call('zrangebyscore', ${key}, '(' .. nowMs, '+inf')) do
    longest = math.max(longest, tonumber(member) or 0)
  end
  return longest
end)()`;
}

/**
 * The lock, extend and fence scripts' quarantine argument (ARGV[3]): "1",
 * or "-1" for a client with the quarantine off, which waits none out but
 * still starts one (checkQuarantine below). How long a quarantine lasts
 * is judged from the nodes (lock/quarantine-judge.ts), not passed in.
 */
export function quarantineArgOf(quarantine: boolean): string {
  return quarantine ? "1" : "-1";
}

/** How long an unjudged quarantine lives if no client judges it: the longest TTL a lock may have. */
export const unjudgedLifetimeMs = 2 ** 31 - 1;

/** Every key redquorum keeps for itself starts with this; no lock or ID key may. */
export const internalKeyPrefix = "redquorum:";

/** The reply of a script that started with the quarantine check and found the node in quarantine. */
export const quarantineReply = {
  /** {quarantined, marker}: the node is in the restart quarantine. */
  quarantined: -1,
} as const;

/**
 * Lua: `checkQuarantine(marker, quarantined, quarantineArg)`, given the
 * marker and quarantine keys' values (read by the caller's MGET with what
 * else it needs), returns the node's marker and, while the node is in
 * quarantine, the reply to give instead of a vote ({quarantined, marker,
 * the quarantine's value}; else nil). quarantineArg is negative for a
 * client with the quarantine off, which never waits one out but still
 * starts one for the clients that do: otherwise its marker rewrite (below)
 * would hide the loss from them, and a second client could take a lock
 * the node forgot.
 *
 * A marker found missing is rewritten as "lost:<server time>": the node
 * keeps in mind that it lost its memory (so its fencing counters are
 * unknown until a repair writes the floor), and the value names this loss
 * for repairs. init writes "1". The quarantine starts unjudged: how long
 * it lasts is the cluster's longest maxTtlMs, read from the other nodes
 * (lock/quarantine-judge.ts), from the loss on. A node without a marker
 * that has been up for at least that long and was never flushed has
 * outlived every lock it could have forgotten: the judgement ends its
 * quarantine (its fencing counters are still unknown: "lost:" sends them
 * to repair, or to init() on a cluster redquorum never used).
 */
export const quarantineCheck = `
local function checkQuarantine(marker, quarantined, quarantineArg)
  local waits = tonumber(quarantineArg) > 0
  if quarantined then
    if waits then return marker, {${quarantineReply.quarantined}, marker or '', quarantined} end
    return marker, nil
  end
  if not marker then
    local now = redis.call('time')
    marker = 'lost:' .. now[1] .. '.' .. now[2]
    redis.call('set', '${markerKey}', marker)
    -- With the marker, the memory it was written on (a flush took the one
    -- recorded): a copy of the node taken from now on carries it, so its
    -- restore is seen (lock/quarantine-scripts.ts, certifyScript; memory-check.ts).
    -- Its count of data-replacing commands (server-identity.ts) says
    -- whether the server was flushed since it started.
    local identity = ${serverIdentityLua}
    redis.call('set', '${runKey}', identity)
    local flushed = ${replacedSinceStartLua("identity")}
    local kind = flushed and ${unjudgedLua("flushed")} or ${unjudgedLua("start")}
    redis.call('set', '${quarantineKey}', kind, 'PX', ${unjudgedLifetimeMs})
    if waits then return marker, {${quarantineReply.quarantined}, marker, kind} end
  end
  return marker, nil
end`;

/** What identifies the server's memory now (server-identity.ts): a restart or a flush changes it. */
const serverState = `
local function serverState()
  return ${serverIdentityLua}
end`;

/**
 * Lua that marks a node in service: the marker (Lua expression `marker`)
 * "1", and the run key (`run`) the server's memory identity, as certified now
 * (lock/quarantine-scripts.ts, certifyScript: a node marked without it could not tell
 * a later restart from its first check). What init, LocalCluster and the
 * tests' setup write.
 */
export function markNodeLua(marker: string, run: string): string {
  return `redis.call('set', ${marker}, '1')
redis.call('set', ${run}, ${serverIdentityLua})`;
}

/** What init found on a node (first element of the init script's reply). */
export const initState = {
  /**
   * Marker "1", or a repaired floor: in service for locks and fences. Or
   * it served before a restart (marker "restarted:", or the quarantine a
   * restart started, "restart": lock/quarantine-scripts.ts, certifyScript), so the
   * cluster is in use, and init leaves its quarantine and fencing repair
   * alone (marking a whole cluster that restarted from snapshots "1" would
   * lift a quarantine that keeps a second client out of a lock still
   * held).
   */
  healthy: 2,
  /**
   * Its marker says it lost its memory ("lost:"), it is not repaired and
   * not in quarantine: it serves locks (it served its quarantine, and with
   * fencing off nothing repairs it; or it had been up longer than any lock
   * when its loss was met).
   */
  servesLocks: 3,
  /** In quarantine (a loss was met), not repaired: out of service for locks. */
  quarantined: 4,
  /** No marker and no quarantine: a new node, or one that lost its memory and no client met it since. */
  unmarked: 1,
  /** The node restarted or was flushed between init's check and its write. */
  changed: 0,
} as const;

/**
 * init on one node: KEYS[1] marker, KEYS[2] quarantine, KEYS[3] fence
 * floor, KEYS[4] the certified run_id (runKey). ARGV[1] "check": answers
 * {state, marker, server state, the quarantine's value or ""}. ARGV[1]
 * "write", ARGV[2] the server state the check saw, ARGV[3] "keep" or
 * "lift": a node that is not healthy is marked "1" — what init does only
 * on a cluster none of whose nodes is healthy (lock/init.ts says when).
 * With "keep" a node in quarantine is left to it (answers {quarantined});
 * with "lift" (the caller says the nodes are new) its quarantine is
 * lifted. If the server restarted or was flushed since the check, nothing
 * is written: {changed}.
 */
export const initNodeScript = new LuaScript(
  "init-node",
  `${serverState}
local marker = redis.call('get', KEYS[1])
local quarantine = redis.call('get', KEYS[2])
local restarted = ${isRestartedLua("marker")} or quarantine == 'restart' or ${isUnjudgedRestartLua("quarantine")}
if marker == '1' or restarted or redis.call('exists', KEYS[3]) == 1 then return {${initState.healthy}, marker or '', '', quarantine or ''} end
local state = quarantine and ${initState.quarantined} or (marker and ${initState.servesLocks} or ${initState.unmarked})
if ARGV[1] == 'check' then return {state, marker or '', serverState(), quarantine or ''} end
if serverState() ~= ARGV[2] then return {${initState.changed}} end
if quarantine and ARGV[3] ~= 'lift' then return {state, marker or ''} end
${markNodeLua("KEYS[1]", "KEYS[4]")}
redis.call('del', KEYS[2])
return {${initState.healthy}, '1'}`,
);
