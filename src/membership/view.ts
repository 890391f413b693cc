/**
 * A client's view of its cluster's membership (docs/membership.md): read
 * from each node at every check (first contact, reconnects, rechecks), the
 * record with the highest epoch among them. A node list is accepted only if
 * it is that record's member set — the members' ids, whatever the order or
 * the spelling of the addresses — so a majority of the list is a majority
 * of the members, and every vote carries the view's stamp, which nodes that
 * moved on refuse (membership/check.ts).
 */
import { repeatWhile } from "../clock.js";
import { MembershipError, NodeError } from "../errors.js";
import type { RedisNode } from "../node/redis-node.js";
import { quorumOf } from "../quorum/round.js";
import { readRecord, writeRecord } from "./change.js";
import { describeMembers, type MembershipRecord, memberAt, memberById, stampOf } from "./record.js";
import { writeReply } from "./scripts.js";
import { membershipTesting } from "./testing.js";

/**
 * "enforce": the above. "off": no check of the list, each node's votes carry
 * the node's own stamp — the behaviour without membership, kept only so the
 * fault suite can show what the check prevents (never set it in service).
 */
export type MembershipMode = "enforce" | "off";

/** What one node answered at its last check. */
interface NodeMembership {
  readonly id: string | undefined;
  readonly record: MembershipRecord | undefined;
}

export class MembershipView {
  private readonly nodes: readonly RedisNode[];
  private readonly mode: MembershipMode;
  private readonly answers: Array<NodeMembership | undefined>;
  private current: MembershipRecord | undefined;
  /** Operator acts running (`vouching`): while any does, a member is taken back once every other member answered. */
  private vouchers = 0;

  constructor(nodes: readonly RedisNode[], mode?: MembershipMode) {
    this.nodes = nodes;
    this.mode = mode ?? membershipTesting.mode;
    this.answers = new Array(nodes.length).fill(undefined);
  }

  /** The record the view holds (the highest epoch read), undefined while no node had one. */
  get record(): MembershipRecord | undefined {
    return this.current;
  }

  /**
   * Runs `act`, an operator's act on this client's list (the fencing floor
   * raised after more than N - Q nodes lost their memory): meanwhile a
   * member that lost its record is taken back under the view once every
   * other member answered, whatever they hold (`confirmCurrent`). A
   * client's own calls need N - Q + 1 answers holding the record: its list
   * may be one whose nodes were removed and emptied, the cluster living on
   * other nodes.
   */
  async vouching<T>(act: () => Promise<T>): Promise<T> {
    this.vouchers++;
    try {
      return await act();
    } finally {
      this.vouchers--;
    }
  }

  /** The member id node `index` answered at its last check, if any. */
  memberId(index: number): string | undefined {
    return this.answers[index]?.id;
  }

  /**
   * Reads node `index`'s record and checks it against the view and the
   * list; throws `MembershipError` when the list does not fit. A member
   * behind the view (a change that did not reach it) is brought up to it;
   * a node without a record at an address the record gives a member no
   * other node of the list answers as (the same server, restarted without
   * its data) rejoins as that member — its lost memory is then met by the
   * checks that exist (the quarantine, the repairs).
   */
  async check(index: number, timeoutMs: number): Promise<void> {
    const node = this.nodes[index]!;
    let answer: NodeMembership = await readRecord(node, timeoutMs);
    if (this.mode === "off") {
      this.answers[index] = answer;
      node.membershipStamp = stampOf(answer.record);
      return;
    }
    // A node this client found holding the record before lost it: no
    // init's write is on its way there.
    if (!answer.record && this.current?.epoch === 1 && !this.answers[index]?.record) {
      answer = await this.firstRecordWritten(index, answer, timeoutMs);
    }
    const { record } = answer;
    if (record) {
      if (this.current && record.clusterId !== this.current.clusterId) {
        throw this.twoClusters(index, record);
      }
      if (!this.current || record.epoch > this.current.epoch) {
        for (const other of this.adopt(record)) await this.requireFirstRecord(other, timeoutMs);
      }
    }
    if (this.current && (!record || record.epoch < this.current.epoch)) {
      answer = await this.catchUp(index, answer, this.current, timeoutMs);
    }
    // The view as it stands now: taking a node back may have read a newer one.
    const view = this.current;
    this.answers[index] = answer;
    if (view) this.requireMember(index, view);
    node.membershipStamp = stampOf(view);
  }

