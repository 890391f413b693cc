/**
 * Writing the membership (docs/membership.md): the first record of a
 * cluster (init), and a change of one member — add, remove, or replace —
 * while clients keep running. Every write is a compare-and-set from the
 * stamp read, so a second run of a step that is done is a no-op and two
 * changes at once cannot both land.
 */
import { repeatWhile } from "../clock.js";
import { InvalidArgumentError, MembershipError } from "../errors.js";
import { parseInfo } from "../node/inspect.js";
import type { RedisNode } from "../node/redis-node.js";
import { quorumOf } from "../quorum/round.js";
import { keysHeld, requireIndependentMaster, requireRerunList } from "./change-checks.js";
import {
  AnotherRecordWritten,
  chooseRecord,
  type MembershipRuntime,
  systemRuntime,
} from "./choose.js";
import {
  changingPrefix,
  describeMembers,
  formatRecord,
  type Member,
  type MembershipRecord,
  memberAt,
  memberById,
  newId,
  parseRecord,
  stampOf,
} from "./record.js";
import {
  markOf,
  readKeys,
  resolveMarkScript,
  unknownMark,
  writeRecordScript,
  writeReply,
} from "./scripts.js";

/** What one node holds: its member id and record, or why it could not be read. */
export interface NodeMembershipReport {
  readonly endpoint: string;
  readonly id?: string;
  readonly record?: MembershipRecord;
  /**
   * The node accepted a change of members not written on it yet: it
   * refuses every vote until that change, run again, is written.
   */
  readonly changing?: boolean;
  /**
   * It lost its memory as a member, and takes no part in changes until a
   * record of this epoch is written on it.
   */
  readonly mark?: number;
  readonly error?: string;
}

/** What one node holds of the membership (`readRecord`). */
export interface NodeRecord {
  readonly id: string | undefined;
  readonly record: MembershipRecord | undefined;
  /** It accepted a change not yet written on it (it refuses every vote). */
  readonly changing: boolean;
  /** It lost its memory as a member: the epoch its mark names (scripts.ts, writeRecordScript). */
  readonly mark: number | undefined;
}

/**
 * The epoch up to which a member that lost its memory may have promised or
 * accepted a change (choose.ts): its mark. Read from `answers`, fresh reads
 * of the nodes of a list checked to be the members of `view` (a change's:
 * an older list would answer with older epochs), at least a majority of
 * which must hold the cluster's record (undefined otherwise: it cannot be
 * told). A record chosen before the loss was accepted by a majority, which
 * meets those answers at a member that holds it, or the record before it
 * with the change accepted (changing), or (having lost its memory since)
 * a mark at least that epoch: so that record's epoch is at most the
 * highest of those plus one, and a change after it at most plus two.
 */
export function forgottenUpTo(
  answers: ReadonlyArray<
    | { readonly record?: MembershipRecord | undefined; readonly mark?: number | undefined }
    | undefined
  >,
  view: MembershipRecord,
): number | undefined {
  let held = 0;
  let highest = 0;
  for (const answer of answers) {
    // A member marked without knowing up to when tells nothing: left out.
    if (answer?.record?.clusterId !== view.clusterId || answer.mark === unknownMark) continue;
    held++;
    highest = Math.max(highest, answer.record.epoch, (answer.mark ?? 0) - 1);
  }
  return held >= quorumOf(view.members.length) ? highest + 2 : undefined;
}

/**
 * A node's member id and record (one MGET); rejects with the node's error,
 * or a `MembershipError` for a record this version cannot read.
 */
export async function readRecord(node: RedisNode, timeoutMs: number): Promise<NodeRecord> {
  const reply = await node.command(["MGET", ...readKeys], { timeoutMs });
  const [id, text, stamp, proposal] = Array.isArray(reply) ? reply : [];
  try {
    return {
      id: typeof id === "string" && id !== "" ? id : undefined,
      record: parseRecord(typeof text === "string" ? text : undefined),
      changing: typeof stamp === "string" && stamp.startsWith(changingPrefix),
      mark: markOf(proposal),
    };
  } catch (error) {
    throw new MembershipError([node.endpoint], `${node.endpoint}: ${(error as Error).message}`);
  }
}

async function readNode(node: RedisNode, timeoutMs: number): Promise<NodeMembershipReport> {
  try {
    const { id, record, changing, mark } = await readRecord(node, timeoutMs);
    return {
      endpoint: node.endpoint,
      ...(id ? { id } : {}),
      ...(record ? { record } : {}),
      ...(changing ? { changing } : {}),
      ...(mark === undefined ? {} : { mark }),
    };
  } catch (error) {
    return {
      endpoint: node.endpoint,
      error: error instanceof Error ? error.message : String(error),
    };
  }
}

