/**
 * The extend script: a new TTL for every key of a lock that still holds
 * our value, after the restart quarantine (node/node-state.ts).
 */

import { LuaScript } from "../node/lua-script.js";
import { markerKey, quarantineCheck, quarantineKey } from "../node/node-state.js";

export const extendReply = {
  /** Every key still held our value and has the new TTL. */
  extended: 1,
  /** Some key no longer holds our value: nothing changed. */
  notHeld: 0,
} as const;

/**
 * KEYS the lock keys; ARGV[2] = new TTL in ms. Sets the TTL of every
 * key only if every key still holds our value, else changes nothing;
 * {quarantined, marker}. PEXPIRE never creates a key, so an expired lock
 * is never brought back.
 */
export const extendScript = new LuaScript(
  "extend",
  `${quarantineCheck}
local guard = redis.call('mget', '${markerKey}', '${quarantineKey}')
local _, refusal = checkQuarantine(guard[1], guard[2], ARGV[3])
if refusal then return refusal end
for i = 1, #KEYS do
  if redis.call('get', KEYS[i]) ~= ARGV[1] then return ${extendReply.notHeld} end
end
for i = 1, #KEYS do
  redis.call('pexpire', KEYS[i], ARGV[2])
end
return ${extendReply.extended}`,
  { checksMembership: true },
);

export function extendArgs(value: string, ttl: number, quarantineArg: string): string[] {
  return [value, String(ttl), quarantineArg];
}

export const isExtended = (reply: unknown) => reply === extendReply.extended;