  /**
   * What init just wrote: `record` on every node, node i holding member id
   * `ids[i]` — known without reading it back, so the nodes vote with its
   * stamp from the next call on.
   */
  learn(record: MembershipRecord, ids: ReadonlyArray<string | undefined>): void {
    if (this.mode === "off" || (this.current && this.current.epoch >= record.epoch)) return;
    this.current = record;
    this.nodes.forEach((node, index) => {
      this.answers[index] = { id: ids[index], record };
      node.membershipStamp = stampOf(record);
    });
  }

  /**
   * A check of a node found a newer record: it is the view now, and every
   * node votes with it. Returns the nodes checked before, without a record,
   * at no member's address, that a first record may be on its way to (the
   * caller reads them again: `requireFirstRecord`).
   */
  private adopt(record: MembershipRecord): number[] {
    this.current = record;
    if (this.nodes.length !== record.members.length) {
      throw new MembershipError(
        this.nodes.map((node) => node.endpoint),
        `the node list has ${this.nodes.length} nodes but cluster ${record.clusterId} ` +
          `(epoch ${record.epoch}) has ${record.members.length} members: ${describeMembers(record)}. ` +
          "Give every client the cluster's member list (`redquorum status` shows it), " +
          "or change the members with `redquorum members`",
      );
    }
    for (const node of this.nodes) node.membershipStamp = stampOf(record);
    // Nodes checked before this record was read: each must be a member of
    // it, or (without a record) at a member's address, to rejoin when it
    // is checked again (its votes are refused until then: no stamp).
    const unresolved: number[] = [];
    this.answers.forEach((answer, index) => {
      if (!answer) return;
      if (answer.id !== undefined && answer.record) this.requireMember(index, record);
      else if (!memberAt(record, this.nodes[index]!.endpoint)) {
        // A first record an init is writing may not have reached it yet,
        // at an address spelled otherwise than the record's.
        if (record.epoch !== 1) throw this.notMember(index, record, "list");
        unresolved.push(index);
      }
    });
    return unresolved;
  }

  /**
   * Node `index`, checked before the first record was read, held none and
   * is at no member's address: read again while the record may be on its
   * way (`firstRecordWritten`); it must then hold it as a member, or the
   * list is not the members'. A node that does not answer now is as one
   * not checked yet (its vote, refused for the stamp, checks it): the
   * check that read the record is another node's, which it must not fail.
   */
  private async requireFirstRecord(index: number, timeoutMs: number): Promise<void> {
    const view = this.current!;
    let answer: NodeMembership;
    try {
      // Read again now: what it answered at its check may be old already.
      answer = await readRecord(this.nodes[index]!, timeoutMs);
      if (!answer.record) answer = await this.firstRecordWritten(index, answer, timeoutMs);
    } catch (error) {
      if (error instanceof MembershipError) throw error;
      this.answers[index] = undefined;
      return;
    }
    if (!answer.record) throw this.notMember(index, view, "list");
    if (answer.record.clusterId !== view.clusterId) throw this.twoClusters(index, answer.record);
    this.answers[index] = answer;
    this.requireMember(index, view);
  }

  /**
   * Node `index` holds no record, and the view is a first record (epoch 1):
   * an init may be writing it, to one node first and then to the rest
   * (change.ts, recordMembership), and this node be one of the rest. Taken
   * back now as a member that lost its memory, it would sit out the restart
   * quarantine with its counters unknown; a majority taken back so, fenced
   * grants would wait for `redquorum fencing-floor`. So while another node
   * answers without a record too (and one with it: `anotherLacksRecord`),
   * this one is read again (for at most `timeoutMs`) until it holds one.
   * Alone without one, it lost its memory or is an init's last write: one node taken back is what one loss costs,
   * and a node that lost its memory waits no longer than it must.
   */
  private async firstRecordWritten(
    index: number,
    answer: NodeMembership,
    timeoutMs: number,
  ): Promise<NodeMembership> {
    const node = this.nodes[index]!;
    const startedMs = performance.now();
    if (!(await this.anotherLacksRecord(index, timeoutMs))) return answer;
    return repeatWhile(
      () => readRecord(node, timeoutMs),
      (read) => !read.record,
      Math.max(0, timeoutMs - (performance.now() - startedMs)),
      answer,
    );
  }

