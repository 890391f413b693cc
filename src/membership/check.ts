/**
 * The membership check every vote script makes: the client's stamp against
 * the node's. Apart from membership/scripts.ts so that node/lua-script.ts,
 * which puts it in front of a script, needs nothing else of membership.
 */
import { stampKey } from "./record.js";

/** The error reply of a vote refused for its membership: "<prefix> <the node's stamp, or none>". */
export const membershipRefusalPrefix = "REDQUORUM_MEMBERSHIP";

/**
 * Lua put before a vote script's own source: the client's stamp ("<cluster
 * id>:<epoch>", or "" for a client that found no record) is the call's last
 * argument, taken off ARGV here so the script reads its arguments as
 * before (a batch's too: its layout is counted from the front). A node
 * whose own stamp differs refuses the whole call: a client that missed a
 * change of members (or never learnt of the record) cannot win a vote of
 * the nodes that moved on, whatever its list. One GET and one comparison.
 */
export const membershipCheckLua = `local memberStamp = table.remove(ARGV)
do
  local held = redis.call('get', '${stampKey}') or ''
  if memberStamp ~= held then
    return redis.error_reply('${membershipRefusalPrefix} ' .. (held == '' and 'none' or held))
  end
end
`;

/**
 * Lua put before a vote script that reads the node's stamp itself, in a
 * call it makes anyway (the acquire's MGET): one call less than
 * `membershipCheckLua`. It only takes the client's stamp off ARGV, as
 * `memberStamp`; the script must then refuse the call with
 * `membershipRefusalLua` before it writes anything.
 */
export const membershipStampLua = `local memberStamp = table.remove(ARGV)
`;

/**
 * Lua statement: refuses the call, as `membershipCheckLua` does, unless
 * `held` (a Lua local: the node's stamp as read, "" for none) is the
 * client's.
 */
export function membershipRefusalLua(held: string): string {
  return `if memberStamp ~= ${held} then
  return redis.error_reply('${membershipRefusalPrefix} ' .. (${held} == '' and 'none' or ${held}))
end`;
}

/** Whether `error` is a node's refusal of a vote for its membership; its stamp then ("" for none). */
export function membershipRefusalOf(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined;
  const at = error.message.indexOf(membershipRefusalPrefix);
  if (at < 0) return undefined;
  const stamp = error.message.slice(at + membershipRefusalPrefix.length).trim();
  return stamp === "none" ? "" : stamp;
}
