/**
 * Checks a change of members makes before it writes anything, beside the
 * list checks in change.ts: that the node to add is one clients will take
 * as a member, and that a run again of a change is a run of the change
 * that landed.
 */
import { MembershipError } from "../errors.js";
import { counterKeys } from "../id/keys.js";
import { idDefaults } from "../limits.js";
import { inspectNode, type NodeInfo } from "../node/inspect.js";
import { aliveKey } from "../node/memory-check.js";
import { horizonKey, markerKey, runKey } from "../node/node-state.js";
import type { RedisNode } from "../node/redis-node.js";
import type { NodeMembershipReport } from "./change.js";
import { describeMembers, type MembershipRecord, memberById } from "./record.js";

/**
 * The node to add must be what every client checks a node for at first
 * contact (node/admission.ts): a master, and a server of its own, not one
 * the list names already (on another database, or under another address).
 * Found only by the clients, after the change had landed, every client of
 * the new list was refused (and every client of the old list, whose epoch
 * had passed): the cluster served no one until another change. The member
 * a replacement removes may be the same server on another database, if it
 * still answers as that member (`removeIndex`, `removedAnswers`): it leaves,
 * and the two keyspaces are apart. One that lost its memory may be the very
 * keyspace to add under another spelling: the change would write the new
 * record on it as the member removed, and the join then find it taken.
 * A node of the list that does not answer INFO is not compared (it is down;
 * the change's rounds say what that means).
 */
export async function requireIndependentMaster(
  add: RedisNode,
  nodes: readonly RedisNode[],
  removeIndex: number | undefined,
  removedAnswers: boolean,
  timeoutMs: number,
): Promise<void> {
  const read = (node: RedisNode) => inspectNode(node, timeoutMs).catch(() => undefined);
  const [info, ...infos] = await Promise.all([add, ...nodes].map(read));
  if (!info) {
    throw new MembershipError([add.endpoint], `the node to add did not answer INFO`);
  }
  if (info.role !== "master") {
    throw new MembershipError(
      [add.endpoint],
      `${add.endpoint} is a ${info.role}, not a master: clients would refuse it as a member ` +
        "(redquorum needs independent masters). Add a master of its own",
    );
  }
  const same = infos.findIndex(
    (other: NodeInfo | undefined, i) =>
      (i !== removeIndex || !removedAnswers) && other?.runId === info.runId,
  );
  if (same < 0 || info.runId === "") return;
  if (same === removeIndex) {
    throw new MembershipError(
      [add.endpoint, nodes[same]!.endpoint],
      `${add.endpoint} is the same Redis server as ${nodes[same]!.endpoint}, the member to ` +
        "remove, which lost its memory: a lock or ID call takes it back as the member it was. " +
        "To replace it, add a server of its own",
    );
  }
  throw new MembershipError(
    [add.endpoint, nodes[same]!.endpoint],
    `${add.endpoint} is the same Redis server as ${nodes[same]!.endpoint} (run_id ` +
      `${info.runId}), a member already: counted twice, it would fake a majority, and clients ` +
      "would refuse the new list. Add a server of its own",
  );
}

/**
 * A run again of a change whose record the nodes hold already (the node
 * to add is named by it): the list must be the members it started from,
 * as far as the nodes can tell. Every node of the list but the one removed
 * answers as a member of the record, does not answer, or holds nothing (a
 * member that lost its memory: left for a lock or ID call to take back),
 * and together with the node added they are as many as the members. Else
 * this change is not the one that landed (another change did, with this
 * node in it), and reporting it done, and writing the record on the
 * list's nodes, would be wrong: a member that lost its memory was given
 * the record without its id, and no client could take it back.
 */
export function requireRerunList(
  reports: readonly NodeMembershipReport[],
  view: MembershipRecord,
  removeIndex: number | undefined,
): void {
  const kept = reports.filter((_, i) => i !== removeIndex);
  const strangers = kept.filter(
    (r) => !r.error && (r.id ? memberById(view, r.id) === undefined : r.record !== undefined),
  );
  if (strangers.length === 0 && kept.length + 1 === view.members.length) return;
  throw new MembershipError(
    strangers.length > 0 ? strangers.map((r) => r.endpoint) : kept.map((r) => r.endpoint),
    `the nodes hold a record that names the node to add, but not as this change from this ` +
      `list would: the members are now ${describeMembers(view)} (epoch ${view.epoch})` +
      (strangers.length > 0
        ? `; not members now: ${strangers.map((r) => r.endpoint).join(", ")}`
        : "") +
      ". Another change landed: check the members (`redquorum members show`) and give " +
      "every client that list",
  );
}

/**
 * Keys a client's first contact writes on any node it checks, even one
 * whose list it then refuses (a former member emptied to be added again,
 * met by a service still on the old list; a new node met by one already
 * given the new list): the lock node's memory and its identity cache, the
 * horizon's maxTtlMs records, and the marker the join writes over. None is
 * a lock or a counter. Held against the node to add, they made it
 * "not empty" for as long as such a service ran, and FLUSHALL did not help.
 */
const bookkeepingKeys = [markerKey, runKey, aliveKey, horizonKey];

/**
 * The default ID counter's keys: its certified run_id is what an ID
 * client's first contact writes; alone, without the counter, its marker or
 * its loss token, it is nothing (a counter left on the node would be
 * trusted as it is). A counter under a `key` of its own leaves
 * `<key>:run`, which counts (finding it would take SCAN, which the ACL in
 * docs/operations.md does not grant).
 */
const [defaultIdCounter, defaultIdMarker, defaultIdLost, defaultIdRun] = counterKeys(
  idDefaults.key,
);

/** The keys the node to add holds but for the bookkeeping above. */
export async function keysHeld(node: RedisNode, timeoutMs: number): Promise<number> {
  try {
    const [size, bookkeeping, idCounter, idRun] = await Promise.all([
      node.command(["DBSIZE"], { timeoutMs }),
      node.command(["EXISTS", ...bookkeepingKeys], { timeoutMs }),
      node.command(["EXISTS", defaultIdCounter, defaultIdMarker, defaultIdLost], { timeoutMs }),
      node.command(["EXISTS", defaultIdRun], { timeoutMs }),
    ]);
    // The run key alone is nothing; beside its counter, marker or loss token it counts.
    const idRunAlone = Number(idRun) === 1 && Number(idCounter) === 0;
    return Number(size) - Number(bookkeeping) - (idRunAlone ? 1 : 0);
  } catch (error) {
    throw new MembershipError(
      [node.endpoint],
      `the node to add did not say how many keys it holds: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}
