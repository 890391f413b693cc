import { NodeConfigurationError, NodeError } from "../errors.js";
import type { RedisNode } from "./redis-node.js";

/** What we read from a node on first contact (one `INFO` call). */
export interface NodeInfo {
  readonly endpoint: string;
  readonly runId: string;
  readonly role: string;
  readonly redisVersion: string;
  readonly maxmemoryBytes: number;
  readonly maxmemoryPolicy: string;
  readonly aofEnabled: boolean;
}

/** Parses the `field:value` lines of an INFO reply; section headers and blanks are skipped. */
export function parseInfo(text: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    if (line === "" || line.startsWith("#")) continue;
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    fields.set(line.slice(0, colon), line.slice(colon + 1).trim());
  }
  return fields;
}

export function nodeInfoFrom(endpoint: string, text: string): NodeInfo {
  const fields = parseInfo(text);
  return {
    endpoint,
    runId: fields.get("run_id") ?? "",
    role: fields.get("role") ?? "unknown",
    redisVersion: fields.get("redis_version") ?? "unknown",
    maxmemoryBytes: Number(fields.get("maxmemory") ?? 0) || 0,
    maxmemoryPolicy: fields.get("maxmemory_policy") ?? "unknown",
    aofEnabled: fields.get("aof_enabled") === "1",
  };
}

export async function inspectNode(node: RedisNode, timeoutMs: number): Promise<NodeInfo> {
  // Plain INFO holds the server, replication, memory and persistence sections
  // we need, and works where CONFIG is renamed away.
  const reply = await node.command(["INFO"], { timeoutMs });
  return nodeInfoFrom(node.endpoint, String(reply));
}

/**
 * Confirms that the node's connection is on `database`: a server without
 * that database refuses the `SELECT` (ioredis sends its own at connect,
 * and on a refusal stays on database 0 without failing a command), and
 * then the node list is wrong, not the node down.
 */
export async function selectDatabase(
  node: RedisNode,
  database: number,
  timeoutMs: number,
): Promise<void> {
  try {
    await node.command(["SELECT", String(database)], { timeoutMs });
  } catch (error) {
    const cause = error instanceof NodeError ? error.cause : error;
    if (cause instanceof Error && /^ERR\b/.test(cause.message)) {
      throw new NodeConfigurationError(
        [node.endpoint],
        `${node.endpoint} has no database ${database} (${cause.message}): ` +
          "give the number of a database the server has (its databases setting), or none for 0",
      );
    }
    throw error;
  }
}

/** Eviction policies that may drop a key with a TTL, i.e. a held lock. */
export function evictsKeysWithTtl(info: NodeInfo): boolean {
  return info.maxmemoryBytes > 0 && info.maxmemoryPolicy !== "noeviction";
}

/**
 * The value in a `CONFIG GET name` reply: a [name, value] array over RESP2,
 * a map over RESP3 (node-redis 6 clients default to it), as a Map or a
 * plain object depending on the client; "" when absent.
 */
export function configValue(reply: unknown, name: string): string {
  if (Array.isArray(reply)) {
    const at = reply.findIndex((item, i) => i % 2 === 0 && String(item) === name);
    return at >= 0 ? String(reply[at + 1] ?? "") : "";
  }
  if (reply instanceof Map) return String(reply.get(name) ?? "");
  if (typeof reply === "object" && reply !== null) {
    return String((reply as Record<string, unknown>)[name] ?? "");
  }
  return "";
}