/** A node that answered holding no record and no member id: empty, or a member that lost its memory. */
function holdsNothing(report: NodeMembershipReport): boolean {
  return !report.error && report.id === undefined && report.record === undefined;
}

/** Every node's id and record, read at once. */
export function readMembership(
  nodes: readonly RedisNode[],
  timeoutMs: number,
): Promise<NodeMembershipReport[]> {
  return Promise.all(nodes.map((node) => readNode(node, timeoutMs)));
}

/** The record with the highest epoch among `reports`; throws when they name two clusters. */
export function viewOf(reports: readonly NodeMembershipReport[]): MembershipRecord | undefined {
  let view: MembershipRecord | undefined;
  for (const { record, endpoint } of reports) {
    if (!record) continue;
    if (view && record.clusterId !== view.clusterId) {
      const ofView = reports
        .filter((r) => r.record?.clusterId === view!.clusterId)
        .map((r) => r.endpoint);
      throw new MembershipError(
        [endpoint, ...ofView],
        `the nodes belong to two clusters: ${endpoint} to ${record.clusterId}, ` +
          `${ofView.join(", ")} to ${view.clusterId}`,
      );
    }
    if (!view || record.epoch > view.epoch) view = record;
  }
  return view;
}

/**
 * The record written on `node`, compare-and-set (scripts.ts,
 * writeRecordScript): its writeReply. `join`: the node joins as one that
 * lost its memory (a node taken back by its address too: view.ts).
 */
export async function writeRecord(
  node: RedisNode,
  expected: string,
  record: MembershipRecord,
  id: string,
  join: boolean,
  timeoutMs: number,
  /** The node may be a member that lost its memory: marked until a change works its mark out (choose.ts). */
  mayHaveForgotten = false,
): Promise<number> {
  const reply = await node.command(
    [
      "EVAL",
      writeRecordScript.source,
      "0",
      expected,
      stampOf(record),
      formatRecord(record),
      id,
      join ? "join" : "",
      mayHaveForgotten ? "1" : "",
    ],
    { timeoutMs },
  );
  const [status] = Array.isArray(reply) ? reply : [];
  return typeof status === "number" ? status : writeReply.conflict;
}

/**
 * The first record of a cluster, written on every node of the list: only
 * when every node answers and none holds a record (two inits with different
 * lists then cannot both succeed: a node they share takes one record only).
 * A cluster with a record already is checked against the list instead.
 * Answers the record, or undefined (with `reason`) when it wrote none.
 */
export interface RecordedMembership {
  /** The record the nodes hold now; undefined when none could be written (`reason`). */
  readonly record: MembershipRecord | undefined;
  /** Per node of the list: the member id it holds now, where known. */
  readonly ids?: ReadonlyArray<string | undefined>;
  readonly reason?: string;
}

