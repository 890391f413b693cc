import { InvalidArgumentError, NodeConfigurationError } from "../errors.js";
import { defaults, limits } from "../limits.js";
import { describe } from "../validate.js";
import { type IoredisLike, IoredisTransport, isIoredisLike } from "./ioredis-transport.js";
import { isNodeRedisLike, type NodeRedisLike, NodeRedisTransport } from "./node-redis-transport.js";
import { RedisNode } from "./redis-node.js";
import { isNodeTransport, type NodeTransport } from "./transport.js";

/**
 * A node as the caller gives it: a `redis://` / `rediss://` URL (redquorum
 * opens and closes an ioredis connection), the caller's own ioredis or
 * node-redis client (left open on close), or any `NodeTransport`.
 */
export type NodeInput = string | IoredisLike | NodeRedisLike | NodeTransport;

/** `stallMs`: see `RedisNode` (the owner's `nodeStallMs`). */
export function createNodes(
  inputs: readonly NodeInput[],
  stallMs: number = defaults.nodeStallMs,
): RedisNode[] {
  requireNodeList(inputs);
  const seen = new Map<unknown, number>();
  const plans: NodePlan[] = [];
  // Every index, holes of a sparse array too (map skips them: the hole
  // would stay in the list and fail every call later).
  for (let index = 0; index < inputs.length; index++) {
    const plan = planNode(inputs[index]!, index);
    const first = seen.get(plan.identity);
    if (first !== undefined) {
      throw new NodeConfigurationError(
        [plan.endpoint],
        `nodes[${first}] and nodes[${index}] are the same endpoint (${plan.endpoint}): ` +
          "each node must be a different Redis server",
      );
    }
    seen.set(plan.identity, index);
    plans.push(plan);
  }
  // Only now, with every input valid, are clients created (lazily connecting).
  return plans.map((plan) => new RedisNode(plan.create(), stallMs, plan.database));
}

/** The node list as a whole: an array of 1 to `limits.nodeCountMax` entries (each checked by createNodes). */
export function requireNodeList(inputs: unknown): asserts inputs is readonly NodeInput[] {
  if (!Array.isArray(inputs) || inputs.length === 0) {
    throw new InvalidArgumentError(
      "nodes",
      "expected a non-empty array of redis:// URLs or Redis clients",
    );
  }
  if (inputs.length > limits.nodeCountMax) {
    throw new InvalidArgumentError(
      "nodes",
      `${inputs.length} nodes given, at most ${limits.nodeCountMax} are allowed`,
    );
  }
}

interface NodePlan {
  identity: unknown;
  endpoint: string;
  create: () => NodeTransport;
  /** The database a URL or an ioredis client names, above 0: the checks confirm the server has it. */
  database?: number;
}

function planNode(input: NodeInput, index: number): NodePlan {
  if (typeof input === "string") {
    const endpoint = endpointOfUrl(input, index);
    const database = databaseOfUrl(new URL(input), index);
    return {
      identity: endpoint,
      endpoint,
      create: () => IoredisTransport.fromUrl(input, endpoint),
      // Database 0 is where every connection starts: nothing to confirm
      // (and a user without SELECT, as an ACL may leave it, still works).
      ...(database > 0 ? { database } : {}),
    };
  }
  if (isNodeTransport(input)) {
    // Its endpoint names it in errors, events and the membership record.
    if (input.endpoint.trim() === "") {
      throw new InvalidArgumentError(
        `nodes[${index}]`,
        "a NodeTransport needs a non-empty endpoint (host:port, its name in errors and events)",
      );
    }
    return { identity: input, endpoint: input.endpoint, create: () => input };
  }
  if (isIoredisLike(input)) {
    // ioredis would prefix the keys a script is given but not the ones the
    // scripts name themselves (node marker, fencing state and counters,
    // queues), splitting what must be read together.
    const clientPrefix = input.options?.keyPrefix;
    if (clientPrefix) {
      throw new InvalidArgumentError(
        `nodes[${index}]`,
        `an ioredis client with keyPrefix ${JSON.stringify(clientPrefix)} is not supported: ` +
          "redquorum's scripts name keys of their own that the client would not prefix; " +
          "give a client without keyPrefix (Redlock has its own keyPrefix option)",
      );
    }
    // Made only once every input is valid: it adds listeners to the client.
    const db = Number(input.options?.db ?? 0);
    return {
      identity: input,
      endpoint: IoredisTransport.endpointOf(input),
      create: () => IoredisTransport.fromClient(input),
      ...(Number.isSafeInteger(db) && db > 0 ? { database: db } : {}),
    };
  }
  if (isNodeRedisLike(input)) {
    const transport = new NodeRedisTransport(input);
    return { identity: input, endpoint: transport.endpoint, create: () => transport };
  }
  throw new InvalidArgumentError(
    `nodes[${index}]`,
    `expected a redis:// URL, an ioredis client, a node-redis client or a NodeTransport, got ${describe(input)}`,
  );
}

/**
 * A URL as given, for an error message, with its credentials (from "//"
 * to the last "@": a password that does not parse may hold "/" or "@")
 * replaced: errors end up in logs.
 */
export function withoutPassword(url: string): string {
  return url.replace(/\/\/.*@/, "//***@");
}

/** host:port[/db] of a redis URL: the node's name in errors (credentials left out). */
export function endpointOfUrl(url: string, index: number): string {
  // The URL parser drops these silently, ioredis does not (a leading space
  // throws a TypeError from inside it): one spelling for both, or refused.
  if (/^\s|\s$|\p{Cc}/u.test(url)) {
    throw new InvalidArgumentError(
      `nodes[${index}]`,
      `${JSON.stringify(withoutPassword(url))} has leading or trailing whitespace or a control character`,
    );
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new InvalidArgumentError(
      `nodes[${index}]`,
      `${JSON.stringify(withoutPassword(url))} is not a URL`,
    );
  }
  if (parsed.protocol !== "redis:" && parsed.protocol !== "rediss:") {
    throw new InvalidArgumentError(
      `nodes[${index}]`,
      `${JSON.stringify(parsed.protocol)} is not supported: use redis:// or rediss://`,
    );
  }
  if (!parsed.hostname) {
    throw new InvalidArgumentError(`nodes[${index}]`, "the URL has no host");
  }
  const db = databaseOfUrl(parsed, index);
  const host = parsed.hostname.toLowerCase();
  return `${host}:${parsed.port || "6379"}${db > 0 ? `/${db}` : ""}`;
}

/**
 * The database a redis URL names: its path ("/3"), else a `db` query
 * parameter (ioredis reads both), else 0. Anything else is refused here:
 * ioredis would send `SELECT NaN` and fail every command, or stay on
 * database 0 after a failed `SELECT` (which the node's checks catch for a
 * number the server does not have: node/inspect.ts, `selectDatabase`).
 */
function databaseOfUrl(parsed: URL, index: number): number {
  const path = parsed.pathname.replace(/^\//, "");
  const given = path !== "" ? path : (parsed.searchParams.get("db") ?? "0");
  if (!/^\d{1,9}$/.test(given)) {
    throw new InvalidArgumentError(
      `nodes[${index}]`,
      `${JSON.stringify(withoutPassword(parsed.href))}: the database must be a number ` +
        `(redis://host:port/0 for the first), not ${JSON.stringify(given)}`,
    );
  }
  return Number(given);
}
