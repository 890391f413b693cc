/**
 * `Redlock.init()`: makes a cluster that redquorum has never used ready for
 * its first lock by marking every node (a client cannot tell a brand-new
 * node from one that restarted empty), and leaves a cluster in use alone
 * (on one that serves locks from nodes that lost their memory once, it
 * marks those and lifts no quarantine: ClusterUse below). What it found
 * and did is reported node by node.
 */

import { fenceFloorKey } from "../fencing/scripts.js";
import { initNodeScript, initState, markerKey, quarantineKey, runKey } from "../node/node-state.js";
import type { NodeGroup } from "../quorum/node-group.js";
import type { Outcome } from "../quorum/round.js";

/** What `Redlock.init()` found and did on one node. */
export interface InitReport {
  readonly endpoint: string;
  readonly found: "in service" | "not marked" | "unreachable";
  /** "marked": now in service; "left to recover": lost its memory in a cluster in use. */
  readonly action: "marked" | "left to recover" | "none";
  readonly detail: string;
}

/** The init script's reply to "check": {state, marker, server state}. */
type CheckReply = [number, string, string?];

const initKeys = [markerKey, quarantineKey, fenceFloorKey, runKey];

/**
 * Checks every node; on a cluster none of whose nodes is in service, marks
 * them all (which needs every node). `assertOpen` is called once first
 * contact is over.
 */
export async function initNodes(
  group: NodeGroup,
  timeoutMs: number,
  assertOpen: () => void,
): Promise<InitReport[]> {
  await group.ready().catch(() => {}); // a node that failed its check is reported below
  assertOpen();
  const check = await group.round((node) => node.evalScript(initNodeScript, initKeys, ["check"]), {
    isYes: () => true,
    stop: "all",
    timeoutMs,
  });
  const found = check.outcomes.map((outcome) =>
    outcome?.kind === "yes" ? (outcome.value as CheckReply) : undefined,
  );
  const use = found.some((reply) => reply?.[0] === initState.healthy)
    ? "in use"
    : found.some((reply) => reply?.[0] === initState.servesLocks)
      ? "serving locks"
      : "new";
  const reports = group.nodes.map((node, i) =>
    reportOf(node.endpoint, found[i], check.outcomes[i], use),
  );
  if (use === "in use") return reports;
  // No node keeps fencing counters: every node must be marked at once.
  if (check.errorCount > 0) throw group.quorumError("init", check, group.nodes.length);
  const lift = use === "new" ? "lift" : "keep";
  const write = await group.round(
    (node, i) => node.evalScript(initNodeScript, initKeys, ["write", found[i]![2] ?? "", lift]),
    {
      isYes: (reply) => Array.isArray(reply) && reply[0] === initState.healthy,
      stop: "all",
      timeoutMs,
    },
  );
  return reports.map((report, i) => afterWrite(report, write.outcomes[i]));
}

/**
 * What init found of the cluster. "in use": some node is in service (it
 * keeps fencing counters): init changes nothing. "serving locks": no node
 * is, but some node serves locks with a "lost:" marker (it lost its memory
 * once and served its quarantine; with fencing off nothing repairs it): a
 * lock may be held, so init marks those nodes and lifts no quarantine (a
 * rolling restart without persistence leaves every node "lost:" in turn,
 * and lifting the last one's quarantine could let a second client take a
 * lock it forgot). "new": no node serves locks (none marked, or each in
 * quarantine): init marks every node and lifts the quarantines, which the
 * first call on new nodes starts.
 */
type ClusterUse = "in use" | "serving locks" | "new";

/** What the check found on one node, and what init will do there. */
function reportOf(
  endpoint: string,
  reply: CheckReply | undefined,
  outcome: Outcome<unknown> | undefined,
  use: ClusterUse,
): InitReport {
  if (!reply) {
    const error = outcome?.kind === "error" ? outcome.error.message : "no answer";
    return { endpoint, found: "unreachable", action: "none", detail: error };
  }
  const marker = reply[1] ? `marker ${JSON.stringify(reply[1])}` : "no marker";
  if (reply[0] === initState.healthy) {
    return { endpoint, found: "in service", action: "none", detail: marker };
  }
  if (use === "new" || (use === "serving locks" && reply[0] === initState.servesLocks)) {
    return { endpoint, found: "not marked", action: "marked", detail: marker };
  }
  return {
    endpoint,
    found: "not marked",
    action: "left to recover",
    detail:
      use === "in use"
        ? `${marker} while other nodes are in service: it lost its memory, so it serves its ` +
          "quarantine and has its fencing counters repaired from the others; marking it now " +
          "could let a second client take a lock it forgot"
        : `${marker} while other nodes serve locks: it lost its memory, so it serves its ` +
          "quarantine; marking it now could let a second client take a lock it forgot",
  };
}

/** A node init meant to mark, if the write did not: why. */
function afterWrite(report: InitReport, outcome: Outcome<unknown> | undefined): InitReport {
  if (report.action !== "marked" || outcome?.kind === "yes") return report;
  return {
    ...report,
    action: "none",
    detail:
      outcome?.kind === "error"
        ? outcome.error.message
        : "it restarted or was flushed while init ran: it stays unmarked (run init() again)",
  };
}
