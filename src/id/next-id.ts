/**
 * NextId, the public class: strictly increasing, never repeated IDs agreed
 * by a majority of N independent Redis masters (seed 2). It builds the
 * parts and wires them together, and owns the lifecycle: first contact,
 * `init()`, `status()`, `close()`. How IDs are won is the strategies'
 * (range-rounds.ts, seed-rounds.ts) over the rounds they share
 * (counter-rounds.ts); a lost node counter is repaired by repair.ts.
 */
import { raceAbort } from "../clock.js";
import {
  AlreadyInitializedError,
  ClosedError,
  type NodeConfigurationError,
  QuorumError,
} from "../errors.js";
import { checkDurability } from "../node/durability.js";
import { createNodes, type NodeInput } from "../node/resolve.js";
import { type NodeStatus, readNodeStatus } from "../node/status.js";
import { Observer } from "../observe.js";
import { NodeGroup } from "../quorum/node-group.js";
import { nodeErrorsOf, type RoundResult } from "../quorum/round.js";
import { nodeGroupOptionsOf } from "../shared-options.js";
import { rejectUnknownOptions, requireOptionsObject, requireSignal } from "../validate.js";
import {
  certifyScript,
  counterScripts,
  counterValueOf,
  initScript,
  isAccepted,
  markerHeld,
} from "./counter.js";
import { CounterRounds } from "./counter-rounds.js";
import { type CounterKeys, counterKeys } from "./keys.js";
import {
  type NextIdOptions,
  type ResolvedNextIdOptions,
  requireBatchCount,
  resolveNextIdOptions,
} from "./options.js";
import { RangeRounds } from "./range-rounds.js";
import { IdRepairs } from "./repair.js";
import { type SeedContext, seedBatch } from "./seed-rounds.js";

/**
 * Strictly increasing, never repeated IDs agreed by a majority of N
 * independent Redis masters, made fast by the `range` strategy:
 * one conditional write per round, concurrent calls share a round (group
 * commit), rounds pipelined.
 */
export class NextId {
  readonly options: ResolvedNextIdOptions;
  private readonly group: NodeGroup;
  private readonly keys: CounterKeys;
  private readonly observer: Observer;
  /** Aborted by `close()` (so: closed): ends backoffs; calls still waiting fail. */
  private readonly lifetime = new AbortController();
  private readonly counter: CounterRounds;
  private readonly repairs: IdRepairs;
  private readonly range: RangeRounds;
  private readonly seed: SeedContext;
  private closing: Promise<void> | undefined;

  constructor(nodes: readonly NodeInput[], options: NextIdOptions = {}) {
    this.options = resolveNextIdOptions(options);
    this.keys = counterKeys(this.options.key);
    this.observer = new Observer(this.options.observe);
    this.group = new NodeGroup(
      createNodes(nodes, this.options.nodeStallMs),
      nodeGroupOptionsOf(this.options, this.observer, {
        extraCheck: this.options.unsafeAllowNonDurableNodes ? undefined : checkDurability,
        certify: { script: certifyScript, keys: counterKeys(this.options.key) },
        scripts: counterScripts,
      }),
    );
    const { group, keys, observer, options: resolved } = this;
    const signal = this.lifetime.signal;
    // The counter hands losses to the repairs; the repairs hand the values
    // they raised nodes to back to the counter (no reference either way).
    this.counter = new CounterRounds({
      group,
      keys,
      options: resolved,
      onLoss: (index, loss) => this.repairs.nodeLost(index, loss),
    });
    this.repairs = new IdRepairs({
      group,
      keys,
      observer,
      options: resolved,
      onRepaired: (value) => this.counter.raiseKnownMax(value),
    });
    const { counter } = this;
    this.range = new RangeRounds({
      counter,
      quorum: group.quorum,
      options: resolved,
      observer,
      signal,
    });
    this.seed = {
      counter,
      quorum: group.quorum,
      options: resolved,
      assertOpen: () => this.assertOpen(),
    };
  }

  get nodeCount(): number {
    return this.group.nodes.length;
  }

  /** Each node as events and errors name it (`host:port`), in the order given. */
  get endpoints(): string[] {
    return this.group.nodes.map((node) => node.endpoint);
  }

  get quorum(): number {
    return this.group.quorum;
  }

  /**
   * What stops every call of this instance for good, once found: the node
   * list does not fit the members the nodes record (`MembershipError`), or
   * a node failed its configuration check at first contact
   * (`NodeConfigurationError`: two addresses of one server, a node that
   * does not persist every write, …). Undefined until then. Every call
   * rejects with it from then on: only a new instance, with a list that
   * fits, serves again.
   */
  get refused(): NodeConfigurationError | undefined {
    return this.group.refused;
  }

  /**
   * @internal First contact with every node now, as the first call would
   * make it: the ID server's start check, so that /healthz and the node
   * metrics know the nodes before the first request. Rejects with `refused`.
   */
  async connect(): Promise<void> {
    this.assertOpen();
    await this.group.ready();
  }

  /**
   * @internal Checks the nodes out of service or due a check now, without
   * waiting (the ID server's /healthz and /metrics: an idle server's node
   * metrics follow the nodes). Nothing once closed.
   */
  refreshNodes(): void {
    if (!this.closing) this.group.refresh();
  }

  /** How many lost node counters this instance has repaired. */
  get repairedCount(): number {
    return this.repairs.repairedCount;
  }

