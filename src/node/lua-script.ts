import { createHash } from "node:crypto";
import { membershipCheckLua, membershipStampLua } from "../membership/check.js";

/**
 * ARGV[1] of a batch (see `LuaScript.batchable`). No call of a batchable
 * script starts with it: their first argument is a lock's random value.
 */
export const batchMarker = "redquorum:batch";

export interface LuaScriptOptions {
  readonly batches?: boolean;
  readonly checksMembership?: boolean;
  /**
   * With `checksMembership`: the script reads the node's stamp itself and
   * refuses the call (membership/check.ts, `membershipStampLua`), instead
   * of the GET put before it.
   */
  readonly readsStamp?: boolean;
}

/**
 * Lua, at the top of every script: `clockMs()`, the node's clock (TIME) in
 * whole ms, read once per call of the script and the same for every use
 * in it (a batch's entries included). Redis itself judges key expiry in a
 * script by the time it started; a script that reads the clock for the
 * memory cache's age, a registration's expiry and a reservation pays for
 * one TIME instead of one each. A script that never asks pays for one
 * closure.
 */
export const nodeClockLua = `local nodeClockMs
local function clockMs()
  if not nodeClockMs then
    local t = redis.call('time')
    nodeClockMs = t[1] * 1000 + math.floor(t[2] / 1000)
  end
  return nodeClockMs
end
`;

/** A Lua script with its SHA1 computed once, sent with EVALSHA and loaded with EVAL on NOSCRIPT. */
export class LuaScript {
  readonly name: string;
  readonly source: string;
  readonly sha1: string;
  /** Whether one call may carry several (see `LuaScript.batchable`). */
  readonly batches: boolean;
  /**
   * Whether the script votes: it then refuses a call whose membership
   * stamp (its last argument, added by RedisNode) differs from the node's
   * (membership/check.ts).
   */
  readonly checksMembership: boolean;

  constructor(name: string, source: string, options: LuaScriptOptions = {}) {
    const { batches = false, checksMembership = false, readsStamp = false } = options;
    this.name = name;
    const membership = readsStamp ? membershipStampLua : membershipCheckLua;
    this.source = `${nodeClockLua}${checksMembership ? membership : ""}${source}`;
    this.sha1 = createHash("sha1").update(this.source).digest("hex");
    this.batches = batches;
    this.checksMembership = checksMembership;
  }

  /**
   * A script that also runs as a batch: `body` (which reads KEYS and ARGV
   * as always) becomes a function of them, called once for a plain call,
   * or once per entry when ARGV is {batchMarker, entry count, then per
   * entry its key count, its argument count and its arguments} and KEYS
   * every entry's keys in order. The reply is then one reply per entry, in
   * order: an entry that fails (a Lua error, or an error reply) is an
   * error in its place and the others still run, as separate calls would
   * (what an entry wrote before it failed stays, as it would). `prelude`:
   * top-level definitions that read neither KEYS nor ARGV, made once per
   * call. Many callers' calls to one node in one tick then cost Redis and
   * the client one command instead of one each (redis-node.ts).
   */
  static batchable(
    name: string,
    prelude: string,
    body: string,
    options: { checksMembership?: boolean; readsStamp?: boolean } = {},
  ): LuaScript {
    const source = `${prelude}
local function run(KEYS, ARGV)
${body}
end
if ARGV[1] ~= '${batchMarker}' then return run(KEYS, ARGV) end
local replies, k, a = {}, 1, 3
for e = 1, tonumber(ARGV[2]) do
  local keyCount, argCount = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  local keys, args = {}, {}
  for i = 1, keyCount do keys[i] = KEYS[k + i - 1] end
  for i = 1, argCount do args[i] = ARGV[a + 1 + i] end
  k, a = k + keyCount, a + 2 + argCount
  local ok, reply = pcall(run, keys, args)
  if not ok then
    reply = type(reply) == 'table' and reply.err and reply or redis.error_reply(tostring(reply))
  end
  -- A nil would end the reply array there.
  if reply == nil then reply = false end
  replies[e] = reply
end
return replies`;
    return new LuaScript(name, source, { ...options, batches: true });
  }
}

/** The arguments of one batch call (see `LuaScript.batchable`): all entries' keys, then the batch layout. */
export function batchCall(
  entries: ReadonlyArray<{ readonly keys: readonly string[]; readonly args: readonly string[] }>,
): { keys: string[]; args: string[] } {
  const keys: string[] = [];
  const args = [batchMarker, String(entries.length)];
  for (const entry of entries) {
    keys.push(...entry.keys);
    args.push(String(entry.keys.length), String(entry.args.length), ...entry.args);
  }
  return { keys, args };
}

export function isNoScriptError(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith("NOSCRIPT");
}
