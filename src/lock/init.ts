/**
 * `Redlock.init()`: makes a cluster that redquorum has never used ready for
 * its first lock by marking every node (a client cannot tell a brand-new
 * node from one that restarted empty), and leaves a cluster in use alone.
 * What it found and did is reported node by node.
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
  const inUse = found.some((reply) => reply?.[0] === initState.healthy);
  const reports = group.nodes.map((node, i) =>
    reportOf(node.endpoint, found[i], check.outcomes[i], inUse),
  );
  if (inUse) return reports;
  // A cluster redquorum never used: every node must be marked at once.
  if (check.errorCount > 0) throw group.quorumError("init", check, group.nodes.length);
  const write = await group.round(
    (node, i) => node.evalScript(initNodeScript, initKeys, ["write", found[i]![2] ?? ""]),
    {
      isYes: (reply) => Array.isArray(reply) && reply[0] === initState.healthy,
      stop: "all",
      timeoutMs,
    },
  );
  return reports.map((report, i) => afterWrite(report, write.outcomes[i]));
}

/** What the check found on one node, and what init will do there. */
function reportOf(
  endpoint: string,
  reply: CheckReply | undefined,
  outcome: Outcome<unknown> | undefined,
  inUse: boolean,
): InitReport {
  if (!reply) {
    const error = outcome?.kind === "error" ? outcome.error.message : "no answer";
    return { endpoint, found: "unreachable", action: "none", detail: error };
  }
  const marker = reply[1] ? `marker ${JSON.stringify(reply[1])}` : "no marker";
  if (reply[0] === initState.healthy) {
    return { endpoint, found: "in service", action: "none", detail: marker };
  }
  return {
    endpoint,
    found: "not marked",
    action: inUse ? "left to recover" : "marked",
    detail: inUse
      ? `${marker} while other nodes are in service: it lost its memory, so it serves its ` +
        "quarantine and has its fencing counters repaired from the others; marking it now " +
        "could let a second client take a lock it forgot"
      : marker,
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