  /** One new ID, larger than every ID any caller had received before this call. */
  async next(options: { signal?: AbortSignal } = {}): Promise<bigint> {
    const [id] = await this.nextBatch(1, options);
    return id!;
  }

  /**
   * `count` new IDs, strictly increasing, all larger than every ID handed
   * out before this call. A call that used up its retries for too few votes
   * while repairs of this instance are pending (nodes it found restarted or
   * without their counter, out of service until repaired) waits for them,
   * at most `repairDelayMs` and their rounds, and then tries once more: with
   * a majority repaired, it gets its IDs. Not with `retry.retries` 0: such
   * a call fails at its first lost round.
   */
  async nextBatch(count: number, options: { signal?: AbortSignal } = {}): Promise<bigint[]> {
    this.assertOpen();
    const n = requireBatchCount(count);
    const checked = requireOptionsObject("options", options);
    rejectUnknownOptions("options", checked, ["signal"]);
    const signal = requireSignal("options.signal", checked.signal);
    signal?.throwIfAborted();
    await raceAbort(this.group.ready(), signal);
    this.assertOpen();
    try {
      return await this.take(n, signal);
    } catch (error) {
      const retries = this.options.retry.retries > 0;
      if (!(error instanceof QuorumError) || !retries || !this.repairs.pending) throw error;
      // The caller's signal or close() end the wait.
      const lifetime = this.lifetime.signal;
      await raceAbort(
        this.repairs.settled(),
        signal ? AbortSignal.any([signal, lifetime]) : lifetime,
      );
      this.assertOpen();
      return this.take(n, signal);
    }
  }

  private take(n: number, signal: AbortSignal | undefined): Promise<bigint[]> {
    if (this.options.strategy === "read-then-write") return seedBatch(this.seed, n, signal);
    return this.range.take(n, signal);
  }

  /**
   * Initialises the counter on a new cluster: 0 and the marker on every node.
   * Needs every node, and is refused when any
   * node's counter already handed out IDs.
   */
  async init(): Promise<void> {
    this.assertOpen();
    await this.group.ready();
    // The cluster's membership (docs/membership.md), as Redlock.init records it.
    await this.group.recordMembership(this.options.checkTimeoutMs);
    const reads = await this.counter.read({ isYes: () => true, stop: "all" });
    this.requireAll("init", reads);
    const holding = this.endpointsWhere(
      reads,
      (outcome) =>
        outcome?.kind === "yes" && isAccepted(outcome.value) && counterValueOf(outcome.value) > 0n,
    );
    if (holding.length > 0) throw new AlreadyInitializedError(this.options.key, holding);
    const writes = await this.group.round((node) => node.evalScript(initScript, this.keys, []), {
      isYes: isAccepted,
      stop: "all",
      timeoutMs: this.options.nodeTimeoutMs,
    });
    const refused = this.endpointsWhere(writes, (outcome) => outcome?.kind === "no");
    if (refused.length > 0) throw new AlreadyInitializedError(this.options.key, refused);
    this.requireAll("init", writes);
  }

  /**
   * Each node as it is now, for IDs: reachable, PING latency, role, run_id,
   * persistence, and `marker`: whether the counter's marker says the node
   * holds its counter (false after a loss, or "suspect" after a restart,
   * until repaired), and `restartUnchecked`: it restarted and no client has
   * checked it since (its marker still says "1"). Never rejects for a
   * failing node: it is reported unreachable, with the reason.
   */
  async status(): Promise<NodeStatus[]> {
    this.assertOpen();
    return Promise.all(
      this.group.nodes.map((node) =>
        readNodeStatus(node, this.options.clock, this.options.checkTimeoutMs, {
          marker: this.keys[1],
          markerOk: (value) => value === markerHeld,
          run: this.keys[3],
        }),
      ),
    );
  }

  /**
   * Stops: calls still waiting reject with `ClosedError`, rounds in flight
   * finish (each bounded by the node timeout), the repairs this instance
   * scheduled run when their delay ends (so a short-lived instance leaves
   * the nodes it found in need of repair repaired: at most `repairDelayMs`,
   * two node timeouts and `limits.closeRepairMarginMs` more), connections
   * redquorum opened are closed.
   */
  close(): Promise<void> {
    // A second call gets the first one's promise: it too resolves only once closed.
    this.closing ??= this.closeNow();
    return this.closing;
  }

  private async closeNow(): Promise<void> {
    this.lifetime.abort(new ClosedError("NextId"));
    await this.range.close();
    // A late reply of an ended round may still report a loss: heard, it
    // is repaired too.
    await this.group.idle();
    await this.repairs.finish(new ClosedError("NextId"));
    await this.group.close();
  }

  /** The endpoints of the nodes whose outcome in `round` passes `test`, in node order. */
  private endpointsWhere<T>(
    round: RoundResult<T>,
    test: (outcome: RoundResult<T>["outcomes"][number]) => boolean,
  ): string[] {
    return this.group.nodes.filter((_, i) => test(round.outcomes[i])).map((node) => node.endpoint);
  }

  private requireAll(operation: string, round: RoundResult<unknown>): void {
    if (nodeErrorsOf(round).length > 0) {
      throw this.group.quorumError(operation, round, this.group.nodes.length);
    }
  }

  private assertOpen(): void {
    if (this.lifetime.signal.aborted) throw new ClosedError("NextId");
  }
}
