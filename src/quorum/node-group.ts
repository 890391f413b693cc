/**
 * The N independent masters behind a Redlock or NextId: the majority size,
 * the one round every operation runs, and when each node is (re)checked
 * before its votes count (first contact, reconnects, the recheck interval),
 * with what a failed check does (refuse the group, or take the node out of
 * service). What a check checks is src/node/admission.ts.
 */
import { MembershipError, NodeConfigurationError, NodeError, QuorumError } from "../errors.js";
import { InFlight } from "../in-flight.js";
import { type RecordedMembership, recordMembership } from "../membership/change.js";
import { membershipRefusalOf } from "../membership/check.js";
import { changingPrefix } from "../membership/record.js";
import type { MembershipView } from "../membership/view.js";
import { Admission, type AdmissionOptions } from "../node/admission.js";
import type { NodeInfo } from "../node/inspect.js";
import type { RedisNode } from "../node/redis-node.js";
import type { Observer } from "../observe.js";
import {
  nodeErrorsOf,
  quorumOf,
  type RoundOptions,
  type RoundResult,
  runRound,
  settledRound,
} from "./round.js";

export type { NodeWarning } from "../node/admission.js";

export interface NodeGroupOptions extends AdmissionOptions {
  /**
   * Longest time a node's checks are trusted, in milliseconds: a node is
   * checked again before its next call after this long, and after every
   * reconnect (a new connection may be a restarted server).
   */
  recheckIntervalMs: number;
  /** How long first contact waits for the other checks once a majority passed (a node timeout). */
  graceMs: number;
  /** Told when a node's checks fail, exclude it, or pass again. */
  observer?: Observer;
}

export interface GroupRoundOptions<T> extends RoundOptions<T> {
  /**
   * The answer of a node this round does not call (a release that knows
   * the node holds nothing of ours, a repair of another node); undefined:
   * the round calls it. A skipped node waits for no check.
   */
  readonly skip?: (index: number) => Promise<T> | undefined;
}

/** The group of nodes one Redlock or NextId votes on. */
export class NodeGroup {
  readonly nodes: readonly RedisNode[];
  readonly quorum: number;
  private readonly options: NodeGroupOptions;
  private readonly admission: Admission;
  private readonly pendingChecks: Array<Promise<void> | undefined>;
  private refusal: NodeConfigurationError | undefined;
  private firstContact: Promise<void> | undefined;
  /** Per node: the connection epoch and time of its last passed check. */
  private readonly checkedEpoch: number[];
  private readonly checkedAtMs: number[];
  /** Per node: why a later check took it out of service (until the next check passes). */
  private readonly excluded: Array<NodeError | undefined>;
  /** Per node: the connection epoch of the check that excluded it. */
  private readonly excludedEpoch: number[];
  /** Calls still running after their round ended early; `close()` lets them finish. */
  private readonly inFlight = new InFlight();

  constructor(nodes: readonly RedisNode[], options: NodeGroupOptions) {
    this.nodes = nodes;
    this.quorum = quorumOf(nodes.length);
    this.options = options;
    this.admission = new Admission(nodes, options);
    this.pendingChecks = new Array(nodes.length).fill(undefined);
    this.checkedEpoch = new Array(nodes.length).fill(-1);
    this.checkedAtMs = new Array(nodes.length).fill(Number.NEGATIVE_INFINITY);
    this.excluded = new Array(nodes.length).fill(undefined);
    this.excludedEpoch = new Array(nodes.length).fill(-1);
  }

  /**
   * Before the first operation: inspect every node at once and wait for
   * every check (each bounded by `checkTimeoutMs`), so that two addresses of
   * one server are refused before any key is written — but once a majority
   * passed, no longer than `graceMs` for the rest.
   */
  async ready(): Promise<void> {
    if (this.refusal) throw this.refusal;
    this.firstContact ??= new Promise<void>((resolve) => {
      // Every check, but a stalled node costs one node timeout, not
      // checkTimeoutMs: once a majority passed, the rest get `graceMs`
      // more. A node not checked by then is checked before its first vote
      // counts (and a refusal found then stops every operation).
      let passed = 0;
      let settled = 0;
      let grace: ReturnType<typeof setTimeout> | undefined;
      const done = () => {
        clearTimeout(grace);
        resolve();
      };
      for (let i = 0; i < this.nodes.length; i++) {
        this.check(i)
          .then(
            () => {
              passed++;
              if (passed === this.quorum && settled + 1 < this.nodes.length) {
                grace = setTimeout(done, this.options.graceMs);
              }
            },
            () => {},
          )
          .finally(() => {
            settled++;
            if (settled === this.nodes.length) done();
          });
      }
    });
    await this.firstContact;
    if (this.refusal) throw this.refusal;
  }

