/**
 * The public calls on a cluster's membership: what the nodes record
 * (`membershipStatus`), and a change of one member (`changeMembers`).
 * Each opens its own connections to the nodes given and closes them.
 */
import type { Clock, RandomSource } from "../clock.js";
import { InvalidArgumentError } from "../errors.js";
import { defaults, limits } from "../limits.js";
import { createNodes, endpointOfUrl, type NodeInput, requireNodeList } from "../node/resolve.js";
import { quorumOf } from "../quorum/round.js";
import { clockOption, randomOption } from "../shared-options.js";
import {
  describe,
  namedAs,
  rejectUnknownOptions,
  requireInteger,
  requireOptionsObject,
} from "../validate.js";
import {
  applyMemberChange,
  type MemberChangeReport,
  type NodeMembershipReport,
  readMembership,
  requireList,
  viewOf,
} from "./change.js";
import type { MembershipRuntime } from "./choose.js";
import type { MembershipRecord } from "./record.js";

export type { MemberChangeReport, NodeMembershipReport } from "./change.js";
export type { Member, MembershipRecord } from "./record.js";

export interface MembershipOptions {
  /** Bound on each node's answer, in milliseconds. Default `defaults.checkTimeoutMs`, at most `limits.checkTimeoutMsMax`. */
  readonly timeoutMs?: number;
  /** `changeMembers`: the clock its backoff between contending ballots sleeps on. Default `systemClock`. */
  readonly clock?: Clock;
  /** `changeMembers`: its ballots' random parts and backoff jitter. Default: the CSPRNG. */
  readonly random?: RandomSource;
}

export interface MembershipStatus {
  /** The record with the highest epoch the nodes hold; undefined when none holds one. */
  readonly record: MembershipRecord | undefined;
  /** Per node: its member id and record, or why it could not be read. */
  readonly nodes: readonly NodeMembershipReport[];
  /**
   * Why the nodes given are not one cluster's members (two clusters, a node
   * that is not a member, a member missing), if they are not: clients with
   * this list are refused.
   */
  readonly problem?: string;
  /**
   * Members that lost their memory (a node at a member's recorded address
   * that holds no record: restarted empty, flushed) and that no client has
   * taken back yet. Not a problem for clients: the first lock or ID call of
   * a client with this list takes each back (it then sits out the restart
   * quarantine and its counters are repaired). A change of members is
   * refused until then.
   */
  readonly lostMemory?: readonly string[];
}

/** The options of both calls, checked: an object of known names (clock and random serve changeMembers only). */
function optionsOf(options: unknown): Record<string, unknown> {
  const checked = requireOptionsObject("options", options);
  rejectUnknownOptions("options", checked, ["timeoutMs", "clock", "random"]);
  return checked;
}

/** Bounded as the node checks' timeout is: a timer above 2^31 - 1 ms would fire at once. */
function timeoutOf(options: Record<string, unknown>): number {
  return requireInteger(
    "options.timeoutMs",
    options.timeoutMs ?? defaults.checkTimeoutMs,
    1,
    limits.checkTimeoutMsMax,
  );
}

function runtimeOf(options: Record<string, unknown>): MembershipRuntime {
  return { clock: clockOption(options.clock), random: randomOption(options.random) };
}

/** What each node records of the cluster's membership. */
export async function membershipStatus(
  nodes: readonly NodeInput[],
  options: MembershipOptions = {},
): Promise<MembershipStatus> {
  const timeoutMs = timeoutOf(optionsOf(options));
  const group = createNodes(nodes);
  try {
    const reports = await readMembership(group, timeoutMs);
    try {
      const record = viewOf(reports);
      const lost = record ? requireList(reports, record, { lostMemoryOk: true }) : [];
      const lostMemory = lost.length > 0 ? { lostMemory: lost } : {};
      const changing = reports.filter((report) => report.changing).map((r) => r.endpoint);
      if (changing.length > 0) {
        return {
          record,
          nodes: reports,
          ...lostMemory,
          problem:
            `a change of members is under way on ${changing.join(", ")}: they refuse every vote ` +
            "until it is written (if no change is running, run the last one again to complete it)",
        };
      }
      // Taken back, each sits out the restart quarantine: more than N - Q
      // of them leave no majority in service.
      const size = record?.members.length ?? 0;
      if (record && lost.length > size - quorumOf(size)) {
        return {
          record,
          nodes: reports,
          ...lostMemory,
          problem:
            `${lost.length} of ${size} members hold no membership record (${lost.join(", ")}): ` +
            "more than the cluster can spare, so clients take none back and no majority is in " +
            "service; `redquorum fencing-floor` takes them back (see the operations guide, a " +
            "majority of nodes lost their disks)",
        };
      }
      return { record, nodes: reports, ...lostMemory };
    } catch (error) {
      let record: MembershipRecord | undefined;
      try {
        record = viewOf(reports);
      } catch {
        record = undefined;
      }
      return { record, nodes: reports, problem: (error as Error).message };
    }
  } finally {
    await Promise.allSettled(group.map((node) => node.close()));
  }
}