  /**
   * Whether the other nodes look like an init's writes under way: one
   * answers without a record and one with (as soon as both are seen: a
   * stalled node costs no timeout then). When none of those that answer
   * holds one, no init is writing (it writes one node first, and this
   * client read a record somewhere): the list's nodes all lost it, or were
   * removed and emptied, which `confirmCurrent` tells the caller at once.
   */
  private anotherLacksRecord(index: number, timeoutMs: number): Promise<boolean> {
    return new Promise((resolve) => {
      let waiting = this.nodes.length - 1;
      let lacking = false;
      let holding = false;
      const settle = () => {
        if (--waiting === 0) resolve(lacking && holding);
      };
      if (waiting === 0) resolve(false);
      this.nodes.forEach((other, otherIndex) => {
        if (otherIndex === index) return;
        readRecord(other, timeoutMs).then(
          (read) => {
            if (read.record) holding = true;
            else lacking = true;
            if (lacking && holding) resolve(true);
            settle();
          },
          () => settle(),
        );
      });
    });
  }

  /** What node `index` held at its last check: the stamp of its record ("" for none). */
  heldStamp(index: number): string | undefined {
    const answer = this.answers[index];
    return answer && stampOf(answer.record);
  }

  /**
   * Node `index` holds no record, or an older one, than the view: a member
   * is brought up to the view (compare-and-set from what it holds, so a
   * change running meanwhile wins); a node without an id at a member's
   * recorded address rejoins as that member. Anything else is left as it
   * is: `requireMember` refuses it.
   */
  private async catchUp(
    index: number,
    answer: NodeMembership,
    view: MembershipRecord,
    timeoutMs: number,
  ): Promise<NodeMembership> {
    const node = this.nodes[index]!;
    let id = answer.id;
    if (id === undefined) {
      // At a member's recorded address, or where this client itself last
      // found that member (a proxy, another spelling): the same endpoint
      // answered as the member before, and answers now with no memory.
      const before = this.answers[index]?.id;
      const member =
        memberAt(view, node.endpoint) ??
        (before === undefined ? undefined : memberById(view, before));
      const answeredElsewhere = this.answers.some(
        (other, otherIndex) => otherIndex !== index && other?.id === member?.id,
      );
      if (!member || answeredElsewhere) return answer;
      id = member.id;
    } else if (
      !memberById(view, id) ||
      (answer.record && answer.record.clusterId !== view.clusterId)
    ) {
      return answer;
    }
    // A node without an id of its own rejoins as a node joining does (its
    // marker "lost:", its counters unknown until repaired, the restart
    // quarantine counted from now, its memory identity moved), whatever its
    // marker says: it may be the member's server restarted empty or
    // flushed, a new server that a change named and has not joined yet, or
    // another memory altogether (another deployment's data, a copy from
    // before the members were recorded). Left to a quarantine judged from
    // its server's start, a new server up longer than maxTtlMs voted at once
    // on locks the member it replaced held; one whose marker said it was in
    // service voted with fencing and ID counters that were not the
    // cluster's. A member with its own id was one all along (a node added
    // again gets a new id: change.ts), and only missed the record.
    const rejoins = answer.id === undefined;
    if (rejoins) {
      const newer = await this.confirmCurrent(index, view, timeoutMs);
      if (newer) return this.catchUp(index, answer, newer, timeoutMs);
    }
    // What it may have promised or accepted for a change of members, and
    // forgotten (choose.ts), cannot be told from this client's list, which
    // may be older than the members: it is marked without an epoch, which a
    // change (whose list is checked against the record) works out.
    const status = await writeRecord(
      node,
      stampOf(answer.record),
      view,
      rejoins ? id : "",
      rejoins,
      timeoutMs,
      rejoins,
    );
    if (status === writeReply.conflict) return readRecord(node, timeoutMs);
    return { id, record: view };
  }

