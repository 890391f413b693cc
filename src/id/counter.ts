/**
 * The ID counter's protocol on one node: its Lua scripts, the
 * status codes they answer (named here, used by name everywhere), and the
 * decoding of a node's answer.
 *
 * KEYS[1] is the counter, KEYS[2] its marker (written by init and by
 * repair, lost together with the counter when a node restarts empty or is
 * flushed), KEYS[3] the loss token: written once when a proposal finds the
 * counter or marker gone, and required by the repair, so a repair meant for
 * one loss can never apply to a later one. KEYS[4] the run_id of the
 * server the counter was certified on (certifyScript), recorded by every
 * script that writes the marker: a marked counter without it could not
 * tell a later restart from older data (a snapshot taken then) from its
 * first check. Values are non-negative decimal
 * strings without leading zeros, compared by length then bytes, so they are
 * exact up to 2^63 - 1 (Lua numbers are doubles and would round above 2^53).
 */
import { luaDecimalLess, parseCounter } from "../decimal.js";
import { NodeError } from "../errors.js";
import { LuaScript } from "../node/lua-script.js";
import { aliveKey, identityCacheLua, memoryCheckLua } from "../node/memory-check.js";
import type { RedisNode } from "../node/redis-node.js";
import { sameMemoryLua, serverIdentityLua } from "../node/server-identity.js";
import type { CounterKeys } from "./keys.js";

/** The first element of a counter script's reply. */
export const counterStatus = {
  /** `{refused, current}`: the counter is already >= the proposal. */
  refused: 0,
  /** `{accepted, previous}`: the counter was below and is now the proposal (a read: `{accepted, value}`). */
  accepted: 1,
  /** `{amnesia, token}`: the marker is gone: the node lost its data. */
  amnesia: 2,
  /** `{missing, token}`: marker present, counter missing (deleted, or init never reached it). */
  missing: 3,
  /**
   * `{suspect, token}`: the node restarted (a new run_id, see certifyScript):
   * its counter may be older than what it acknowledged.
   */
  suspect: 4,
} as const;

export type CounterStatus = (typeof counterStatus)[keyof typeof counterStatus];

/** The reply of repairScript (a bare integer). */
export const repairReply = { notApplied: 0, applied: 1 } as const;

/** The reply of certifyScript (a bare integer). */
export const certifyReply = { unchanged: 0, madeSuspect: 1 } as const;

/** The marker's value while the node holds its counter ("suspect" after a restart). */
export const markerHeld = "1";

const { refused, accepted, amnesia, missing, suspect } = counterStatus;

const lossToken = `
local function lost(status)
  local token = redis.call('get', KEYS[3])
  if not token then
    local now = redis.call('time')
    token = now[1] .. '.' .. now[2]
    redis.call('set', KEYS[3], token)
  end
  return {status, token}
end`;

/**
 * Lua: `counterMemory()` compares the memory the counter was recorded on
 * (KEYS[4]) with the node's now (node/memory-check.ts, checkMemory): a
 * counter held on another memory (the server restarted, or a copy was
 * restored in place) may be older than what the node acknowledged, and
 * its marker becomes "suspect", as the certify makes it. Answers the
 * marker as it is then.
 */
const counterMemory = `${memoryCheckLua}
local function counterMemory()
  -- One MGET for the memory identity's cache and the counter's marker and
  -- memory: checkMemory writes only the node's lock state, never these.
  local got = redis.call('mget', '${aliveKey}', KEYS[2], KEYS[4])
  local identity = checkMemory(got[1])
  local marker, run = got[2], got[3]
  if run and run ~= identity then
    if ${sameMemoryLua("run", "identity")} then
      redis.call('set', KEYS[4], identity)
    elseif marker == '${markerHeld}' then
      redis.call('set', KEYS[4], identity)
      redis.call('set', KEYS[2], 'suspect')
      marker = 'suspect'
    end
  end
  return marker
end`;

/** ARGV[1] = proposal; ARGV[2] = "1" to skip the marker check (test-only negative control). */
export const proposeScript = new LuaScript(
  "id-propose",
  `${luaDecimalLess}
${lossToken}
${counterMemory}
local skipMarker = ARGV[2] == '1'
if not skipMarker then
  local marker = counterMemory()
  if marker == 'suspect' then return lost(${suspect}) end
  if marker ~= '${markerHeld}' then return lost(${amnesia}) end
end
local current = redis.call('get', KEYS[1])
if not current then
  if not skipMarker then return lost(${missing}) end
  current = '0'
end
if less(current, ARGV[1]) then
  redis.call('set', KEYS[1], ARGV[1])
  return {${accepted}, current}
end
return {${refused}, current}`,
  { checksMembership: true },
);

/**
 * Reads the counter: {accepted, value, mayLag}, or {amnesia} / {missing}
 * (no token: a read leaves none). mayLag 1: the node restarted and is not
 * repaired yet (marker "suspect"): it kept its counter but may have come
 * back older (quorum/counter-repair.ts).
 */
export const readScript = new LuaScript(
  "id-read",
  `${counterMemory}
local marker = counterMemory()
if not marker then return {${amnesia}} end
local current = redis.call('get', KEYS[1])
if not current then return {${missing}} end
return {${accepted}, current, marker == 'suspect' and 1 or 0}`,
  { checksMembership: true },
);

/**
 * Repair, ARGV[1] = value, ARGV[2] = loss token: only while the node is
 * still in the loss that token names (marker gone or "suspect", or counter
 * gone, same token),
 * raises the counter to ARGV[1] (never lowers it), writes the marker and
 * clears the token, in one step: applied. Otherwise changes nothing: notApplied.
 */
