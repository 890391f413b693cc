/**
 * The lock scripts (acquire, extend, release), their reply codes, and the
 * one function that runs a lock or fencing script and reads what a node
 * answers. ARGV[1] is the lock's random value. Each script handles every
 * key of a multi-resource lock in one atomic call, so a node grants all or
 * none. Interoperable with node-redlock and redsync: the key is the
 * resource name and the value a plain string, so their locks and ours
 * exclude each other.
 *
 * Acquire and extend start with the restart quarantine (see
 * node/node-state.ts), acquire also with the fencing counters (see
 * fencing/scripts.ts): KEYS[1] is the node's marker, KEYS[2] its quarantine
 * key, ARGV[3] the quarantine in ms ("0": off for this client).
 */

import { parseCounter } from "../decimal.js";
import { NodeError } from "../errors.js";
import {
  fencedScriptArgs,
  fencedScriptKeys,
  fencedScriptPrelude,
  fenceReply,
} from "../fencing/scripts.js";
import { LuaScript } from "../node/lua-script.js";
import { markerKey, quarantineCheck, quarantineKey, quarantineReply } from "../node/node-state.js";
import type { RedisNode } from "../node/redis-node.js";
import type { Observer } from "../observe.js";

/** The acquire's code: the reply itself, or with fences its first element. */
export const acquireReply = {
  /** A key exists (held by someone else). */
  refused: 0,
  /** Every key was free and is now ours. */
  granted: 1,
  /** Granted, and every key held the value of the lock handed to us (see handoff.ts). */
  replaced: 2,
} as const;

/**
 * Acquire, fenced layout (see fencedScriptKeys): ARGV[2] = TTL in ms.
 * granted (or, with fences, {granted, current_1, accepted_1, ...}): every
 * key was free and is now ours; refused: a key exists; {quarantined,
 * marker}; {unknown, marker}: the fencing counters are unknown here. A
 * fencing counter only moves together with our lock key on the same node —
 * what keeps tokens in grant order.
 *
 * Handoff: the argument after the proposals, when given, is the value of a
 * lock whose holder hands it to us; keys holding exactly that value count
 * as free and are overwritten. replaced instead of granted (also as the
 * first element with fences) says every key held that value: the releasing
 * lock was still held here.
 */
export const acquireScript = new LuaScript(
  "acquire",
  `${fencedScriptPrelude}
local marker, refusal = checkQuarantine(KEYS[1], KEYS[2], ARGV[3])
if refusal then return refusal end
local locks, counters, proposals = fencedLayout()
local from = ARGV[5 + #counters]
local replaced = 0
-- One resource, free: SET NX takes it in one call (undone below if the
-- fencing counters turn out unknown). Otherwise check every key first.
local placed = #locks == 1 and redis.call('set', locks[1], ARGV[1], 'NX', 'PX', ARGV[2])
if not placed then
  for _, key in ipairs(locks) do
    if redis.call('exists', key) == 1 then
      if not from or redis.pcall('get', key) ~= from then return ${acquireReply.refused} end
      replaced = replaced + 1
    end
  end
end
local reply, unknown = readFences(marker, KEYS[3], counters, proposals)
if unknown then
  if placed then redis.call('del', locks[1]) end
  return unknown
end
if not placed then
  for _, key in ipairs(locks) do
    redis.call('set', key, ARGV[1], 'PX', ARGV[2])
  end
end
local granted = replaced == #locks and ${acquireReply.replaced} or ${acquireReply.granted}
if #counters == 0 then return granted end
applyFences(KEYS[4], counters, proposals, reply)
reply[1] = granted
return reply`,
);

export function acquireKeys(lockKeys: readonly string[], counterKeys: readonly string[]): string[] {
  return fencedScriptKeys(lockKeys, counterKeys);
}

export function acquireArgs(
  value: string,
  ttl: number,
  quarantineArg: string,
  proposals: readonly bigint[],
  fromValue: string | undefined,
): string[] {
  const args = fencedScriptArgs(value, String(ttl), quarantineArg, proposals);
  if (fromValue !== undefined) args.push(fromValue);
  return args;
}

/** Whether an acquire reply grants the lock; `fenced`: the acquire carried counters. */
export function isGrantedBy(fenced: boolean): (reply: unknown) => boolean {
  return fenced ? isFencedGrant : isPlainGrant;
}

const isGrantCode = (code: unknown) =>
  code === acquireReply.granted || code === acquireReply.replaced;
const isPlainGrant = (reply: unknown) => isGrantCode(reply);
const isFencedGrant = (reply: unknown) => Array.isArray(reply) && isGrantCode(reply[0]);

/** Whether an acquire reply says the keys held the value of the lock handed to us. */
export function replacedHandedOff(reply: unknown): boolean {
  return (
    reply === acquireReply.replaced || (Array.isArray(reply) && reply[0] === acquireReply.replaced)
  );
}