export interface MemberChangeRequest {
  /** A node to add: it must answer and hold no membership record. */
  readonly add?: NodeInput;
  /** A member to remove: its position in `nodes`, or its URL or host:port as given there. */
  readonly remove?: number | string;
}

/**
 * Adds a member, removes one, or replaces one (both at once), while clients
 * keep running: the cluster moves to the next epoch, clients still on the
 * old list are refused with a `MembershipError` telling them to reload it,
 * and a node added starts in the restart quarantine with its counters
 * repaired from the others before it votes on them (docs/membership.md).
 * `nodes` is the current member list. Run again after a failure: what
 * landed is not repeated.
 */
export async function changeMembers(
  nodes: readonly NodeInput[],
  change: MemberChangeRequest,
  options: MembershipOptions = {},
): Promise<MemberChangeReport> {
  const checked = optionsOf(options);
  const timeoutMs = timeoutOf(checked);
  const runtime = runtimeOf(checked);
  requireNodeList(nodes);
  const request = requireOptionsObject("change", change) as MemberChangeRequest;
  rejectUnknownOptions("change", request, ["add", "remove"]);
  if (typeof request.remove === "number") {
    requireInteger("remove", request.remove, 0, nodes.length - 1);
  } else if (request.remove !== undefined && typeof request.remove !== "string") {
    throw new InvalidArgumentError(
      "remove",
      `expected a position in nodes or a node's URL or host:port, got ${describe(request.remove)}`,
    );
  }
  if (typeof request.add === "string") {
    // Said in the caller's terms: the list check below would report the
    // list naming one server twice, at a position the caller never wrote.
    // URLs only (a caller's clients are told apart by the list check).
    const url = request.add;
    // Named as the caller gave it: `add`, not a position past its list.
    const added = namedAs("add", undefined, () => endpointOfUrl(url, nodes.length));
    const at = nodes.findIndex(
      (node, i) => typeof node === "string" && endpointOfUrl(node, i) === added,
    );
    if (at >= 0) {
      throw new InvalidArgumentError(
        "add",
        `${added} is already a member (nodes[${at}]): the node to add must be a new one`,
      );
    }
  }
  const all = createNodesNamingAdd(nodes, request.add);
  const current = all.slice(0, nodes.length);
  const add = request.add === undefined ? undefined : all[nodes.length];
  let removeIndex: number | undefined;
  if (typeof request.remove === "number") removeIndex = request.remove;
  else if (typeof request.remove === "string") {
    const given = request.remove;
    removeIndex = nodes.findIndex(
      (node, i) =>
        node === given ||
        current[i]!.endpoint === given.replace(/^rediss?:\/\/([^@]*@)?/, "").replace(/\/.*$/, ""),
    );
    if (removeIndex < 0) {
      throw new InvalidArgumentError("remove", `${given} is not one of the nodes given`);
    }
  }
  try {
    return await applyMemberChange(
      current,
      { ...(add ? { add } : {}), ...(removeIndex === undefined ? {} : { removeIndex }) },
      timeoutMs,
      true,
      runtime,
    );
  } finally {
    await Promise.allSettled(all.map((node) => node.close()));
  }
}

/** The members' nodes and the node to add, which a refusal names `add` (not a position past the list). */
function createNodesNamingAdd(
  nodes: readonly NodeInput[],
  add: NodeInput | undefined,
): ReturnType<typeof createNodes> {
  if (add === undefined) return createNodes(nodes);
  return namedAs("add", `nodes[${nodes.length}]`, () => createNodes([...nodes, add]));
}
