/**
 * The protected side of fencing: `fencedSet`, a write a Redis the caller
 * protects accepts only with a token at least as high as any it has seen.
 */

import { raceAbort } from "../clock.js";
import { parseCounter } from "../decimal.js";
import { InvalidArgumentError, NodeError, NodeTimeoutError, RedquorumError } from "../errors.js";
import { fenceDefaults } from "../limits.js";
import { LuaScript } from "../node/lua-script.js";
import type { RedisNode } from "../node/redis-node.js";
import { createNodes, type NodeInput } from "../node/resolve.js";

/**
 * One node per caller's client, made on first use: making one per call
 * would add a listener to the client every time.
 */
const nodesByClient = new WeakMap<object, RedisNode>();

function nodeOf(client: Exclude<NodeInput, string>): RedisNode {
  let node = nodesByClient.get(client);
  if (!node) {
    [node] = createNodes([client]);
    nodesByClient.set(client, node!);
  }
  return node!;
}

/** fencedSetScript's reply: {written}, or {refused, seen}. */
const fencedSetReply = {
  written: 1,
  refused: 0,
} as const;

/**
 * The protected side of fencing: a token is worthless unless the resource
 * checks it. This script writes a key only if the writer's token is at least
 * the highest token seen for that key (equal: the same holder writing
 * again), and remembers the token. KEYS[1] the data key, KEYS[2] where the
 * highest token is kept; ARGV[1] the value, ARGV[2] the token (decimal).
 * {written}: written; {refused, seen}: refused, a later holder has written.
 */
export const fencedSetScript = new LuaScript(
  "fenced-set",
  `local seen = redis.call('get', KEYS[2])
local token = ARGV[2]
if seen and (#token < #seen or (#token == #seen and token < seen)) then return {${fencedSetReply.refused}, seen} end
redis.call('set', KEYS[2], token)
redis.call('set', KEYS[1], ARGV[1])
return {${fencedSetReply.written}}`,
);

export interface FencedSetResult {
  /** Whether the value was written. */
  readonly written: boolean;
  /** When refused: the higher token that had already written. */
  readonly seenToken?: bigint;
}

/**
 * `SET key value` on a Redis the caller protects with fencing, only if
 * `token` is at least every token used on this key before. `client` is the
 * caller's own ioredis or node-redis client (left open). The highest token
 * is kept under `fenceKey` (default `<key>:fence`); `timeoutMs` (default
 * 1000) bounds the call.
 */
export async function fencedSet(
  client: NodeInput,
  key: string,
  value: string,
  token: bigint,
  options: { fenceKey?: string; timeoutMs?: number } = {},
): Promise<FencedSetResult> {
  if (typeof client === "string") {
    throw new InvalidArgumentError("client", "expected an ioredis or node-redis client, not a URL");
  }
  if (typeof token !== "bigint" || token < 0n) {
    throw new InvalidArgumentError(
      "token",
      "expected a fencing token (a non-negative bigint, lock.fence)",
    );
  }
  const fenceKey = options.fenceKey ?? `${key}:fence`;
  if (fenceKey === key) {
    // The value would overwrite the token it is checked against.
    throw new InvalidArgumentError(
      "fenceKey",
      `must differ from the key written (${JSON.stringify(key)}): the highest token is kept there`,
    );
  }
  const node = nodeOf(client);
  const timeoutMs = options.timeoutMs ?? fenceDefaults.fencedSetTimeoutMs;
  // Whatever the node answers (WRONGTYPE, a corrupt token), the caller gets a typed error.
  try {
    const reply = (await raceAbort(
      node.evalScript(fencedSetScript, [key, fenceKey], [value, token.toString()]),
      undefined,
      timeoutMs,
      () => new NodeTimeoutError(node.endpoint, timeoutMs),
    )) as unknown[];
    if (reply[0] === fencedSetReply.written) return { written: true };
    return { written: false, seenToken: parseCounter(reply[1]) };
  } catch (error) {
    throw error instanceof RedquorumError ? error : new NodeError(node.endpoint, error);
  }
}
