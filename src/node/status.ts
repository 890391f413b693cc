import type { Clock } from "../clock.js";
import { configValue, nodeInfoFrom, selectDatabase } from "./inspect.js";
import { unjudgedPrefix } from "./node-state.js";
import type { RedisNode } from "./redis-node.js";

/** One node as `status()` reports it: what the CLI's `status` command prints. */
export interface NodeStatus {
  readonly endpoint: string;
  readonly reachable: boolean;
  /** Round-trip time of a PING on an open connection, in milliseconds. */
  readonly latencyMs?: number;
  readonly role?: string;
  readonly runId?: string;
  readonly redisVersion?: string;
  readonly appendonly?: string;
  /** Undefined where CONFIG is disabled. */
  readonly appendfsync?: string;
  /** "yes" lets a rewrite skip fsyncs: NextId refuses such a node. Undefined where CONFIG is disabled. */
  readonly noAppendfsyncOnRewrite?: string;
  readonly maxmemoryBytes?: number;
  readonly maxmemoryPolicy?: string;
  /**
   * Whether the node's marker says it is in service: for locks "1", or a
   * loss its fencing repair has dealt with; for IDs the counter's marker
   * "1". False when missing, and after a loss until repaired.
   */
  readonly marker?: boolean;
  /** The marker's value as read: for locks "1", "lost:<time>" or "restarted:<time>"; for IDs "1" or "suspect". */
  readonly markerValue?: string;
  /**
   * The server restarted (its run_id is not the one recorded when a client
   * last checked it) and no client has checked it since: its marker may
   * still say "in service", but the first client to check it takes it out
   * of service until it is repaired from the other nodes (or, for locks
   * on a node that does not fsync every write, its restart quarantine is
   * over). False when no run_id is recorded (never checked by this version).
   */
  readonly restartUnchecked?: boolean;
  /** Milliseconds of quarantine left; 0 when the node is in service. */
  readonly quarantineRemainingMs?: number;
  /**
   * False while the quarantine waits for its length to be judged from the
   * other nodes (lock/quarantine-judge.ts: a client's next call there
   * does it); `quarantineRemainingMs` is then only an upper bound.
   */
  readonly quarantineJudged?: boolean;
  /** Why the node is unreachable or could not be read. */
  readonly error?: string;
}

export async function readNodeStatus(
  node: RedisNode,
  clock: Clock,
  timeoutMs: number,
  keys: {
    marker: string;
    /** Whether the marker's value means "in service". */
    markerOk: (value: string) => boolean;
    /** A key whose presence also means "in service" (the floor a fencing repair wrote). */
    repaired?: string;
    /** The restart quarantine's key; IDs have none. */
    quarantine?: string;
    /** The key holding the run_id the node was last checked (certified) on. */
    run?: string;
  },
): Promise<NodeStatus> {
  try {
    // The first PING may open the connection: the second one is the round trip.
    await node.command(["PING"], { timeoutMs });
    // What follows must be read from the database the list names.
    if (node.database !== undefined) await selectDatabase(node, node.database, timeoutMs);
    const start = clock.now();
    await node.command(["PING"], { timeoutMs });
    const latencyMs = clock.now() - start;
    const [infoText, marker, quarantine, quarantineValue, fsync, repaired, onRewrite] =
      await Promise.all([
        node.command(["INFO"], { timeoutMs }),
        node.command(["GET", keys.marker], { timeoutMs }),
        keys.quarantine === undefined ? -2 : node.command(["PTTL", keys.quarantine], { timeoutMs }),
        keys.quarantine === undefined
          ? null
          : node.command(["GET", keys.quarantine], { timeoutMs }),
        node.command(["CONFIG", "GET", "appendfsync"], { timeoutMs }).catch(() => undefined),
        keys.repaired === undefined ? 0 : node.command(["EXISTS", keys.repaired], { timeoutMs }),
        node
          .command(["CONFIG", "GET", "no-appendfsync-on-rewrite"], { timeoutMs })
          .catch(() => undefined),
      ]);
    const run =
      keys.run === undefined ? null : await node.command(["GET", keys.run], { timeoutMs });
    const markerValue = marker == null ? undefined : String(marker);
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
      noAppendfsyncOnRewrite:
        onRewrite === undefined
          ? undefined
          : configValue(onRewrite, "no-appendfsync-on-rewrite") || undefined,
      maxmemoryBytes: info.maxmemoryBytes,
      maxmemoryPolicy: info.maxmemoryPolicy,
      marker: markerValue !== undefined && (keys.markerOk(markerValue) || repaired === 1),
      markerValue,
      // The record is "<run_id>/<count>" (node/server-identity.ts), or a bare run_id from older versions.
      restartUnchecked:
        run != null && info.runId !== "" && String(run).split("/")[0] !== info.runId,
      quarantineRemainingMs: typeof quarantine === "number" && quarantine > 0 ? quarantine : 0,
      quarantineJudged:
        quarantineValue == null || !String(quarantineValue).startsWith(unjudgedPrefix),
    };
  } catch (error) {
    return {
      endpoint: node.endpoint,
      reachable: false,
      error: error instanceof Error ? error.message : String(error),
    };
  }
}