export async function recordMembership(
  nodes: readonly RedisNode[],
  timeoutMs: number,
): Promise<RecordedMembership> {
  const reports = await readFirstRecordWritten(nodes, timeoutMs);
  const view = recordedView(reports);
  if (view) return { record: view };
  const missing = reports.filter((report) => report.error);
  if (missing.length > 0) {
    return {
      record: undefined,
      reason:
        `membership not recorded: every node must answer to record the first one ` +
        `(${missing.map((r) => `${r.endpoint}: ${r.error}`).join("; ")})`,
    };
  }
  // Inits that run at once (a fleet of services starting on a new cluster,
  // each calling init()) must not each win some nodes: the nodes would hold
  // two clusters' records, and every client would be refused for good. So
  // the record goes first to one node all of them pick alike, the server
  // with the lowest run_id (whatever the spelling of its address), and an
  // init that finds another's record there takes that one: one record wins.
  // A node that does not give its run_id fails the init, which could
  // otherwise start on another node than the rest.
  const runIds = await Promise.all(
    nodes.map((node) =>
      node.command(["INFO", "server"], { timeoutMs }).then(
        (reply) => parseInfo(String(reply)).get("run_id"),
        () => undefined,
      ),
    ),
  );
  const silent = nodes.filter((_, i) => !runIds[i]);
  if (silent.length > 0) {
    return {
      record: undefined,
      reason:
        "membership not recorded: every node must give its run_id (INFO server) to record the " +
        `first one (${silent.map((node) => node.endpoint).join(", ")} did not)`,
    };
  }
  const first = nodes[runIds.indexOf([...runIds].sort()[0]!)]!;
  let record: MembershipRecord = {
    clusterId: newId(),
    epoch: 1,
    members: nodes.map((node) => ({ id: newId(), address: node.endpoint })),
  };
  const idAt = (node: RedisNode) =>
    record.members.find((member) => member.address === node.endpoint)?.id;
  const written = (status: number) =>
    status === writeReply.written || status === writeReply.already;
  // No answer from the first node (a timeout, a dropped connection): it may
  // hold our record or none. The rest are written all the same, as every
  // node was before the first went first: a majority with the record, the
  // first one taken back by a client if it has none. Stopping here would
  // leave a majority without one, each taken back as a member that lost
  // its memory (in the restart quarantine, counters unknown).
  const firstStatus = await writeRecord(first, "", record, idAt(first)!, false, timeoutMs).catch(
    () => undefined,
  );
  if (firstStatus !== undefined && !written(firstStatus)) {
    const held = await readRecord(first, timeoutMs).catch(() => undefined);
    const other = held?.record;
    // Another init's first record, for the same addresses: ours to write too.
    if (
      other?.epoch === 1 &&
      other.members.length === nodes.length &&
      nodes.every((node) => other.members.some((member) => member.address === node.endpoint))
    ) {
      record = other;
    } else if (other?.epoch === 1) {
      // Another init's, for the same servers spelled otherwise: that init
      // writes the rest. The list is checked against it once it has (by the
      // member ids the nodes answer with, as a client checks it).
      const view = recordedView(await readFirstRecordWritten(nodes, timeoutMs));
      if (!view) throw notRecorded([first]);
      return { record: view };
    } else {
      throw notRecorded([first]);
    }
  }
  // The rest, and the first node if it gave no answer. A node that gives
  // none is asked again (for at most timeoutMs; the write is idempotent):
  // every node left without the record is taken by clients for a member
  // that lost its memory.
  const outcomes = new Map<RedisNode, number | Error>();
  const until = performance.now() + timeoutMs;
  const writeSilent = async (pending: readonly RedisNode[]) => {
    const boundMs = Math.max(1, Math.min(timeoutMs, until - performance.now()));
    const replies = await Promise.all(
      pending.map((node) =>
        writeRecord(node, "", record, idAt(node)!, false, boundMs).catch((error: unknown) =>
          error instanceof Error ? error : new Error(String(error)),
        ),
      ),
    );
    for (const [i, node] of pending.entries()) outcomes.set(node, replies[i]!);
    return pending.filter((node) => outcomes.get(node) instanceof Error);
  };
  let pending = nodes.filter((node) => node !== first || firstStatus === undefined);
  await repeatWhile(
    async () => (pending = await writeSilent(pending)),
    (silent) => silent.length > 0,
    timeoutMs,
  );
  const failed: Array<[RedisNode, WriteFailure]> = [];
  for (const [node, outcome] of outcomes) {
    if (outcome instanceof Error) failed.push([node, outcome]);
    else if (!written(outcome)) failed.push([node, "conflict"]);
    else if (outcome === writeReply.already && (await takenBack(node, timeoutMs))) {
      failed.push([node, "taken back"]);
    }
  }
  if (failed.length > 0) throw notWritten(failed, record, nodes.length);
  return { record, ids: nodes.map((node) => idAt(node)) };
}

/**
 * Whether `node`, found holding our first record already, was taken back
 * by a client as a member that lost its memory (marked so: scripts.ts)
 * before our write reached it, rather than written by another init that
 * took our record. It then serves the restart quarantine, counters unknown.
 */
async function takenBack(node: RedisNode, timeoutMs: number): Promise<boolean> {
  const read = await readRecord(node, timeoutMs).catch(() => undefined);
  return read?.mark !== undefined;
}

/** Why the first record's write failed on a node: no answer, another record there, or taken back. */
type WriteFailure = Error | "conflict" | "taken back";

/** The first record could not be written on every node: why, node by node, and what follows. */
function notWritten(
  failed: ReadonlyArray<readonly [RedisNode, WriteFailure]>,
  record: MembershipRecord,
  nodeCount: number,
): MembershipError {
  const each = failed.map(([node, why]) => {
    if (why instanceof Error) return `${node.endpoint} (no answer: ${why.message})`;
    if (why === "taken back") {
      return `${node.endpoint} (a client took it back as a member that lost its memory before this init's write reached it)`;
    }
    return `${node.endpoint} (another init or change wrote a record there first)`;
  });
  const conflicts = failed.filter(([, why]) => why === "conflict").length;
  return new MembershipError(
    failed.map(([node]) => node.endpoint),
    `could not record the membership (cluster ${record.clusterId}) on ${each.join(", ")}` +
      (conflicts > 0 ? ". Run init again: it checks the list against what the nodes hold" : "") +
      (conflicts < failed.length
        ? ". A client takes each node left without the record for a member that lost its " +
          "memory (the restart quarantine; with more than " +
          `${nodeCount - quorumOf(nodeCount)} of them, fenced grants wait for \`redquorum fencing-floor\`). ` +
          "On a new cluster no service has used yet, flush every node and run init again " +
          '(operations guide: "The first init failed")'
        : ""),
  );
}