  /**
   * Before node `index`, which lost its memory, is taken back under `view`:
   * `view` must still be the members' record. A change to the next epoch
   * first made a majority of `view`'s members accept it, and the node taken
   * back may have been one of them: its loss took that away, and written
   * back at `view`'s epoch it would make one majority of the old members
   * with those the change never reached, beside the new members' majority.
   * So N - Q + 1 of the other members that hold the record must answer (N
   * members, a majority Q; one that lost its record too may have lost the
   * later one with it): at least one of any Q - 1 of them, so at least one
   * that accepted or holds a later record, if there is one. Or, while an
   * operator vouches for the list, every other member (below). Answers the newer record read
   * (adopted as the view: the node is then taken back under it, if a member
   * of it); throws a `NodeError` when too few answer: not a configuration
   * problem but a wait (the node stays out, and its next vote checks it
   * again), so it neither refuses the client for good (a `MembershipError`
   * of scope "list" would, and one found at first contact of any scope) nor
   * excludes the node for a recheck interval once they answer. A member that
   * accepted a change not written on it yet (its stamp "changing") may hold
   * the read's only trace of a chosen record that the lost node held
   * before its loss: taken back at `view`'s epoch, the node made one
   * majority of the old members with a member the change never reached,
   * beside the new members' majority (both lists held one lock). So the
   * node waits while any member read is changing (a NodeError) until that
   * change is written there; a change run again goes on without the node
   * (change.ts), so the wait ends. What this cannot see: a change whose
   * accepts are landing as these reads do, on members they have not reached yet.
   */
  private async confirmCurrent(
    index: number,
    view: MembershipRecord,
    timeoutMs: number,
  ): Promise<MembershipRecord | undefined> {
    const endpoint = this.nodes[index]!.endpoint;
    const needed = this.nodes.length - quorumOf(this.nodes.length) + 1;
    const reads = await Promise.all(
      this.nodes.map((node, other) =>
        other === index ? undefined : readRecord(node, timeoutMs).catch(() => undefined),
      ),
    );
    let answered = 0;
    /** Answers that hold this cluster's record: a node that lost its record too may have lost the newer one with it. */
    let holding = 0;
    let newer: MembershipRecord | undefined;
    const changing: string[] = [];
    for (const [other, read] of reads.entries()) {
      if (!read) continue;
      // Changing from the view's epoch (one behind it accepted the view's
      // own record, which the node is then taken back under).
      if (read.changing && read.record && read.record.epoch >= view.epoch) {
        changing.push(this.nodes[other]!.endpoint);
      }
      answered++;
      const { record } = read;
      if (!record || record.clusterId !== view.clusterId) continue;
      holding++;
      if (record.epoch <= view.epoch) continue;
      if (!newer || record.epoch > newer.epoch) newer = record;
    }
    if (newer) {
      this.adopt(newer);
      return newer;
    }
    if (changing.length > 0) {
      throw new NodeError(
        endpoint,
        new Error(
          `lost its membership record while a change of members is under way (${changing.join(", ")} ` +
            `accepted the next record, not yet written there): it is taken back once that change ` +
            "is written (if the change stopped, run it again)",
        ),
      );
    }
    // N - Q + 1 answers that hold the record: with any number of other
    // nodes that lost theirs, they include a member that accepted or holds
    // a chosen later record, if there is one (the first acceptor to lose
    // its memory and be taken back was seen so, by an acceptor that still
    // remembered; a member behind the view accepted nothing after it).
    // While at most N - Q members lost their memory, the others that hold
    // it are that many. Beyond, the node waits for the operator's word
    // that this list is the cluster's (`vouching`: raiseFencingFloor,
    // which every other member's answer then suffices for). Taken back on
    // every other member's answer alone, as before, two members that lost
    // their memory while a change was written could make one majority of
    // the old members with the third, beside the new members' majority;
    // and a client left on a list whose nodes were removed and emptied
    // (one of them, replaced while it was down, back with its old record)
    // took them back as a cluster of its own beside the real one. A lone
    // member has no other to answer: it is never taken back (its list may
    // be one a change left).
    const everyOtherAnswered = this.nodes.length > 1 && answered === this.nodes.length - 1;
    const vouched =
      everyOtherAnswered && (this.vouchers > 0 || membershipTesting.takeBackEmptyLists);
    if (holding >= needed || vouched) return undefined;
    if (everyOtherAnswered && holding === 0) {
      throw new NodeError(
        endpoint,
        new Error(
          `lost its membership record, and so did every other node of the list: no node holds ` +
            `cluster ${view.clusterId}'s record. Either the list's nodes were removed from the ` +
            "cluster and emptied (this client missed the change: give it the cluster's members), " +
            "or every node of the cluster lost its memory (see the operations guide, " +
            '"Nodes without persistence")',
        ),
      );
    }
    // Every other member answered and too few hold the record: more than
    // N - Q lost their memory, which only the operator's act gets past.
    // Fewer answered: the others may still hold it, and are waited for.
    const spare = this.nodes.length - quorumOf(this.nodes.length);
    throw new NodeError(
      endpoint,
      new Error(
        `lost its membership record; it is taken back once ${needed} of the other ` +
          `members holding the record confirm epoch ${view.epoch} is still the cluster's, ` +
          `and ${holding} did (${answered} answered)` +
          (everyOtherAnswered
            ? `: more than ${spare} of the ${this.nodes.length} members lost their memory, and ` +
              "only the operator takes them back: `redquorum fencing-floor` (see the operations " +
              'guide, "A majority of nodes lost their disks")'
            : ": it waits for the others to answer (if a member that does not answer is gone " +
              'for good, see the operations guide, "A member is gone for good while another ' +
              'lost its memory")'),
      ),
    );
  }

