import { NodeConfigurationError, NodeError } from "../errors.js";
import { evictsKeysWithTtl, inspectNode, type NodeInfo } from "../node/inspect.js";
import type { LuaScript } from "../node/lua-script.js";
import type { RedisNode } from "../node/redis-node.js";
import { quorumOf, type RoundOptions, type RoundResult, runRound, settledRound } from "./round.js";

export interface NodeWarning {
  readonly code: "REDQUORUM_EVICTION";
  readonly endpoint: string;
  readonly message: string;
}

export interface NodeGroupOptions {
  checkTimeoutMs: number;
  onWarning: (warning: NodeWarning) => void;
  /**
   * A further check of each node on first contact (NextId's durability
   * check); a `NodeConfigurationError` it throws refuses the whole group.
   */
  extraCheck?: (node: RedisNode, timeoutMs: number) => Promise<void>;
  /** Scripts to load on first contact, so the first calls need no NOSCRIPT recovery. */
  scripts?: readonly LuaScript[];
}

/**
 * The N independent masters behind a Redlock or NextId: the majority size,
 * the guard rails checked on first contact with each node (no replica, no
 * server counted twice), and the one round every operation runs.
 */
export class NodeGroup {
  readonly nodes: readonly RedisNode[];
  readonly quorum: number;
  private readonly options: NodeGroupOptions;
  private readonly infos: Array<NodeInfo | undefined>;
  private readonly pendingChecks: Array<Promise<void> | undefined>;
  /** run_id → index of the node that has it. */
  private readonly runIds = new Map<string, number>();
  private refusal: NodeConfigurationError | undefined;
  private firstContact: Promise<void> | undefined;
  private uncheckedCount: number;
  /** Calls still running after their round ended early; `close()` lets them finish. */
  private readonly inFlight = new Set<Promise<unknown>>();

  constructor(nodes: readonly RedisNode[], options: NodeGroupOptions) {
    this.nodes = nodes;
    this.quorum = quorumOf(nodes.length);
    this.options = options;
    this.infos = new Array(nodes.length).fill(undefined);
    this.pendingChecks = new Array(nodes.length).fill(undefined);
    this.uncheckedCount = nodes.length;
  }

  /**
   * Before the first operation: inspect every node at once and wait for all
   * (bounded by `checkTimeoutMs`), so that two addresses of one server are
   * refused before any key is written. Nodes that did not answer are checked
   * later, before their first vote counts.
   */
  async ready(): Promise<void> {
    if (this.refusal) throw this.refusal;
    if (this.uncheckedCount === 0) return;
    this.firstContact ??= Promise.allSettled(this.nodes.map((_, i) => this.check(i))).then(
      () => {},
    );
    await this.firstContact;
    if (this.refusal) throw this.refusal;
  }

  /** The refusal found by a late check, if any (operations then stop). */
  get refused(): NodeConfigurationError | undefined {
    return this.refusal;
  }

  async round<T>(
    call: (node: RedisNode, index: number) => Promise<T>,
    options: RoundOptions<T>,
  ): Promise<RoundResult<T>> {
    const result = await runRound(
      this.nodes,
      this.quorum,
      this.uncheckedCount === 0
        ? call
        : (node, index) =>
            this.infos[index] ? call(node, index) : this.check(index).then(() => call(node, index)),
      options,
    );
    const { done } = result;
    if (done !== settledRound) {
      this.inFlight.add(done);
      done.then(() => this.inFlight.delete(done));
    }
    return result;
  }

  info(index: number): NodeInfo | undefined {
    return this.infos[index];
  }

  /** Lets calls still in flight finish (each is bounded by its timeout), then closes the nodes. */
  async close(): Promise<void> {
    await Promise.all(this.inFlight);
    await Promise.allSettled(this.nodes.map((node) => node.close()));
  }

  private check(index: number): Promise<void> {
    if (this.infos[index]) return Promise.resolve();
    const pending =
      this.pendingChecks[index] ??
      inspectNode(this.nodes[index]!, this.options.checkTimeoutMs)
        .then(async (info) => {
          const { extraCheck, scripts = [] } = this.options;
          const node = this.nodes[index]!;
          await Promise.all(
            scripts.map((script) =>
              node.command(["SCRIPT", "LOAD", script.source], {
                timeoutMs: this.options.checkTimeoutMs,
              }),
            ),
          );
          if (extraCheck) {
            try {
              await extraCheck(node, this.options.checkTimeoutMs);
            } catch (error) {
              if (error instanceof NodeConfigurationError) this.refuse(error);
              throw error;
            }
          }
          this.admit(index, info);
        })
        .finally(() => {
          this.pendingChecks[index] = undefined;
        });
    this.pendingChecks[index] = pending;
    return pending;
  }

  private admit(index: number, info: NodeInfo): void {
    const node = this.nodes[index]!;
    if (info.role !== "master") {
      this.refuse(
        new NodeConfigurationError(
          [node.endpoint],
          `${node.endpoint} is a ${info.role}, not a master: redquorum needs independent masters ` +
            "(a replica lags its master, so a lock could be granted twice after a failover)",
        ),
      );
    }
    // By index, not by endpoint: two clients of one server (say, on two
    // databases) can carry the same host:port name.
    const otherIndex = this.runIds.get(info.runId);
    if (otherIndex !== undefined && otherIndex !== index) {
      const other = this.nodes[otherIndex]!.endpoint;
      this.refuse(
        new NodeConfigurationError(
          [other, node.endpoint],
          `nodes[${otherIndex}] (${other}) and nodes[${index}] (${node.endpoint}) are the same Redis server (run_id ${info.runId}): ` +
            "counting one server twice would fake a majority",
        ),
      );
    }
    this.runIds.set(info.runId, index);
    if (evictsKeysWithTtl(info)) {
      this.options.onWarning({
        code: "REDQUORUM_EVICTION",
        endpoint: node.endpoint,
        message:
          `${node.endpoint} has maxmemory ${info.maxmemoryBytes} with policy ` +
          `${info.maxmemoryPolicy}: it may evict held lock keys; use maxmemory-policy noeviction`,
      });
    }
    this.infos[index] = info;
    this.uncheckedCount--;
  }

  private refuse(error: NodeConfigurationError): never {
    this.refusal ??= error;
    throw new NodeError(error.endpoints.at(-1) ?? "", error);
  }
}