/**
 * Every node's membership, read again (for at most `timeoutMs`) while a
 * first record is on some nodes and not yet on others: another init may be
 * writing it (recordMembership), and those nodes are not members that lost
 * their memory.
 */
function readFirstRecordWritten(
  nodes: readonly RedisNode[],
  timeoutMs: number,
): Promise<NodeMembershipReport[]> {
  return repeatWhile(() => readMembership(nodes, timeoutMs), firstRecordUnderWay, timeoutMs);
}

function firstRecordUnderWay(reports: readonly NodeMembershipReport[]): boolean {
  let view: MembershipRecord | undefined;
  try {
    view = viewOf(reports);
  } catch {
    return false; // two clusters: nothing to wait for
  }
  return view?.epoch === 1 && reports.some((report) => !report.record && !report.error);
}

/** The record the nodes hold, checked against the list; undefined when none holds one. */
function recordedView(reports: readonly NodeMembershipReport[]): MembershipRecord | undefined {
  const view = viewOf(reports);
  if (view) requireList(reports, view);
  return view;
}

function notRecorded(failed: readonly RedisNode[]): MembershipError {
  return new MembershipError(
    failed.map((node) => node.endpoint),
    `could not record the membership on ${failed.map((n) => n.endpoint).join(", ")}: ` +
      "another init or change wrote a record there first (run init again: it checks the list against what the nodes hold)",
  );
}

/**
 * The list `reports` came from must be `view`'s member set (by member id).
 * With `lostMemoryOk`, a member that lost its memory (no record, at the
 * address the record gives it) counts as that member, as a client of the
 * list counts it: it takes the node back at its first lock or ID call.
 * Returns the endpoints of such members.
 */
export function requireList(
  reports: readonly NodeMembershipReport[],
  view: MembershipRecord,
  { lostMemoryOk = false }: { lostMemoryOk?: boolean } = {},
): string[] {
  // One server named twice (two spellings, or its data copied) would count
  // twice in a majority: in a change's, a record chosen by fewer than half.
  const named = new Map<string, string>();
  for (const report of reports) {
    if (!report.id) continue;
    const other = named.get(report.id);
    if (other !== undefined) {
      throw new MembershipError(
        [other, report.endpoint],
        `${other} and ${report.endpoint} both answer as member ${report.id}: one server named ` +
          "twice, or its data copied to another. Give each member once",
      );
    }
    named.set(report.id, report.endpoint);
  }
  const strangers = reports.filter((r) => !r.error && (!r.id || !memberById(view, r.id)));
  const ids = new Set(reports.flatMap((r) => (r.id ? [r.id] : [])));
  const absent = view.members.filter((member) => !ids.has(member.id));
  // A member that lost its memory and that no client has met yet.
  const forgetful = strangers.filter(
    (r) => !r.id && !r.record && absent.some((member) => member.address === r.endpoint),
  );
  const lostMemory = forgetful.map((r) => r.endpoint);
  const onlyLost = lostMemoryOk && strangers.length === forgetful.length;
  if ((strangers.length > 0 && !onlyLost) || reports.length !== view.members.length) {
    throw new MembershipError(
      strangers.map((r) => r.endpoint),
      `the node list is not the members of cluster ${view.clusterId} (epoch ${view.epoch}: ` +
        `${describeMembers(view)})` +
        (strangers.length > 0
          ? `; not members: ${strangers.map((r) => r.endpoint).join(", ")}`
          : "") +
        (absent.length > 0 && strangers.length > 0
          ? `; members not in the list: ${absent.map((m) => `${m.id}@${m.address}`).join(", ")}`
          : "") +
        (forgetful.length > 0
          ? `. ${forgetful.map((r) => r.endpoint).join(", ")} holds no record at a member's ` +
            "address: it lost its memory, and a client of this list takes it back when it " +
            "first meets it (any lock or ID call); then run the change again"
          : ""),
    );
  }
  return lostMemory;
}

/**
 * A removal alone needs an even number of members (N). After it, a member
 * that loses its memory is repaired from N' - Q' + 1 of the others (N' = N
 * - 1), which must meet every majority of the old members minus the one
 * removed. A value handed out on an old majority that held both the
 * removed member and the lost one is left on Q - 2 of the others, and the
 * repair can miss it unless N' - Q' + 1 > (N - 2) - (Q - 2), that is unless
 * Q' < Q: true for an even N (4 → 3: Q 3, Q' 2), false for an odd one (3 →
 * 2, 5 → 4). With {A, B, C} minus B, C restarted empty was repaired from A
 * alone, and IDs handed out on {B, C} were handed out again. A replacement
 * keeps N (the new member is repaired to every old value first), and so
 * does adding a member before removing one.
 */
