/**
 * What a node must pass before its votes count, at first contact and at
 * every recheck: the database the list names (a SELECT), one INFO read,
 * the guard rails (a master, not a server
 * already counted: run_id; a warning when it may evict keys), its
 * membership record (one MGET: a member of the cluster the list names), the owner's
 * scripts loaded on a new connection, the owner's further check (NextId's
 * durability) and its certify script. When a node is checked, and what a
 * failed check does to the group, is NodeGroup's (src/quorum/node-group.ts).
 */
import { raceAbort } from "../clock.js";
import { NodeConfigurationError } from "../errors.js";
import { type MembershipMode, MembershipView } from "../membership/view.js";
import { evictsKeysWithTtl, inspectNode, type NodeInfo, selectDatabase } from "./inspect.js";
import type { LuaScript } from "./lua-script.js";
import type { RedisNode } from "./redis-node.js";

export interface NodeWarning {
  /**
   * REDQUORUM_EVICTION: the node may evict keys with a TTL.
   * REDQUORUM_MAX_TTL: a node records a longer maxTtlMs from another client
   * of the cluster (lock/horizon.ts).
   */
  readonly code: "REDQUORUM_EVICTION" | "REDQUORUM_MAX_TTL";
  readonly endpoint: string;
  readonly message: string;
}

export interface AdmissionOptions {
  checkTimeoutMs: number;
  onWarning: (warning: NodeWarning) => void;
  /**
   * A further check of each node at every (re)check (NextId's durability
   * check); a `NodeConfigurationError` it throws on first contact refuses
   * the whole group, later it takes that node out of service.
   */
  extraCheck?: (node: RedisNode, timeoutMs: number) => Promise<void>;
  /**
   * Run at every (re)check before the node's votes count again, with the
   * run_id just read as its one argument: where the owner keeps state that a
   * restart can take back in time (counters), the script records the run_id
   * on the node and treats a different one as a possible loss.
   */
  certify?: {
    readonly script: LuaScript;
    readonly keys: readonly string[];
    /** Its further arguments, after the run_id, read at each check (Redlock's: node/durability.ts). */
    readonly args?: (node: RedisNode, timeoutMs: number) => Promise<readonly string[]>;
    /** Told of the script's reply before the node may vote. */
    readonly onReply?: (node: RedisNode, reply: unknown) => void;
  };
  /** Scripts to load on first contact, so the first calls need no NOSCRIPT recovery. */
  scripts?: readonly LuaScript[];
  /** Whether the node list is checked against the nodes' membership record (membership/view.ts). */
  membership?: MembershipMode;
}

/** The admission checks of the nodes of one group (run_ids are compared across them). */
export class Admission {
  private readonly nodes: readonly RedisNode[];
  private readonly options: AdmissionOptions;
  /** Per node: what its last passed check read. */
  private readonly infos: Array<NodeInfo | undefined>;
  /** run_id → index of the node that has it. */
  private readonly runIds = new Map<string, number>();
  /** The membership the nodes record, as this group's checks read it. */
  readonly membership: MembershipView;

  constructor(nodes: readonly RedisNode[], options: AdmissionOptions) {
    this.nodes = nodes;
    this.options = options;
    this.membership = new MembershipView(nodes, options.membership);
    this.infos = new Array(nodes.length).fill(undefined);
  }

  /** What node `index`'s last passed check read. */
  info(index: number): NodeInfo | undefined {
    return this.infos[index];
  }

  /**
   * Checks node `index`; resolves once it may vote. `checkedEpoch`: the
   * connection epoch of its last passed check. On another connection the
   * scripts are loaded again: a new connection may reach a restarted
   * server, with an empty script cache.
   */
  async check(index: number, checkedEpoch: number): Promise<void> {
    const node = this.nodes[index]!;
    const { extraCheck, certify, scripts = [], checkTimeoutMs } = this.options;
    // First: every read below must come from the database the list names.
    if (node.database !== undefined) await selectDatabase(node, node.database, checkTimeoutMs);
    const info = await inspectNode(node, checkTimeoutMs);
    this.guardRails(index, info);
    await this.membership.check(index, checkTimeoutMs);
    if (node.epoch !== checkedEpoch) {
      await Promise.all(scripts.map((script) => node.loadScript(script, checkTimeoutMs)));
    }
    await extraCheck?.(node, checkTimeoutMs);
    if (certify) {
      const args = (await certify.args?.(node, checkTimeoutMs)) ?? [];
      const reply = await raceAbort(
        node.evalScript(certify.script, certify.keys, [info.runId, ...args]),
        undefined,
        checkTimeoutMs,
        () => node.timeoutError(checkTimeoutMs),
      );
      certify.onReply?.(node, reply);
    }
    this.infos[index] = info;
  }

  /** The guard rails that need no further call: a master, not a server already counted. */
  private guardRails(index: number, info: NodeInfo): void {
    const node = this.nodes[index]!;
    if (info.role !== "master") {
      throw new NodeConfigurationError(
        [node.endpoint],
        `${node.endpoint} is a ${info.role}, not a master: redquorum needs independent masters ` +
          "(a replica lags its master, so a lock could be granted twice after a failover)",
      );
    }
    this.requireOwnServer(index, info.runId);
    // Warned when first seen, and again whenever a check finds it newly set.
    const before = this.infos[index];
    if (evictsKeysWithTtl(info) && (!before || !evictsKeysWithTtl(before))) {
      this.options.onWarning({
        code: "REDQUORUM_EVICTION",
        endpoint: node.endpoint,
        message:
          `${node.endpoint} has maxmemory ${info.maxmemoryBytes} with policy ` +
          `${info.maxmemoryPolicy}: it may evict held lock keys; use maxmemory-policy noeviction`,
      });
    }
  }

  /**
   * No other node of the group is the same server (run_id). By index, not
   * by endpoint: two clients of one server (say, on two databases) can carry
   * the same host:port name. A node that comes back as another node's server
   * (after a reconnect) is caught here too.
   */
  private requireOwnServer(index: number, runId: string): void {
    for (const [known, otherIndex] of this.runIds) {
      if (otherIndex === index && known !== runId) this.runIds.delete(known);
    }
    const otherIndex = this.runIds.get(runId);
    if (otherIndex !== undefined && otherIndex !== index) {
      const other = this.nodes[otherIndex]!.endpoint;
      const endpoint = this.nodes[index]!.endpoint;
      throw new NodeConfigurationError(
        [other, endpoint],
        `nodes[${otherIndex}] (${other}) and nodes[${index}] (${endpoint}) are the same Redis server (run_id ${runId}): ` +
          "counting one server twice would fake a majority",
      );
    }
    this.runIds.set(runId, index);
  }
}
