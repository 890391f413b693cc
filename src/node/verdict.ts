/**
 * Whether a cluster is safe to use, from each node's status: what
 * `redquorum status` prints and the ID server's /healthz answers.
 */
import { repairableFrom } from "../quorum/counter-repair.js";
import { repairReadsOf } from "../quorum/round.js";
import type { NodeStatus } from "./status.js";

export interface Verdict {
  readonly safe: boolean;
  /** Nodes that count, and how many are needed. */
  readonly usable: number;
  readonly needed: number;
  /** Why a node does not count, one line per node; empty when every node counts. */
  readonly reasons: readonly string[];
}

export interface ClusterVerdict {
  readonly locks: Verdict;
  readonly ids: Verdict;
}

/**
 * What a node is called that restarted and that no client has checked since
 * (`NodeStatus.restartUnchecked`): its marker still reads "in service".
 */
export const restartUnchecked = "restarted, not yet checked";

/** What the other nodes of the list say about one node's problem. */
interface Beside {
  /** Some node has a marker (any value): the cluster (or counter) is in use. */
  readonly inUse: boolean;
  /** Nodes that answered holding a marker (any value: a restarted one's counter counts in a repair that every other node answers). */
  readonly holders: number;
  /** Nodes that answered with their marker intact: they kept their data. */
  readonly intact: number;
  /** Nodes that did not answer: they may hold one. */
  readonly unreachable: number;
  readonly nodeCount: number;
}

/** Why a node cannot take part in anything: not reachable, or not a master. */
function reachMasterProblem(node: NodeStatus): string | undefined {
  if (!node.reachable) return `unreachable (${node.error ?? "no answer"})`;
  if (node.role !== "master") return `role ${node.role ?? "unknown"}, not master`;
  return undefined;
}

/** Why a node cannot take part in locks, or undefined when it can. */
function lockProblem(
  node: NodeStatus,
  options: VerdictOptions,
  beside: Beside,
): string | undefined {
  const problem = reachMasterProblem(node);
  if (problem) return problem;
  if ((node.quarantineRemainingMs ?? 0) > 0 && node.quarantineJudged === false) {
    return "quarantined until its length is judged from the other nodes' maxTtlMs records (a client's next lock call there does it; it needs N - Q + 1 other nodes in service)";
  }
  if ((node.quarantineRemainingMs ?? 0) > 0) {
    return `quarantined for ${Math.ceil(node.quarantineRemainingMs! / 1000)} s more`;
  }
  if (!node.marker) {
    if (node.markerValue === undefined) {
      // Beside nodes with a marker, init is the wrong advice: it came back
      // empty, and the next lock call quarantines it (init leaves it so).
      return beside.inUse
        ? `no marker, beside nodes that have one: it came back empty (do not run init; ${lockRepairOutlook(beside)})`
        : "no marker: run `redquorum init` on a new cluster";
    }
    return (
      `marker ${JSON.stringify(node.markerValue)}: it lost or may have lost data, and is out ` +
      "of service until repaired from the other nodes (a client's next call schedules it)"
    );
  }
  if (node.restartUnchecked && options.restartsUncheckedOut) {
    return (
      `${restartUnchecked}: the first client to check it takes it out of service until its ` +
      "fencing counters are repaired from the other nodes, or its restart quarantine is over " +
      "if it does not fsync every write (that client's next lock call starts it)"
    );
  }
  return undefined;
}

/**
 * Why a node cannot take part in IDs, or undefined when it can, from
 * `NextId.status()` (its marker is the counter's; the lock quarantine and
 * marker do not concern IDs).
 */
function idProblem(node: NodeStatus, options: VerdictOptions, beside: Beside): string | undefined {
  const problem = reachMasterProblem(node);
  if (problem) return problem;
  if (!node.marker) {
    if (node.markerValue === undefined) {
      // Beside nodes that hold the counter, id init is the wrong advice
      // (refused, and never to be forced): the node came back empty.
      return beside.inUse
        ? "no ID counter marker, beside nodes that hold the counter: it came back empty (do not " +
            `run id init; ${idRepairOutlook(beside)})`
        : "no ID counter marker: run `redquorum id init` (with your --key) on a new cluster";
    }
    return (
      `ID counter marker ${JSON.stringify(node.markerValue)}: it lost or may have lost the ` +
      "counter, and is out of service until repaired from the other nodes (a client's next call schedules it)"
    );
  }
  if (node.restartUnchecked && options.restartsUncheckedOut) {
    return (
      `${restartUnchecked}: the first client to check it takes it out of service until its ` +
      "ID counter is repaired from the other nodes (that client's next call schedules it)"
    );
  }
  if (node.appendonly !== "yes") return `appendonly ${node.appendonly ?? "unknown"}, needs yes`;
  if (node.appendfsync !== "always") {
    return `appendfsync ${node.appendfsync ?? "unknown (CONFIG disabled?)"}, needs always`;
  }
  // NextId refuses it too (node/durability.ts): a rewrite may skip fsyncs.
  if (node.noAppendfsyncOnRewrite === "yes") return "no-appendfsync-on-rewrite yes, needs no";
  return undefined;
}