export const repairScript = new LuaScript(
  "id-repair",
  `${luaDecimalLess}
local current = redis.call('get', KEYS[1])
if redis.call('get', KEYS[2]) == '${markerHeld}' and current then return ${repairReply.notApplied} end
if redis.call('get', KEYS[3]) ~= ARGV[2] then return ${repairReply.notApplied} end
if not current or less(current, ARGV[1]) then
  redis.call('set', KEYS[1], ARGV[1])
end
redis.call('set', KEYS[2], '${markerHeld}')
redis.call('set', KEYS[4], ${serverIdentityLua})
redis.call('del', KEYS[3])
return ${repairReply.applied}`,
);

/**
 * Init on one node: {accepted} when it set the counter to 0 (or found 0,
 * from an earlier partial init), {refused, current} when the counter holds
 * IDs already.
 */
export const initScript = new LuaScript(
  "id-init",
  `local current = redis.call('get', KEYS[1])
if current and current ~= '0' then return {${refused}, current} end
redis.call('set', KEYS[1], '0')
redis.call('set', KEYS[2], '${markerHeld}')
redis.call('set', KEYS[4], ${serverIdentityLua})
redis.call('del', KEYS[3])
return {${accepted}}`,
);

/**
 * Run whenever a client (re)checks a node: KEYS as counterKeys (ARGV[1],
 * the run_id the client read, is not needed: the script reads the memory
 * identity itself, node/server-identity.ts). A node restarted with its data
 * (another run_id), or whose data was replaced in place, may have come back
 * with an older counter and its marker intact (a restored backup or disk
 * snapshot, a replica promoted with lag): its marker becomes "suspect", so
 * it does not vote until repaired — raised to what other nodes hold, which
 * is always safe. init and every repair record the identity with the
 * marker, so a copy of the node taken at any time carries it. Reads still
 * answer its value (it may lag, it did not forget). madeSuspect or
 * unchanged.
 */
export const certifyScript = new LuaScript(
  "id-certify",
  `${identityCacheLua}
local identity = ${serverIdentityLua}
cacheIdentity(identity)
local run = redis.call('get', KEYS[4])
if run == identity then return ${certifyReply.unchanged} end
redis.call('set', KEYS[4], identity)
if run and ${sameMemoryLua("run", "identity")} then return ${certifyReply.unchanged} end
if run and redis.call('get', KEYS[2]) == '${markerHeld}' then
  redis.call('set', KEYS[2], 'suspect')
  return ${certifyReply.madeSuspect}
end
return ${certifyReply.unchanged}`,
);

/** Every counter script, loaded on first contact with a node. */
export const counterScripts: readonly LuaScript[] = [
  proposeScript,
  readScript,
  repairScript,
  initScript,
];

// ---- a node's answer ------------------------------------------------------

/** A node's answer to a counter script: [status, value or loss token]. */
/** {status, value or loss token?, mayLag? (reads of a suspect node: 1)}. */
export type CounterReply = readonly [CounterStatus, string?, number?];

/** A counter that a node no longer holds (or may hold older): the status, and the loss token. */
export interface CounterLoss {
  readonly status: CounterStatus;
  readonly token: string;
}

/**
 * A counter script's reply, checked: anything else (a corrupted value, a key
 * of the wrong type answered by an old script) is that node's error, not a
 * crash of the round.
 */
export function checkedReply(node: RedisNode, reply: unknown): CounterReply {
  if (!Array.isArray(reply) || typeof reply[0] !== "number") {
    throw new NodeError(node.endpoint, new Error(`unexpected reply ${JSON.stringify(reply)}`));
  }
  const [status, value] = reply as [number, unknown];
  if (status === accepted || status === refused) {
    try {
      parseCounter(value);
    } catch (error) {
      throw new NodeError(node.endpoint, error);
    }
  }
  return reply as unknown as CounterReply;
}

/** Runs a counter script on one node; the reply is checked (`checkedReply`). */
export function evalCounter(
  node: RedisNode,
  script: LuaScript,
  keys: CounterKeys,
  args: readonly string[],
): Promise<CounterReply> {
  return node.evalScript(script, keys, args).then((reply) => checkedReply(node, reply));
}

export const statusOf = (reply: unknown): number =>
  Array.isArray(reply) && typeof reply[0] === "number" ? reply[0] : -1;

export const isAccepted = (reply: unknown) => statusOf(reply) === accepted;

/** Statuses of a node that is excluded until repaired. */
export const needsRepair = (status: number) =>
  status === amnesia || status === missing || status === suspect;

/** Whether the node still holds a counter: it may lag (suspect), it did not forget. */
export const holdsCounter = (status: number) => !needsRepair(status) || status === suspect;

/** The counter value an accepted or refused reply carries (a checked reply). */
export function counterValueOf(reply: unknown): bigint {
  return parseCounter((reply as CounterReply)[1]);
}

/** Whether a read's node restarted and is not repaired yet: it may have come back older. */
export function readMayLag(reply: unknown): boolean {
  return (reply as CounterReply)[2] === 1;
}

/** The loss a reply reports, when it carries a token: only proposals leave one, reads answer without. */
export function lossOf(reply: CounterReply): CounterLoss | undefined {
  const [status, token] = reply;
  return needsRepair(status) && token !== undefined ? { status, token: String(token) } : undefined;
}

/** Why a node that needs repair does not vote, for its error. */
export function lossReason(status: number): string {
  if (status === amnesia) return "lost its data (marker gone); excluded until repaired";
  if (status === suspect) {
    return (
      "restarted (a new run_id), or its data was replaced in place, and may have come back older; " +
      "excluded until repaired"
    );
  }
  return "counter missing; excluded until repaired";
}