export const extendReply = {
  /** Every key still held our value and has the new TTL. */
  extended: 1,
  /** Some key no longer holds our value: nothing changed. */
  notHeld: 0,
} as const;

/**
 * KEYS[3...] the lock keys; ARGV[2] = new TTL in ms. Sets the TTL of every
 * key only if every key still holds our value, else changes nothing;
 * {quarantined, marker}. PEXPIRE never creates a key, so an expired lock
 * is never brought back.
 */
export const extendScript = new LuaScript(
  "extend",
  `${quarantineCheck}
local _, refusal = checkQuarantine(KEYS[1], KEYS[2], ARGV[3])
if refusal then return refusal end
for i = 3, #KEYS do
  if redis.call('get', KEYS[i]) ~= ARGV[1] then return ${extendReply.notHeld} end
end
for i = 3, #KEYS do
  redis.call('pexpire', KEYS[i], ARGV[2])
end
return ${extendReply.extended}`,
);

export function extendKeys(lockKeys: readonly string[]): string[] {
  return [markerKey, quarantineKey, ...lockKeys];
}

export function extendArgs(value: string, ttl: number, quarantineArg: string): string[] {
  return [value, String(ttl), quarantineArg];
}

export const isExtended = (reply: unknown) => reply === extendReply.extended;

/**
 * KEYS: the resources. Deletes only the keys that still hold our value;
 * returns how many it deleted. With ARGV[2] (a tag), announces each deleted
 * key on `redquorum:released:<key>` (release-watch.ts) for waiters in other
 * processes, and returns {deleted, most subscribers any announcement
 * reached}; the clean-up of a failed attempt passes none (nothing was
 * granted to release).
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

/** How many keys a release deleted. */
export function releasedCount(reply: unknown): unknown {
  return Array.isArray(reply) ? reply[0] : reply;
}

/** Whether a release's announcement reached more subscribers than `own` (false without a tag). */
export function heardByMoreThan(reply: unknown, own: number): boolean {
  return Array.isArray(reply) && reply[1] > own;
}

/** Runs a lock or fencing script on node `index` and reads its reply. */
export type ScriptRunner = (
  node: RedisNode,
  index: number,
  script: LuaScript,
  keys: readonly string[],
  args: readonly string[],
) => Promise<unknown>;

export interface ScriptGuard {
  readonly observer: Observer;
  readonly maxTtlMs: number;
  /** Told of a node that may have lost its memory (`marker` names the loss): fencing repairs it. */
  onMemoryLoss(index: number, marker: string): void;
}

/**
 * A runner for the lock and fencing scripts. A node in quarantine
 * ({quarantined, marker}), or whose fencing counters are unknown ({unknown,
 * marker}: it lost its memory), is a failed vote that says so, and the
 * guard is told of the loss. A reply that is not what the scripts answer (a
 * counter that is not a decimal) is that node's error too: nothing a node
 * says escapes untyped.
 */
export function guardedRunner(guard: ScriptGuard): ScriptRunner {
  return (node, index, script, keys, args) =>
    node.evalScript(script, keys, args).then((reply) => checkedReply(guard, node, index, reply));
}

function checkedReply(guard: ScriptGuard, node: RedisNode, index: number, reply: unknown) {
  if (!Array.isArray(reply)) return reply;
  const [code, marker] = reply as [unknown, unknown];
  if (code === fenceReply.unknown) {
    guard.observer.node(
      node.endpoint,
      "needs repair",
      `fencing counters unknown (marker ${String(marker)})`,
    );
    guard.onMemoryLoss(index, String(marker));
    throw new NodeError(
      node.endpoint,
      new Error(
        "fencing counters unknown: the node lost its memory, and a repair from the other nodes " +
          "is scheduled (if these are new nodes redquorum never used, call redlock.init() once)",
      ),
    );
  }
  if (code === quarantineReply.quarantined) {
    guard.observer.node(node.endpoint, "quarantined", "it may have lost its memory");
    guard.onMemoryLoss(index, String(marker));
    throw new NodeError(
      node.endpoint,
      new Error(
        "quarantined: it has no redquorum marker, so it may have restarted without its data " +
          `(or been flushed), and stays out of service for up to maxTtlMs (${guard.maxTtlMs} ms); ` +
          "if these are new nodes redquorum never used, call redlock.init() once",
      ),
    );
  }
  if (code === fenceReply.counted || isGrantCode(code)) {
    // {code, current_1, accepted_1, ...}: every current value is a counter.
    try {
      for (let i = 1; i < reply.length; i += 2) parseCounter(reply[i]);
    } catch (error) {
      throw new NodeError(node.endpoint, error);
    }
  }
  return reply;
}