function requireEvenRemoval(nodes: readonly RedisNode[], view: MembershipRecord): void {
  if (view.members.length % 2 === 0) return;
  throw new MembershipError(
    nodes.map((node) => node.endpoint),
    `cannot remove a member from ${view.members.length} members: afterwards a member that ` +
      "lost its memory would be repaired from too few of the others to find every ID and " +
      "fencing token handed out before. Replace it instead (`redquorum members replace`), " +
      "or add a member first and then remove it (an odd number of members can grow, but " +
      `never gets smaller: from ${view.members.length}, never below ${view.members.length})`,
  );
}

/**
 * Another change was chosen instead of this one: `record` (as read, or
 * undefined when it could not be: `stamp` names it).
 */
function anotherCompleted(
  nodes: readonly RedisNode[],
  record: MembershipRecord | undefined,
  stamp: string,
): MembershipError {
  const now = record
    ? `${describeMembers(record)} (epoch ${record.epoch})`
    : `those of the record ${stamp}`;
  return new MembershipError(
    nodes.map((node) => node.endpoint),
    "another change of members, run before or at the same time, was completed instead: " +
      `the members are now ${now}. ` +
      "Check them (`redquorum members show`) and run this change again with that list if it is still wanted",
  );
}

/**
 * Whether `record` is `next` but for the id its added node was given (a
 * run of this very change drew another): that member of `record`, or
 * undefined when it is another change.
 */
function sameChangeAs(
  record: MembershipRecord,
  next: MembershipRecord,
  add: RedisNode | undefined,
  newMember: Member | undefined,
): Member | undefined {
  if (!add || !newMember || record.epoch !== next.epoch) return undefined;
  if (record.members.length !== next.members.length) return undefined;
  const others = (of: MembershipRecord) =>
    of.members
      .filter((member) => member.address !== add.endpoint)
      .map((member) => member.id)
      .sort()
      .join(",");
  const same = memberAt(record, add.endpoint);
  return same && others(record) === others(next) ? same : undefined;
}

/** Whether `reports` are exactly the members of `view` (requireList passes). */
function fitsList(reports: readonly NodeMembershipReport[], view: MembershipRecord): boolean {
  try {
    requireList(reports, view);
    return true;
  } catch (error) {
    if (error instanceof MembershipError) return false;
    throw error;
  }
}

/**
 * A replacement of the only member: the new node's counters are repaired
 * from the other members, and there are none (a lone node cannot be
 * repaired: quorum/round.ts, repairReadsOf). Its IDs and fencing tokens
 * would stay unknown for good, and the error that says so reads like a
 * new cluster's (where `init` is the fix, and here would repeat IDs).
 */
function requireOtherMember(nodes: readonly RedisNode[], view: MembershipRecord): void {
  if (view.members.length > 1) return;
  throw new MembershipError(
    nodes.map((node) => node.endpoint),
    "cannot replace the only member: the new node's ID and fencing counters are repaired " +
      "from the other members, and there would be none. Add the new node first (two " +
      "members), then remove the old one",
  );
}

/** One change of members: add a node, remove one, or both at once (a replacement). */
export interface MemberChange {
  /** The node to add: it must answer and hold no record. */
  readonly add?: RedisNode;
  /** The member to remove: the index of its node in the current list. */
  readonly removeIndex?: number;
}

export interface MemberChangeReport {
  readonly from: MembershipRecord;
  readonly to: MembershipRecord;
  /** Per node of the current list (then the added one): what the change wrote there. */
  readonly nodes: ReadonlyArray<{ readonly endpoint: string; readonly result: string }>;
}

/**
 * Changes one member (see docs/membership.md, "Changing members"):
 *
 * 1. The current list must be the record's member set, and a majority of
 *    its members must answer at its epoch.
 * 2. The new record (epoch + 1) is written on every node of the current
 *    list that answers, compare-and-set from the current epoch: once a
 *    majority holds it, no vote of the old epoch can win any more.
 * 3. Only then is the new node given its id and the record, as a node that
 *    lost its memory: in the restart quarantine from now (for locks granted
 *    on the old members), its fencing and ID counters unknown until
 *    repaired from the others, which meet every majority of the old members.
 *
 * A removed node that answers is left holding the new record without its
 * id: it votes for no one. Run again after a failure, a step that is done
 * is not repeated (`already`).
 */