  /**
   * Checks now every node whose last check is not current (out of service,
   * or due a recheck), without waiting for them: the node states (and what
   * follows them, the ID server's node metrics) track the nodes even while
   * no round uses them. After first contact only; `close()` waits for them.
   */
  refresh(): void {
    if (!this.firstContact || this.refusal) return;
    const now = performance.now();
    for (let i = 0; i < this.nodes.length; i++) {
      if (!this.isCurrent(i, now)) this.inFlight.add(this.check(i).catch(() => {}));
    }
  }

  /**
   * Checks every node again now, whatever its last check, and waits for
   * them all (a node that fails its check is left out as it would be by a
   * round): an operator's act that must meet the nodes as they are now.
   */
  async checkAll(): Promise<void> {
    this.checkedAtMs.fill(Number.NEGATIVE_INFINITY);
    await Promise.allSettled(this.nodes.map((_, index) => this.check(index)));
  }

  /** The refusal found by a late check, if any (operations then stop). */
  get refused(): NodeConfigurationError | undefined {
    return this.refusal;
  }

  /**
   * `call` on every node `options.skip` leaves, each once it may vote
   * (checked, or being checked again on the same connection).
   */
  async round<T>(
    call: (node: RedisNode, index: number) => Promise<T>,
    options: GroupRoundOptions<T>,
  ): Promise<RoundResult<T>> {
    const now = performance.now();
    const { skip } = options;
    const result = await runRound(
      this.nodes,
      this.quorum,
      (node, index) => {
        const skipped = skip?.(index);
        if (skipped) return skipped;
        return this.vote(node, index, now, call);
      },
      options,
    );
    const { done } = result;
    if (done !== settledRound) {
      this.inFlight.add(done);
    }
    return result;
  }

  /** The membership the nodes record, as this group's checks read it. */
  get membership(): MembershipView {
    return this.admission.membership;
  }

  /**
   * Records the cluster's membership if the nodes hold none yet (every node
   * must answer), or checks the list against the one they hold; then every
   * node is checked again before its next vote, so the votes carry the
   * record's stamp from the first (none is refused for want of it: a node
   * whose record the checks have not read yet refuses once, and is checked
   * again).
   */
  async recordMembership(timeoutMs: number): Promise<RecordedMembership> {
    // Nodes that lost their records (a flush, a restart without data) while
    // this client knows the cluster's record are brought back to it by
    // their next check (at their recorded address): a new cluster id
    // written over them now would refuse this client for good.
    const known = this.membership.record;
    if (known) return { record: known };
    const recorded = await recordMembership(this.nodes, timeoutMs);
    // Written just now on every node: no need to read it back before voting.
    if (recorded.record && recorded.ids) this.membership.learn(recorded.record, recorded.ids);
    return recorded;
  }

  /**
   * `call` on node \`index\` once it may vote. A vote the node refused for
   * its membership (the cluster's members changed since the last check, or
   * it gained its first record) sends every node to be checked again before
   * its next vote: the checks read the new record, and either the list fits
   * it (votes carry its stamp from then on) or the client is refused.
   */
  private vote<T>(
    node: RedisNode,
    index: number,
    now: number,
    call: (node: RedisNode, index: number) => Promise<T>,
  ): Promise<T> {
    return this.voteChecked(node, index, now, call).catch(async (error: unknown) => {
      const stamp = membershipRefusalOf(error);
      if (stamp === undefined) throw error;
      this.checkedAtMs.fill(Number.NEGATIVE_INFINITY);
      // Checked again now: if the list fits the node's record, the vote is
      // asked again with its stamp (a cluster recorded while this client
      // held a lock must not cost it the lock's next extension). Asked again
      // also when the node's stamp was ours before this check: the check
      // of another node that refused the same round may have read the
      // record first, and a record read on one node stamps every node's
      // votes (membership/view.ts, adopt); this vote went out before.
      const before = node.membershipStamp;
      await this.check(index);
      const current = node.membershipStamp;
      // Asked again too when the node refused for holding no record and the
      // check found it holding the one the vote carries: a first record
      // still being written when the vote went out has reached it since
      // (membership/view.ts), or the check took the node back (it then
      // refuses from its quarantine, saying so).
      const reached = stamp === "" && this.membership.heldStamp(index) === current;
      if (current === stamp || current !== before || reached) {
        return call(node, index);
      }
      throw new NodeError(
        node.endpoint,
        new Error(
          stamp.startsWith(changingPrefix)
            ? "refused the vote: a change of members is under way on this node (it votes again " +
                "once the change is written; if none is running, run the last change again to " +
                "complete it: `redquorum members show` lists the nodes)"
            : `refused the vote: the node's membership is ${stamp || "none"}, ` +
                `this client's ${current || "none"}`,
        ),
      );
    });
  }

  private voteChecked<T>(
    node: RedisNode,
    index: number,
    now: number,
    call: (node: RedisNode, index: number) => Promise<T>,
  ): Promise<T> {
    if (this.isCurrent(index, now)) return call(node, index);
    // Same connection, checks only old: the node keeps voting while it
    // is checked again (a configuration it has now can only have been
    // set at runtime, and the check takes it out once it has read it),
    // but not once its last passed check is older than one interval and
    // one check timeout: rechecks that keep failing (a timeout, an ACL
    // change) must not leave it voting for good, since what the checks
    // write lapses (lock/horizon.ts: the client's maxTtlMs record).
    if (this.isCheckedOnEpoch(index) && !this.isOverdue(index, now)) {
      this.check(index).catch(() => {});
      return call(node, index);
    }
    return this.check(index).then(() => call(node, index));
  }

