/** `redquorum status`: Redlock.status(), one row per node, and a verdict. */
import { Command } from "commander";
import { NextId } from "../id/next-id.js";
import { Redlock } from "../lock/redlock.js";
import { membershipStatus } from "../membership/api.js";
import type { NodeStatus } from "../node/status.js";
import { restartUnchecked, type Verdict, verdictOf } from "../node/verdict.js";
import {
  formatTable,
  idKeyOption,
  jsonOption,
  type NodesOptions,
  nodesFrom,
  nodesOption,
  onWarning,
  printData,
  printJson,
} from "./common.js";
import { exitCodes } from "./exit-codes.js";
import { describeLostMemory, describeRecord } from "./members.js";

interface StatusOptions extends NodesOptions {
  json?: boolean;
  key: string;
}

function persistenceOf(node: NodeStatus): string {
  if (!node.reachable) return "-";
  return node.appendonly === "yes" ? `aof ${node.appendfsync ?? "?"}` : "no aof";
}

/** One node's row: `idNode` is the same node as NextId sees it (its counter's marker). */
function row(node: NodeStatus, idNode: NodeStatus | undefined): string[] {
  if (!node.reachable) {
    return [node.endpoint, "no", "-", "-", "-", "-", "-", "-", "-", "-"];
  }
  // A restart no client has checked: the marker still reads "1", but the
  // first check takes the node out until repaired.
  const counter = !idNode?.reachable
    ? "-"
    : !idNode.marker
      ? (idNode.markerValue ?? "no")
      : idNode.restartUnchecked
        ? restartUnchecked
        : "yes";
  const marker = !node.marker
    ? (node.markerValue?.split(":")[0] ?? "no")
    : node.restartUnchecked
      ? restartUnchecked
      : "yes";
  const quarantine = node.quarantineRemainingMs ?? 0;
  return [
    node.endpoint,
    "yes",
    `${(node.latencyMs ?? 0).toFixed(1)} ms`,
    node.role ?? "?",
    (node.runId ?? "?").slice(0, 12),
    persistenceOf(node),
    node.maxmemoryPolicy ?? "?",
    marker,
    quarantine > 0
      ? node.quarantineJudged === false
        ? "judging"
        : `${Math.ceil(quarantine / 1000)} s`
      : "no",
    counter,
  ];
}

function describe(what: string, verdict: Verdict): string {
  const count = `${verdict.usable} of ${verdict.reasons.length + verdict.usable} nodes usable, ${verdict.needed} needed`;
  const head = `${what}: ${verdict.safe ? "safe" : "NOT safe"} (${count})`;
  return [head, ...verdict.reasons.map((reason) => `  ${reason}`)].join("\n");
}

/**
 * No ID counter on the nodes: every node that answered lacks the counter's
 * marker, in any form. A cluster used only for locks is not "NOT safe" for
 * IDs: it never had any. (A counter lost from every node at once looks the
 * same to the nodes.)
 */
function idsUninitialised(idNodes: readonly NodeStatus[]): boolean {
  const answered = idNodes.filter((node) => node.reachable);
  return answered.length > 0 && answered.every((node) => node.markerValue === undefined);
}

export function statusCommand(): Command {
  return new Command("status")
    .description(
      "each node's state, and whether the cluster is safe for locks and for IDs (the counter " +
        "at --key) " +
        "(exit 0 when safe for locks, 3 when not or when the node list is refused)",
    )
    .addOption(nodesOption())
    .addOption(idKeyOption("the ID counter's Redis key, for the IDs verdict"))
    .addOption(jsonOption())
    .action(async (options: StatusOptions) => {
      const urls = nodesFrom(options);
      const redlock = new Redlock(urls, { onWarning });
      // IDs have a marker of their own (beside the counter) and no lock
      // quarantine: their verdict comes from NextId's view of the nodes.
      const ids = new NextId(urls, { key: options.key });
      let nodes: NodeStatus[];
      let idNodes: NodeStatus[];
      let membership: Awaited<ReturnType<typeof membershipStatus>>;
      try {
        [nodes, idNodes, membership] = await Promise.all([
          redlock.status(),
          ids.status(),
          membershipStatus(urls),
        ]);
      } finally {
        await Promise.all([redlock.close(), ids.close()]);
      }
      // A restarted node no client has checked yet counts out: the first
      // check takes it out of service until it is repaired.
      const verdict = verdictOf(nodes, idNodes, { restartsUncheckedOut: true });
      if (options.json) {
        printJson({ nodes, idNodes, verdict, membership });
      } else {
        printData(
          formatTable(
            [
              "NODE",
              "REACHABLE",
              "LATENCY",
              "ROLE",
              "RUN_ID",
              "PERSISTENCE",
              "EVICTION",
              "MARKER",
              "QUARANTINE",
              "ID COUNTER",
            ],
            nodes.map((node, i) => row(node, idNodes[i])),
          ),
        );
        const idsLine = idsUninitialised(idNodes)
          ? `IDs: not initialised (no node holds the counter ${JSON.stringify(options.key)}; ` +
            "`redquorum id init` creates it on a new cluster)"
          : describe("IDs", verdict.ids);
        printData(`\n${describe("locks", verdict.locks)}\n${idsLine}`);
        printData(describeRecord(membership.record));
        // Clients with this list are refused: say why, and what to do.
        if (membership.problem) printData(`  NOT safe: ${membership.problem}`);
        // Not a problem for clients: they take such a member back.
        for (const endpoint of membership.lostMemory ?? []) printData(describeLostMemory(endpoint));
      }
      if (!verdict.locks.safe || membership.problem) process.exitCode = exitCodes.unavailable;
    });
}
