/**
 * Seeing, in the scripts that vote, a node whose memory was replaced while
 * it ran (server-identity.ts): the identity is cached on the node, in a key
 * that never reaches the AOF or a replica, and recomputed when the cache is
 * missing or older than `memoryCheckIntervalMs`.
 *
 * Why that sees an in-place restore on the first vote after it: the
 * command that emptied the data set took the cache with it, and the replay
 * cannot bring it back from an AOF (the cache is written with replication
 * off, so no AOF holds it). A copy made from memory (an RDB snapshot, an
 * AOF rewrite) does hold it, with the time it was written; restored later
 * than `memoryCheckIntervalMs` after that time, the cache is stale at once.
 * Only a restore completed within that interval of its copy being taken
 * is seen later, when the interval has passed: the data it lost is younger
 * than the interval.
 *
 * What a vote script does on a replaced memory (`checkMemory`), for the
 * lock node's state: the same as the certify of a restart with data that
 * may be older (lock/quarantine-scripts.ts, certifyScript): the node is quarantined (always: the copy
 * restored is older whatever the node's persistence) and its fencing
 * counters are unknown until repaired. ID counters compare the identity
 * with their own record (id/counter.ts), each on its own key.
 */
import { limits } from "../limits.js";
import {
  isUnjudgedLua,
  markerKey,
  quarantineKey,
  restartedMarkerPrefix,
  runKey,
  unjudgedLifetimeMs,
  unjudgedPrefix,
} from "./node-state.js";
import { sameMemoryLua, sameServerLua, serverIdentityLua } from "./server-identity.js";

/** The cached identity: "<server time in ms when computed>|<identity>". Never replicated. */
export const aliveKey = "redquorum:alive";

/** The fencing floor (fencing/scripts.ts names it too; kept here so node/ needs nothing from fencing/). */
const fenceFloorKey = "redquorum:fence-floor";

/**
 * Lua: `identityOf(alive)`, given the cache's value as read (or false),
 * answers the identity it holds while fresh, else nil; `cacheIdentity(identity)`
 * writes it now, outside replication and the AOF. Small enough for the
 * acquire's fast path to define and call. The time is the script's
 * `clockMs()` (node/lua-script.ts, nodeClockLua): its start.
 */
export const identityCacheLua = `
local function identityOf(alive)
  if not alive then return nil end
  local at, identity = string.match(alive, '^(%d+)|(.*)$')
  local age = at and clockMs() - tonumber(at)
  if age and age >= 0 and age < ${limits.memoryCheckIntervalMs} then return identity end
  return nil
end
local function cacheIdentity(identity)
  redis.set_repl(redis.REPL_NONE)
  redis.call('set', '${aliveKey}', clockMs() .. '|' .. identity)
  redis.set_repl(redis.REPL_ALL)
end`;

/**
 * Lua: `recordMemory(recorded, identity, durable, kind)`: the lock node's
 * state once its memory is found to be `identity`, no longer the one
 * `recorded` (false for none) names: the run key records it; unless
 * `durable` (a restart of a node that keeps every write), the node enters
 * the quarantine unjudged, of `kind` ("restart": counted from the server's
 * start; "replaced": from now, when a replacement in place was found); a
 * node that was in service for fences ("1", or repaired) is marked
 * "restarted:<time>" and its floor goes, so its counters are unknown until
 * repaired. Answers 1 when it took the node out of fencing, else 0. A node
 * that never recorded a memory and has no marker is the plain lock scripts'
 * to judge (node-state.ts, checkQuarantine).
 */
export const recordMemoryLua = `
local function recordMemory(recorded, identity, durable, kind)
  redis.call('set', '${runKey}', identity)
  local marker = redis.call('get', '${markerKey}')
  if not recorded and not marker then return 0 end
  if not durable then
    local current = redis.call('get', '${quarantineKey}')
    -- A loss already waiting for its judgement covers this one (after a
    -- flush the run key went with the rest); a judged quarantine still
    -- running is kept as the judgement's floor.
    if not ${isUnjudgedLua("current")} then
      local nowMs = clockMs()
      local pttl = redis.call('pttl', '${quarantineKey}')
      local untilMs = pttl > 0 and nowMs + pttl or 0
      local value = '${unjudgedPrefix}' .. kind .. ':' .. string.format('%d', untilMs)
      if kind == 'replaced' then value = value .. ':' .. string.format('%d', nowMs) end
      redis.call('set', '${quarantineKey}', value, 'PX', ${unjudgedLifetimeMs})
    end
    -- A node checked before it was ever marked, back from data older than
    -- its first vote (which marks it): its loss is named as a vote names
    -- one ("lost:<server time>"), or no judgement could ever name it (the
    -- judge compares markers) and the quarantine would last for good.
    if not marker then
      local now = redis.call('time')
      marker = 'lost:' .. now[1] .. '.' .. now[2]
      redis.call('set', '${markerKey}', marker)
    end
  end
  if not recorded or not marker then return 0 end
  if marker == '1' or redis.call('exists', '${fenceFloorKey}') == 1 then
    local now = redis.call('time')
    redis.call('set', '${markerKey}', '${restartedMarkerPrefix}' .. now[1] .. '.' .. now[2])
    redis.call('del', '${fenceFloorKey}')
    return 1
  end
  return 0
end`;

/**
 * Lua, for every script that votes or answers a repair:
 * `checkMemory(alive, lockVote)` (the cache's value as the script's MGET
 * read it, or nil to read it here) answers the node's memory identity and
 * whether this call found it replaced in place and changed the lock node's
 * state (then what the script read before is stale: read again).
 *
 * A restart (another run_id) is left to the certify each lock client runs
 * after it reconnects, which knows whether the node keeps every write: an
 * ID client or a repair's read may meet the node first. But a lock client
 * certifies a node on a new connection before its votes count, so a lock
 * vote (`lockVote` true) that still meets another run_id comes over a
 * connection no certify ran on since the memory changed: a proxy that hid
 * a restart, a transport that cannot tell a new connection, or a memory
 * copied in from another server (REPLICAOF, then REPLICAOF NO ONE: the
 * copy brings that server's run key and counters). It is taken as a memory
 * replaced in place. Defines `identityOf`, `cacheIdentity` and
 * `recordMemory`.
 */
export const memoryCheckLua = `${identityCacheLua}
${recordMemoryLua}
local function checkMemory(alive, lockVote)
  if alive == nil then alive = redis.call('get', '${aliveKey}') end
  local identity = identityOf(alive)
  if identity then return identity, false end
  identity = ${serverIdentityLua}
  local changed = false
  local recorded = redis.call('get', '${runKey}')
  if recorded and recorded ~= identity and (lockVote or ${sameServerLua("recorded", "identity")}) then
    if ${sameMemoryLua("recorded", "identity")} then
      -- Recorded as a bare run_id (before the count was): the same memory.
      redis.call('set', '${runKey}', identity)
    else
      recordMemory(recorded, identity, false, 'replaced')
      changed = true
    end
  end
  cacheIdentity(identity)
  return identity, changed
end`;