export async function applyMemberChange(
  nodes: readonly RedisNode[],
  change: MemberChange,
  timeoutMs: number,
  /** False only in the fault suite's negative control: the node joins without the quarantine. */
  joinQuarantine = true,
  runtime: MembershipRuntime = systemRuntime,
): Promise<MemberChangeReport> {
  const { add, removeIndex } = change;
  if (!add && removeIndex === undefined) {
    throw new InvalidArgumentError("change", "expected a node to add, one to remove, or both");
  }
  if (removeIndex !== undefined && (removeIndex < 0 || removeIndex >= nodes.length)) {
    throw new InvalidArgumentError(
      "remove",
      `expected a node of the current list (0..${nodes.length - 1})`,
    );
  }
  const reports = await readMembership(nodes, timeoutMs);
  const view = viewOf(reports);
  if (!view) {
    throw new MembershipError(
      nodes.map((node) => node.endpoint),
      "the nodes hold no membership record: run `redquorum init` first",
    );
  }
  const removed = removeIndex === undefined ? undefined : reports[removeIndex]!;
  // A member to remove that lost its memory counts as one that is down:
  // the member no other node answers as (below), never a stranger.
  const lostRemoved = removed !== undefined && holdsNothing(removed);
  if (removed && !removed.id && !removed.error && removed.record) {
    throw new MembershipError(
      [removed.endpoint],
      `${removed.endpoint} is not a member: nothing to remove`,
    );
  }
  if (removed && lostRemoved && !memberAt(view, removed.endpoint)) {
    throw new MembershipError(
      [removed.endpoint],
      `${removed.endpoint} holds nothing and is at no member's address: not a member, nothing to remove`,
    );
  }
  // A run of this removal that landed already: the node to remove is no
  // member of the view (or does not answer), and the rest of the list are
  // the view's members. Run again, as after a failure, it changes nothing
  // (and does not fail on the list, which still names the node removed).
  if (!add && removed && !(removed.id && memberById(view, removed.id))) {
    const rest = reports.filter((_, i) => i !== removeIndex);
    if (fitsList(rest, view)) {
      return {
        from: view,
        to: view,
        nodes: reports.map((report, i) => ({
          endpoint: report.endpoint,
          result: i === removeIndex ? "removed already" : "unchanged",
        })),
      };
    }
  }
  let newMember: Member | undefined;
  /** A record another change had chosen, written instead of this change's. */
  let another: MembershipRecord | undefined;
  let resumedJoin = false;
  let addReport: NodeMembershipReport | undefined;
  if (add) {
    addReport = await readNode(add, timeoutMs);
    if (addReport.error) {
      throw new MembershipError(
        [add.endpoint],
        `the node to add did not answer: ${addReport.error}`,
      );
    }
    // Only a run of this very change that got as far as joining it: the
    // node holds the current record as one of its members.
    const already =
      addReport.record?.clusterId === view.clusterId &&
      addReport.record.epoch === view.epoch &&
      addReport.id !== undefined &&
      memberById(view, addReport.id) !== undefined;
    if (already && reports.some((report) => report.id === addReport?.id)) {
      // The node to add answers as a member the list names under another
      // address (another spelling, a proxy): it is that member, not a node
      // this change joined.
      const member = memberById(view, addReport.id!)!;
      throw new MembershipError(
        [add.endpoint],
        `${add.endpoint} answers as member ${member.id}, which the list names as ` +
          `${member.address}: it is a member already`,
      );
    }
    if (already && removed?.id && memberById(view, removed.id)) {
      // The node to add is a member, and the one to remove still is: not a
      // run of this replacement, which would have removed it.
      throw new MembershipError(
        [add.endpoint, removed.endpoint],
        `${add.endpoint} is a member already and ${removed.endpoint} still is: nothing was ` +
          "replaced. Remove the member on its own if that is what is wanted",
      );
    }
    if (addReport.record && !already) {
      if (addReport.record.clusterId !== view.clusterId) {
        throw new MembershipError(
          [add.endpoint],
          `${add.endpoint} holds a record of another cluster (${stampOf(addReport.record)}): ` +
            "only a node without one can join (a node of another cluster must leave it first)",
        );
      }
      // A former member (removed, or replaced while it was away): its
      // counters and its marker are from an epoch it no longer belongs to,
      // and let back in as it is, it was trusted with them (IDs handed out
      // again, fencing tokens going back).
      throw new MembershipError(
        [add.endpoint],
        `${add.endpoint} holds a record of this cluster from epoch ${addReport.record.epoch}` +
          `${addReport.id ? ` (member id ${addReport.id})` : ""} but is not a member now: ` +
          "a node that was a member before joins again only empty (FLUSHALL it, then run the change again)",
      );
    }
    // A node that joins brings nothing of its own. Left on it, an ID
    // counter (another deployment's, or one from before the membership was
    // recorded) with its marker and its memory's identity would vote at
    // once and never be repaired: IDs handed out again. The join resets
    // the lock state only. A node with a member id was joined, or taken
    // back, by this cluster already: what it holds is the cluster's.
    if (!addReport.record && addReport.id === undefined) {
      const held = await keysHeld(add, timeoutMs);
      if (held > 0) {
        throw new MembershipError(
          [add.endpoint],
          `${add.endpoint} holds ${held} key${held === 1 ? "" : "s"}: a node joins empty (its ` +
            "fencing and ID counters come from the members, and a counter left on it would be " +
            "trusted as it is). Empty it (FLUSHALL) if nothing on it is needed, then run the change again",
        );
      }
    }
    await requireIndependentMaster(add, nodes, removeIndex, removed?.id !== undefined, timeoutMs);
    // A run of this change whose step 3 failed (the node did not answer
    // in time): the record names the node already, under an id no node of
    // the list answers as. Run again, the change resumes at step 3 with
    // that id; given a new one, it would move the cluster once more.
    const named = addReport.record ? undefined : memberAt(view, add.endpoint);
    const unjoined = named && !reports.some((report) => report.id === named.id) ? named : undefined;
    newMember = unjoined ?? { id: addReport.id ?? newId(), address: add.endpoint };
    resumedJoin = unjoined !== undefined;
  }
  // The record this change writes: unless a run of it landed already.
  let next: MembershipRecord;
  if (addReport?.record !== undefined || resumedJoin) {
    next = addReport?.record ?? view;
  } else {
    const removedId = removed?.id;
    const members = view.members.filter((member) => member.id !== removedId);
    if (removeIndex !== undefined && !removedId) {
      // The node to remove did not answer: its id is the member no other
      // node of the list answers as.
      const answered = new Set(reports.flatMap((r) => (r.id ? [r.id] : [])));
      const gone = view.members.filter((member) => !answered.has(member.id));
      if (gone.length !== 1) {
        throw new MembershipError(
          [nodes[removeIndex]!.endpoint],
          `${nodes[removeIndex]!.endpoint} did not answer, and ${gone.length} members are unaccounted for: ` +
            "cannot tell which member to remove",
        );
      }
      members.splice(members.indexOf(gone[0]!), 1);
    }
    if (newMember) members.push(newMember);
    next = { clusterId: view.clusterId, epoch: view.epoch + 1, members };
  }
  const fromView = next.epoch === view.epoch ? undefined : view;
  const listReports = lostRemoved
    ? reports.map((r, i) =>
        i === removeIndex ? { endpoint: r.endpoint, error: "lost its memory" } : r,
      )
    : reports;
  // A change accepted by some members and not written on them (a run of
  // it, or of another, that stopped or is still writing): a member that
  // lost its memory meanwhile is taken back by no client until it is
  // written (view.ts, confirmCurrent), so it goes on without that member
  // (left alone below, as a down one), rather than wait for it.
  const underWay = reports.some((report) => report.changing === true);
  if (fromView) requireList(listReports, view, { lostMemoryOk: underWay });
  else requireRerunList(reports, view, removeIndex);
  if (fromView && removeIndex !== undefined && !add) requireEvenRemoval(nodes, view);
  if (fromView && removeIndex !== undefined && add) requireOtherMember(nodes, view);
  // Step 2: the members choose the record that follows the view
  // (choose.ts): this change's, or one that another run may have had
  // chosen before it. Members behind the view are brought up to it first,
  // to take part.
  let chosen = next;
  // What each node's record is now, as far as this change knows.
  const heldStamps = reports.map((report) => stampOf(report.record));
  if (fromView) {
    const current = stampOf(view);
    // Members taken back when too few answered to tell what they may have
    // forgotten: worked out now, from this change's majority of answers.
    const forgets = forgottenUpTo(reports, view);
    if (forgets !== undefined) {
      await Promise.all(
        nodes.map((node, i) =>
          reports[i]!.mark === unknownMark
            ? node
                .command(["EVAL", resolveMarkScript.source, "0", String(forgets)], { timeoutMs })
                .catch(() => undefined)
            : undefined,
        ),
      );
    }
    const participants: RedisNode[] = [];
    await Promise.all(
      nodes.map(async (node, i) => {
        const report = reports[i]!;
        if (report.error || !report.id || !memberById(view, report.id)) return;
        const held = stampOf(report.record);
        if (held !== current) {
          const status = await writeRecord(node, held, view, "", false, timeoutMs).catch(
            () => writeReply.conflict,
          );
          if (status === writeReply.conflict) return;
          heldStamps[i] = current;
        }
        participants.push(node);
      }),
    );
    chosen = await chooseRecord(participants, view, next, timeoutMs, runtime).catch(
      async (error: unknown) => {
        if (!(error instanceof AnotherRecordWritten)) throw error;
        const written = (await readRecord(error.node, timeoutMs).catch(() => undefined))?.record;
        // This very change, run twice at once: the other run completed it.
        if (written && sameChangeAs(written, next, add, newMember)) {
          throw new MembershipError(
            nodes.map((node) => node.endpoint),
            "this change, run twice at the same time, was completed by its other run: the " +
              `members are now ${describeMembers(written)} (epoch ${written.epoch}). Check ` +
              "them (`redquorum members show`); run it again only if its node did not join",
          );
        }
        throw anotherCompleted(nodes, written, error.stamp);
      },
    );
    if (stampOf(chosen) !== stampOf(next)) {
      // This change run before, its added node given another id then.
      const same = sameChangeAs(chosen, next, add, newMember);
      if (same) newMember = same;
      else another = chosen;
    }
  }
  // Then the chosen record is written on every node of the list that answers.
  const results: Array<{ endpoint: string; result: string }> = [];
  let moved = 0;
  await Promise.all(
    nodes.map(async (node, i) => {
      const report = reports[i]!;
      if (report.error) {
        results[i] = { endpoint: node.endpoint, result: `not reached: ${report.error}` };
        return;
      }
      if ((!fromView || underWay) && holdsNothing(report) && i !== removeIndex) {
        // A member that lost its memory since the run before (or while a
        // change was under way): given the record here without its id, it
        // could never be taken back.
        results[i] = {
          endpoint: node.endpoint,
          result: "left alone: holds nothing (lost its memory); a lock or ID call takes it back",
        };
        return;
      }
      const status = await writeRecord(node, heldStamps[i]!, chosen, "", false, timeoutMs).catch(
        (error: unknown) => (error instanceof Error ? error.message : String(error)),
      );
      if (typeof status === "number" && status !== writeReply.conflict) moved++;
      results[i] = {
        endpoint: node.endpoint,
        result:
          typeof status === "string"
            ? `not reached: ${status}`
            : status === writeReply.conflict
              ? "conflict: holds another record"
              : `at epoch ${chosen.epoch}`,
      };
    }),
  );
  const previous = fromView ?? view;
  if (another) throw anotherCompleted(nodes, another, stampOf(another));
  // Run again after the node to add joined: it holds the record too, and
  // counts among the members that do (a member of the list that lost its
  // memory since is left alone above).
  if (!fromView && addReport?.record && stampOf(addReport.record) === stampOf(chosen)) moved++;
  const needed = quorumOf(previous.members.length);
  if (moved < needed) {
    // Members left alone answer already: what they wait for is a client.
    const leftAlone = results.some((r) => r.result.startsWith("left alone"));
    throw new MembershipError(
      nodes.map((node) => node.endpoint),
      `the change reached ${moved} of ${previous.members.length} members, ${needed} needed ` +
        `(${results.map((r) => `${r.endpoint}: ${r.result}`).join("; ")}); run it again once they answer` +
        (leftAlone
          ? " (a member left alone answers already, but counts only once a client of the " +
            "members has taken it back: one lock or ID call does)"
          : ""),
    );
  }
  // Step 3: the new node joins, after the old epoch can no longer win.
  if (add && newMember) {
    // A node the record names already (a run before did not join it) may
    // be a member that joined then and lost its memory since: marked
    // without an epoch (`resumedJoin`), for the next change to work out.
    const status = await writeRecord(
      add,
      "",
      chosen,
      newMember.id,
      joinQuarantine,
      timeoutMs,
      resumedJoin,
    ).catch((error: unknown) => {
      // The epoch moved already: say so, or the operator takes the old list for the members'.
      throw new MembershipError(
        [add.endpoint],
        `could not join ${add.endpoint}: ${String(error)}. The members are now ` +
          `${describeMembers(chosen)} (epoch ${chosen.epoch}): the old list is refused; give ` +
          "every client the new list, and run this change again with the old list to join the node",
      );
    });
    results.push({
      endpoint: add.endpoint,
      result:
        status === writeReply.conflict
          ? "conflict: holds another record"
          : `joined as ${newMember.id}, in quarantine, its counters to be repaired`,
    });
    if (status === writeReply.conflict) {
      throw new MembershipError(
        [add.endpoint],
        `${add.endpoint} took another record meanwhile: not joined`,
      );
    }
  }
  return { from: previous, to: chosen, nodes: results };
}
