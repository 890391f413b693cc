/**
 * The protected side of fencing: `fencedSet`, a write a Redis the caller
 * protects accepts only with a token at least as high as any it has seen.
 */

import { raceAbort } from "../clock.js";
import { maxId, parseCounter } from "../decimal.js";
import { InvalidArgumentError, NodeError, RedquorumError } from "../errors.js";
import { fenceDefaults, limits } from "../limits.js";
import { isIoredisLike } from "../node/ioredis-transport.js";
import { LuaScript } from "../node/lua-script.js";
import { isNodeRedisLike } from "../node/node-redis-transport.js";
import type { RedisNode } from "../node/redis-node.js";
import { createNodes, type NodeInput } from "../node/resolve.js";
import { isNodeTransport } from "../node/transport.js";
import {
  describe,
  namedAs,
  rejectUnknownOptions,
  requireInteger,
  requireOptionsObject,
  requireWellFormed,
} from "../validate.js";

/**
 * One node per caller's client, made on first use: making one per call
 * would add a listener to the client every time.
 */
const nodesByClient = new WeakMap<object, RedisNode>();

function nodeOf(client: Exclude<NodeInput, string>): RedisNode {
  let node = nodesByClient.get(client);
  if (!node) {
    // createNodes names it nodes[0] (an ioredis client's keyPrefix); here it is `client`.
    [node] = namedAs("client", undefined, () => createNodes([client]));
    nodesByClient.set(client, node!);
  }
  return node!;
}

/** A key `fencedSet` writes: a non-empty, well-formed string (ioredis would write `String(key)`). */
function requireKey(name: string, key: unknown): string {
  if (typeof key !== "string" || key.length === 0) {
    throw new InvalidArgumentError(name, `expected a non-empty string, got ${describe(key)}`);
  }
  requireWellFormed(name, key);
  return key;
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
 * and at most 1000, as a node timeout) bounds the call. `token` is at most
 * `maxId` (2^63 - 1), as every fencing token is.
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
  if (!isIoredisLike(client) && !isNodeRedisLike(client) && !isNodeTransport(client)) {
    throw new InvalidArgumentError(
      "client",
      `expected an ioredis or node-redis client, got ${describe(client)}`,
    );
  }
  requireKey("key", key);
  if (typeof value !== "string") {
    throw new InvalidArgumentError("value", `expected a string, got ${describe(value)}`);
  }
  // Above 2^63 - 1 the store would keep a token no later write could be
  // compared with (each would fail as "not a counter value").
  if (typeof token !== "bigint" || token < 0n || token > maxId) {
    throw new InvalidArgumentError(
      "token",
      `expected a fencing token (a bigint in [0, 2^63 - 1], lock.fence), got ${describe(token)}`,
    );
  }
  const checked = requireOptionsObject("options", options);
  rejectUnknownOptions("options", checked, ["fenceKey", "timeoutMs"]);
  const fenceKey = requireKey("options.fenceKey", checked.fenceKey ?? `${key}:fence`);
  if (fenceKey === key) {
    // The value would overwrite the token it is checked against.
    throw new InvalidArgumentError(
      "options.fenceKey",
      `must differ from the key written (${JSON.stringify(key)}): the highest token is kept there`,
    );
  }
  // Bounded as a node timeout is: a timer above 2^31 - 1 ms would fire at once.
  const timeoutMs = requireInteger(
    "options.timeoutMs",
    checked.timeoutMs ?? fenceDefaults.fencedSetTimeoutMs,
    1,
    limits.nodeTimeoutMsMax,
  );
  const node = nodeOf(client);
  // Whatever the node answers (WRONGTYPE, a corrupt token), the caller gets a typed error.
  try {
    const reply = (await raceAbort(
      node.evalScript(fencedSetScript, [key, fenceKey], [value, token.toString()]),
      undefined,
      timeoutMs,
      () => node.timeoutError(timeoutMs),
    )) as unknown[];
    if (reply[0] === fencedSetReply.written) return { written: true };
    return { written: false, seenToken: parseCounter(reply[1]) };
  } catch (error) {
    throw error instanceof RedquorumError ? error : new NodeError(node.endpoint, error);
  }
}