  /**
   * The error of a round that did not get `needed` yes votes (a majority
   * unless said otherwise), with each failing node's error, then
   * `answerErrors`: what the owner read in nodes' answers (a node excluded
   * until repaired).
   */
  quorumError(
    operation: string,
    round: RoundResult<unknown>,
    needed = this.quorum,
    answerErrors: readonly NodeError[] = [],
  ): QuorumError {
    const errors = [...nodeErrorsOf(round), ...answerErrors];
    return new QuorumError(operation, needed, this.nodes.length, round.yesCount, errors);
  }

  /** What node `index`'s last passed check read. */
  info(index: number): NodeInfo | undefined {
    return this.admission.info(index);
  }

  /**
   * Resolves once no call of an ended round is still running (each is
   * bounded by its timeout): a late reply may still report a node that
   * needs repair, which a closing owner must hear before it stops
   * scheduling repairs.
   */
  async idle(): Promise<void> {
    await this.inFlight.settled();
  }

  /** Lets calls still in flight finish (each is bounded by its timeout), then closes the nodes. */
  async close(): Promise<void> {
    await this.idle();
    await Promise.allSettled(this.nodes.map((node) => node.close()));
  }

  /**
   * Whether node `index` may vote without another check: checked on its
   * current connection (a reconnect may reach a restarted server, with
   * another run_id, persistence or role) within the recheck interval.
   */
  private isCurrent(index: number, now: number): boolean {
    return (
      this.isCheckedOnEpoch(index) &&
      now - this.checkedAtMs[index]! < this.options.recheckIntervalMs
    );
  }

  /** Whether node `index`'s last passed check is older than one interval and one check timeout. */
  private isOverdue(index: number, now: number): boolean {
    const { recheckIntervalMs, checkTimeoutMs } = this.options;
    return now - this.checkedAtMs[index]! >= recheckIntervalMs + checkTimeoutMs;
  }

  /** Whether node `index` passed its last check on the connection it uses now. */
  private isCheckedOnEpoch(index: number): boolean {
    return (
      this.excluded[index] === undefined && this.checkedEpoch[index] === this.nodes[index]!.epoch
    );
  }

  /**
   * Checks node `index` (concurrent calls share one check: `Admission`);
   * then it may vote. On first contact a configuration problem refuses the
   * whole group; found later, it takes this node out of service, and its
   * calls fail with the reason until a check passes again (tried once per
   * recheck interval, and on every new connection: one may reach another
   * server at the address, say the member restarted with its configuration
   * fixed, or back after a stranger answered there while it was down).
   */
  private check(index: number): Promise<void> {
    const startedMs = performance.now();
    const epoch = this.nodes[index]!.epoch;
    if (
      this.excluded[index] &&
      this.excludedEpoch[index] === epoch &&
      startedMs - this.checkedAtMs[index]! < this.options.recheckIntervalMs
    ) {
      return Promise.reject(this.excluded[index]);
    }
    const pending =
      this.pendingChecks[index] ??
      this.admission
        .check(index, this.checkedEpoch[index]!)
        .then(
          () => {
            this.excluded[index] = undefined;
            this.checkedEpoch[index] = epoch;
            this.checkedAtMs[index] = startedMs;
            this.options.observer?.node(this.nodes[index]!.endpoint, "in service", "checks passed");
          },
          (error: unknown) => {
            // Never passed a check and never excluded: this is first contact.
            const first = this.checkedEpoch[index] === -1 && !this.excluded[index];
            const endpoint = this.nodes[index]!.endpoint;
            const reason = error instanceof Error ? error.message : String(error);
            this.options.observer?.node(
              endpoint,
              error instanceof NodeConfigurationError ? "excluded" : "unreachable",
              reason,
            );
            if (error instanceof NodeConfigurationError) {
              // A list that does not fit the cluster's members stops the
              // client whenever it is found: after a change of members, an
              // old list must be reloaded, not voted with.
              if (first || (error instanceof MembershipError && error.scope === "list")) {
                this.refuse(error);
              }
              const node = this.nodes[index]!;
              this.excluded[index] = new NodeError(node.endpoint, error);
              this.excludedEpoch[index] = epoch;
              this.checkedAtMs[index] = startedMs;
              throw this.excluded[index];
            }
            throw error;
          },
        )
        .finally(() => {
          this.pendingChecks[index] = undefined;
        });
    this.pendingChecks[index] = pending;
    return pending;
  }

  private refuse(error: NodeConfigurationError): never {
    this.refusal ??= error;
    throw new NodeError(error.endpoints.at(-1) ?? "", error);
  }
}
