import { LuaScript } from "./lua-script.js";

/**
 * Lock scripts. ARGV[1] is the lock's random value. Each script handles
 * every key of a multi-resource lock in one atomic call, so a node grants
 * all or none. Interoperable with node-redlock and redsync: the key is the
 * resource name and the value a plain string, so their locks and ours
 * exclude each other.
 *
 * Acquire and extend also enforce the restart quarantine (seed 1, "delayed
 * restart"): KEYS[1] is the node's marker, KEYS[2] its quarantine key (the
 * resources follow from KEYS[3] in extend, from KEYS[5] in acquire and
 * fence, after the fencing floor and maximum). A node whose marker is gone lost its memory
 * (restart without persistence, FLUSHALL): it may have forgotten keys of
 * locks that are still held, so it stays out of service (answers {-1, marker}) until a
 * quarantine of ARGV[3] ms (the cluster's maxTtlMs, longer than any lock)
 * has passed. ARGV[3] = "0" turns the quarantine off for this client (the
 * marker is still kept, and a quarantine another client started is still
 * honoured). Every client sees the same server-side quarantine.
 */

export const markerKey = "redquorum:marker";
export const quarantineKey = "redquorum:quarantine";
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
/** Every key redquorum keeps for itself starts with this; no lock or ID key may. */
export const internalKeyPrefix = "redquorum:";

/** Reply codes of the lock scripts that are not votes. */
export const lockReply = {
  /** {-1, marker}: the node is in the restart quarantine. */
  quarantined: -1,
  /** {-2, marker}: the node lost its memory and its fencing counters are not repaired yet. */
  fencesUnknown: -2,
} as const;

// A marker found missing is rewritten as "lost:<server time>": the node keeps
// in mind that it lost its memory (so its fencing counters are unknown until
// a repair writes the floor), and the value names this loss for repairs.
// init writes "1". Both non-vote replies carry the marker.
//
// A node without a marker that has been up for at least maxTtlMs and was
// never flushed has outlived every lock it could have forgotten: it needs
// no quarantine (its fencing counters are still unknown: "lost:" sends
// them to repair, or to init() on a cluster redquorum never used).
/**
 * How many times the server was flushed (FLUSHALL, FLUSHDB, SWAPDB) since
 * it started or since the last CONFIG RESETSTAT, from INFO commandstats.
 */
const flushCount = `
local function flushCount()
  local stats = redis.call('info', 'commandstats')
  local flushes = 0
  for _, name in ipairs({'flushall', 'flushdb', 'swapdb'}) do
    flushes = flushes + (tonumber(string.match(stats, 'cmdstat_' .. name .. ':calls=(%d+)')) or 0)
  end
  return flushes
end`;

const quarantineCheck = `${flushCount}
local guard = redis.call('mget', KEYS[1], KEYS[2])
local marker = guard[1]
if guard[2] then return {${lockReply.quarantined}, marker or ''} end
if not marker then
  local now = redis.call('time')
  marker = 'lost:' .. now[1] .. '.' .. now[2]
  redis.call('set', KEYS[1], marker)
  if ARGV[3] ~= '0' then
    local uptime = tonumber(string.match(redis.call('info', 'server'), 'uptime_in_seconds:(%d+)')) or 0
    if flushCount() > 0 or uptime * 1000 < tonumber(ARGV[3]) then
      redis.call('set', KEYS[2], '1', 'PX', ARGV[3])
      return {${lockReply.quarantined}, marker}
    end
  end
end`;

/** Decimal strings without leading zeros: shorter is less, then bytewise. */
const less = `
local function less(a, b)
  return #a < #b or (#a == #b and a < b)
end`;

/**
 * Fencing counters, one per resource. KEYS[3] the node's fence floor,
 * KEYS[4] its highest accepted value, the lock keys from KEYS[5], then the
 * counters, with the proposals ARGV[4 + i] (ARGV[4] = how many).
 *
 * A counter's value here is max(counter or 0, floor). A node that lost its
 * memory (marker not "1") and has no floor yet knows none of its counters:
 * it does not vote ({-2, marker}) until a repair sets the floor to the
 * highest value a set of other nodes that meets every majority has accepted
 * — then it is healthy for every resource, also ones first locked later.
 * \`applyFences()\` raises each counter below its proposal. Reply: {1,
 * current_1, accepted_1, ...}, where current is the value before (accepted
 * 1) or the value that refused the proposal (accepted 0).
 */
