import type { Clock } from "../clock.js";
import { configValue, nodeInfoFrom } from "./inspect.js";
import type { RedisNode } from "./redis-node.js";

/** One node as `status()` reports it: what the CLI's `status` command prints. */
export interface NodeStatus {
  readonly endpoint: string;
  readonly reachable: boolean;
  /** Round-trip time of a PING, in milliseconds. */
  readonly latencyMs?: number;
  readonly role?: string;
  readonly runId?: string;
  readonly redisVersion?: string;
  readonly appendonly?: string;
  /** Undefined where CONFIG is disabled. */
  readonly appendfsync?: string;
  readonly maxmemoryBytes?: number;
  readonly maxmemoryPolicy?: string;
  /** Whether the node marker of the restart quarantine is present. */
  readonly marker?: boolean;
  /** Milliseconds of quarantine left; 0 when the node is in service. */
  readonly quarantineRemainingMs?: number;
  /** Why the node is unreachable or could not be read. */
  readonly error?: string;
}

export async function readNodeStatus(
  node: RedisNode,
  clock: Clock,
  timeoutMs: number,
  keys: {
    marker: string;
    /** Whether the marker's value means "in service" (default: it exists). */
    markerOk?: (value: string) => boolean;
    /** The restart quarantine's key; IDs have none. */
    quarantine?: string;
  },
): Promise<NodeStatus> {
  try {
    const start = clock.now();
    await node.command(["PING"], { timeoutMs });
    const latencyMs = clock.now() - start;
    const [infoText, marker, quarantine, fsync] = await Promise.all([
      node.command(["INFO"], { timeoutMs }),
      node.command(["GET", keys.marker], { timeoutMs }),
      keys.quarantine === undefined ? -2 : node.command(["PTTL", keys.quarantine], { timeoutMs }),
      node.command(["CONFIG", "GET", "appendfsync"], { timeoutMs }).catch(() => undefined),
    ]);
    const info = nodeInfoFrom(node.endpoint, String(infoText));
    return {
      endpoint: node.endpoint,
      reachable: true,
      latencyMs,
      role: info.role,
      runId: info.runId,
      redisVersion: info.redisVersion,
      appendonly: info.aofEnabled ? "yes" : "no",
      appendfsync: fsync === undefined ? undefined : configValue(fsync, "appendfsync") || undefined,
      maxmemoryBytes: info.maxmemoryBytes,
      maxmemoryPolicy: info.maxmemoryPolicy,
      marker: marker != null && (keys.markerOk?.(String(marker)) ?? true),
      quarantineRemainingMs: typeof quarantine === "number" && quarantine > 0 ? quarantine : 0,
    };
  } catch (error) {
    return {
      endpoint: node.endpoint,
      reachable: false,
      error: error instanceof Error ? error.message : String(error),
    };
  }
}