/**
 * Whether clients can repair a node that lost a counter, from `kept` other
 * nodes that answered holding theirs: a repair reads N - Q + 1 of them
 * (quorum/counter-repair.ts). "now"; "waits" for unreachable ones that may
 * hold theirs; "never": too few at all, and no client can (beyond N - Q
 * lost members only the operator takes members back).
 */
function repairReach(
  kept: number,
  { unreachable, nodeCount }: Beside,
): { reach: "now" | "waits" | "never"; reads: number } {
  const reads = repairReadsOf(nodeCount);
  if (kept >= reads) return { reach: "now", reads };
  return { reach: kept + unreachable >= reads ? "waits" : "never", reads };
}

/** Whether clients take back a node that came back empty: its fencing counters are repaired. */
function lockRepairOutlook(beside: Beside): string {
  const { intact, nodeCount } = beside;
  const { reach, reads } = repairReach(intact, beside);
  if (reach === "now") return "the next lock call starts its restart quarantine and fencing repair";
  if (reach === "waits") {
    return (
      "the next lock call starts its restart quarantine; its fencing repair waits for " +
      `${reads} nodes that kept their data to answer (${intact} do now)`
    );
  }
  return (
    `and ${intact} of the ${nodeCount} nodes kept their data, too few to repair it from (it ` +
    `needs ${reads}): no client can; see the operations guide, "A majority of nodes lost their ` +
    'disks" (`redquorum fencing-floor`)'
  );
}

/**
 * Whether clients repair a node that lost the ID counter; if not, its
 * highest ID is unknown for good. By the repair's own rule
 * (`repairableFrom`): a restarted node's counter may lag, and counts only
 * when every other node answers holding one.
 */
function idRepairOutlook(beside: Beside): string {
  const { holders, intact, unreachable, nodeCount } = beside;
  const reads = repairReadsOf(nodeCount);
  if (repairableFrom(intact, holders, nodeCount))
    return "the next ID call repairs it from the others";
  if (intact + unreachable >= reads) {
    return `it is repaired from the others once ${reads} nodes that kept the counter answer (${intact} do now)`;
  }
  if (repairableFrom(intact, holders + unreachable, nodeCount)) {
    return `it is repaired from the others once all ${nodeCount - 1} others answer holding the counter (${holders} do now)`;
  }
  return (
    `and ${intact} of the ${nodeCount} nodes kept the counter, too few to repair it from (it needs ` +
    `${reads}, or every other node holding it): no client can; see the operations guide, "A majority of nodes lost their disks"`
  );
}

function verdictBy(
  nodes: readonly NodeStatus[],
  problemOf: (node: NodeStatus, options: VerdictOptions, beside: Beside) => string | undefined,
  options: VerdictOptions,
): Verdict {
  const needed = Math.floor(nodes.length / 2) + 1;
  const reasons: string[] = [];
  let usable = 0;
  const beside: Beside = {
    inUse: nodes.some((node) => node.marker || node.markerValue !== undefined),
    holders: nodes.filter(
      (node) => node.reachable && (node.marker || node.markerValue !== undefined),
    ).length,
    intact: nodes.filter((node) => node.reachable && node.marker).length,
    unreachable: nodes.filter((node) => !node.reachable).length,
    nodeCount: nodes.length,
  };
  for (const node of nodes) {
    const problem = problemOf(node, options, beside);
    if (problem) reasons.push(`${node.endpoint}: ${problem}`);
    else usable++;
  }
  return { safe: usable >= needed, usable, needed, reasons };
}

export interface VerdictOptions {
  /**
   * Count a node that restarted and that no client has checked since
   * (`NodeStatus.restartUnchecked`) out: the first client to check it
   * takes it out of service until it is repaired. `redquorum status` does,
   * for the operator who waits for each node to be back before restarting
   * the next. The ID server's /healthz does not: its own next call checks
   * and repairs such nodes (waiting for the repairs when it must), and
   * counted out they could make every server unhealthy, so that no call
   * reaches one to do it.
   */
  readonly restartsUncheckedOut?: boolean;
}

/**
 * Safe for locks, from `Redlock.status()`: a majority of the nodes
 * reachable, masters, marked and not quarantined. Safe for IDs, from
 * `NextId.status()` (`idNodes`, by default the same list): a majority
 * reachable masters whose counter's marker is intact and that run
 * appendonly yes + appendfsync always. With `restartsUncheckedOut`, also
 * not restarted since a client last checked them.
 */
export function verdictOf(
  nodes: readonly NodeStatus[],
  idNodes: readonly NodeStatus[] = nodes,
  options: VerdictOptions = {},
): ClusterVerdict {
  return {
    locks: verdictBy(nodes, lockProblem, options),
    ids: verdictBy(idNodes, idProblem, options),
  };
}