const fences = `${less}
local fenceCount = tonumber(ARGV[4])
local lockCount = #KEYS - 4 - fenceCount
local fenceReply = {1}
local function readFences()
  if fenceCount == 0 then return nil end
  local floor = redis.call('get', KEYS[3])
  if not floor then
    if marker ~= '1' then return {${lockReply.fencesUnknown}, marker} end
    floor = '0'
  end
  for i = 1, fenceCount do
    local current = redis.call('get', KEYS[4 + lockCount + i]) or '0'
    if less(current, floor) then current = floor end
    fenceReply[2 * i] = current
    fenceReply[2 * i + 1] = less(current, ARGV[4 + i]) and 1 or 0
  end
  return nil
end
local function applyFences()
  local highest = redis.call('get', KEYS[4]) or '0'
  local raised = false
  for i = 1, fenceCount do
    -- Only ever raises: read again, in case two names share one counter.
    local now = redis.call('get', KEYS[4 + lockCount + i]) or '0'
    if fenceReply[2 * i + 1] == 1 and less(now, ARGV[4 + i]) then
      redis.call('set', KEYS[4 + lockCount + i], ARGV[4 + i])
      if less(highest, ARGV[4 + i]) then
        highest = ARGV[4 + i]
        raised = true
      end
    end
  end
  if raised then redis.call('set', KEYS[4], highest) end
end`;

/**
 * ARGV[2] = TTL in ms. 1 (or, with fences, {1, ...}): every key was free and
 * is now ours; 0: a key exists; {-1, marker}: quarantined; {-2, marker}:
 * the fencing counters are unknown here. A fencing counter only moves
 * together with our lock key on the same node — what keeps tokens in grant
 * order.
 *
 * Handoff: ARGV[5 + fences], when given, is the value of a lock whose holder
 * hands it to us; keys holding exactly that value count as free and are
 * overwritten. 2 instead of 1 (also as the first element with fences) says
 * every key held that value: the releasing lock was still held here.
 */
export const acquireScript = new LuaScript(
  "acquire",
  `${quarantineCheck}
${fences}
local from = ARGV[5 + fenceCount]
local replaced = 0
-- One resource, free: SET NX takes it in one call (undone below if the
-- fencing counters turn out unknown). Otherwise check every key first.
local placed = lockCount == 1 and redis.call('set', KEYS[5], ARGV[1], 'NX', 'PX', ARGV[2])
if not placed then
  for i = 5, 4 + lockCount do
    if redis.call('exists', KEYS[i]) == 1 then
      if not from or redis.pcall('get', KEYS[i]) ~= from then return 0 end
      replaced = replaced + 1
    end
  end
end
local unknown = readFences()
if unknown then
  if placed then redis.call('del', KEYS[5]) end
  return unknown
end
if not placed then
  for i = 5, 4 + lockCount do
    redis.call('set', KEYS[i], ARGV[1], 'PX', ARGV[2])
  end
end
local granted = replaced == lockCount and 2 or 1
if fenceCount == 0 then return granted end
applyFences()
fenceReply[1] = granted
return fenceReply`,
);

/**
 * The fencing round after an acquire whose proposals were stale: raises the
 * counters only on nodes where every lock key still holds our value (0
 * otherwise), so, as in the acquire, a counter moves only under our lock.
 */
export const fenceScript = new LuaScript(
  "fence",
  `${quarantineCheck}
${fences}
for i = 5, 4 + lockCount do
  if redis.call('get', KEYS[i]) ~= ARGV[1] then return 0 end
end
local unknown = readFences()
if unknown then return unknown end
applyFences()
return fenceReply`,
);

/**
 * What a repair of another node reads here: KEYS[1] marker, KEYS[2] fence
 * floor, KEYS[3] highest accepted value. {1, highest, floor}, or {-2} when
 * this node's own counters are unknown (it lost its memory, not repaired).
 */