  /** Node `index` must answer as a member of `view`, and as no other node of the list does. */
  private requireMember(index: number, view: MembershipRecord): void {
    const endpoint = this.nodes[index]!.endpoint;
    const { id, record } = this.answers[index]!;
    const where = `cluster ${view.clusterId} (epoch ${view.epoch}; members ${describeMembers(view)})`;
    if (id === undefined || !record) throw this.notMember(index, view, "node");
    if (record.clusterId !== view.clusterId) throw this.twoClusters(index, record);
    if (!memberById(view, id)) {
      throw new MembershipError(
        [endpoint],
        `${endpoint} (member id ${id}) is not a member of ${where}: ` +
          "it was removed, or the node list predates a change of members. Reload the node list",
      );
    }
    // A member behind the view that could not be brought up to it votes
    // with a stamp it refuses, until a change step reaches it.
    const twin = this.answers.findIndex(
      (other, otherIndex) => otherIndex !== index && other?.id === id,
    );
    if (twin >= 0) {
      const other = this.nodes[twin]!.endpoint;
      throw new MembershipError(
        [other, endpoint],
        `${other} and ${endpoint} both answer as member ${id} of cluster ${view.clusterId}: ` +
          "one server's data copied to another (counting both would fake a majority). Remove one from the list",
      );
    }
  }

  /** Node `index` holds no record and cannot rejoin by itself. */
  private notMember(
    index: number,
    view: MembershipRecord,
    scope: "list" | "node",
  ): MembershipError {
    const endpoint = this.nodes[index]!.endpoint;
    return new MembershipError(
      [endpoint],
      `${endpoint} is not a member of cluster ${view.clusterId} (epoch ${view.epoch}; members ` +
        `${describeMembers(view)}): it holds no membership record ` +
        "(a new node, or one that lost its memory at an address the record does not give). " +
        `Add it with \`redquorum members add redis://${endpoint}\` or \`redquorum members replace <old URL> redis://${endpoint}\` (--nodes: the members), ` +
        "or remove it from the node list",
      scope,
    );
  }

  private twoClusters(index: number, record: MembershipRecord): MembershipError {
    const view = this.current!;
    const endpoint = this.nodes[index]!.endpoint;
    const others = this.nodes
      .filter(
        (_, otherIndex) =>
          otherIndex !== index && this.answers[otherIndex]?.record?.clusterId === view.clusterId,
      )
      .map((node) => node.endpoint);
    return new MembershipError(
      [endpoint, ...others],
      `the node list mixes two clusters: ${endpoint} belongs to cluster ${record.clusterId}, ` +
        `${others.join(", ") || "other nodes"} to cluster ${view.clusterId}. Give every client one cluster's members`,
    );
  }
}