export const fenceMaxReadScript = new LuaScript(
  "fence-max-read",
  `local floor = redis.call('get', KEYS[2])
local marker = redis.call('get', KEYS[1])
if not floor and marker ~= '1' and not (marker and marker:sub(1, 10) == 'restarted:') then
  return {${lockReply.fencesUnknown}}
end
return {1, redis.call('get', KEYS[3]) or '0', floor or '0'}`,
);

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

/**
 * Repairs the fencing state of a node that lost its memory: KEYS[1]
 * marker, KEYS[2] floor, KEYS[3] highest accepted value; ARGV[1] the marker
 * value the loss was seen with, ARGV[2] the highest value read from the
 * other nodes. Applies only while that same loss is current and no floor is
 * set yet: 1, else 0.
 */
export const fenceRepairScript = new LuaScript(
  "fence-repair",
  `${less}
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('exists', KEYS[2]) == 1 then return 0 end
redis.call('set', KEYS[2], ARGV[2])
local highest = redis.call('get', KEYS[3])
if not highest or less(highest, ARGV[2]) then redis.call('set', KEYS[3], ARGV[2]) end
return 1`,
);

/**
 * KEYS: the resources. Deletes only the keys that still hold our value;
 * returns how many it deleted. With ARGV[2] (a tag), announces each deleted
 * key on \`redquorum:released:<key>\` for waiters in other processes, and
 * returns {deleted, most subscribers any announcement reached}; the
 * clean-up of a failed attempt passes none (nothing was granted to release).
 */
export const releaseScript = new LuaScript(
  "release",
  `local deleted = 0
local heard = 0
for i = 1, #KEYS do
  if redis.call('get', KEYS[i]) == ARGV[1] then
    redis.call('del', KEYS[i])
    deleted = deleted + 1
    if ARGV[2] then
      heard = math.max(heard, redis.call('publish', 'redquorum:released:' .. KEYS[i], ARGV[2]))
    end
  end
end
if ARGV[2] then return {deleted, heard} end
return deleted`,
);

/**
 * ARGV[2] = new TTL in ms. Sets the TTL of every key only if every key still
 * holds our value (1), else changes nothing (0); {-1, marker}: quarantined. PEXPIRE
 * never creates a key, so an expired lock is never brought back.
 */
export const extendScript = new LuaScript(
  "extend",
  `${quarantineCheck}
for i = 3, #KEYS do
  if redis.call('get', KEYS[i]) ~= ARGV[1] then return 0 end
end
for i = 3, #KEYS do
  redis.call('pexpire', KEYS[i], ARGV[2])
end
return 1`,
);

/**
 * What identifies the server's memory now: its run_id and how many times
 * it was flushed (FLUSHALL, FLUSHDB, SWAPDB since its start or the last
 * CONFIG RESETSTAT). A restart changes the first, a flush the second.
 */
const serverState = `${flushCount}
local function serverState()
  local runId = string.match(redis.call('info', 'server'), 'run_id:(%w+)') or ''
  return runId .. '/' .. flushCount()
end`;

/** What init found on a node (first element of the init script's reply). */
export const initState = {
  /** Marker "1", or a repaired floor: in service for locks and fences. */
  healthy: 2,
  /** No marker, or one that says it lost its memory and is not repaired. */
  unmarked: 1,
  /** The node restarted or was flushed between init's check and its write. */
  changed: 0,
} as const;

/**
 * init on one node: KEYS[1] marker, KEYS[2] quarantine, KEYS[3] fence
 * floor. ARGV[1] "check": answers {state, marker, server state}. ARGV[1]
 * "write", ARGV[2] the server state the check saw: a node that is not
 * healthy is marked "1" (its quarantine lifted) — what init does only on a
 * cluster none of whose nodes is healthy, i.e. that redquorum never used
 * (or that lost its memory everywhere at once). If the server restarted or
 * was flushed since the check, nothing is written: {0}.
 */
export const initNodeScript = new LuaScript(
  "init-node",
  `${serverState}
local marker = redis.call('get', KEYS[1])
if marker == '1' or redis.call('exists', KEYS[3]) == 1 then return {${initState.healthy}, marker or ''} end
if ARGV[1] == 'check' then return {${initState.unmarked}, marker or '', serverState()} end
if serverState() ~= ARGV[2] then return {${initState.changed}} end
redis.call('set', KEYS[1], '1')
redis.call('del', KEYS[2])
return {${initState.healthy}, '1'}`,
);
