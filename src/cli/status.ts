/** `redquorum status`: Redlock.status(), one row per node, and a verdict. */
import { Command } from "commander";
import { Redlock } from "../lock/redlock.js";
import type { NodeStatus } from "../node/status.js";
import { type Verdict, verdictOf } from "../node/verdict.js";
import {
  formatTable,
  jsonOption,
  type NodesOptions,
  nodesFrom,
  nodesOption,
  onWarning,
  printData,
  printJson,
} from "./common.js";
import { exitCodes } from "./exit-codes.js";

interface StatusOptions extends NodesOptions {
  json?: boolean;
}

function persistenceOf(node: NodeStatus): string {
  if (!node.reachable) return "-";
  return node.appendonly === "yes" ? `aof ${node.appendfsync ?? "?"}` : "no aof";
}

function row(node: NodeStatus): string[] {
  if (!node.reachable) {
    return [node.endpoint, "no", "-", "-", "-", "-", "-", "-", "-"];
  }
  const quarantine = node.quarantineRemainingMs ?? 0;
  return [
    node.endpoint,
    "yes",
    `${(node.latencyMs ?? 0).toFixed(1)} ms`,
    node.role ?? "?",
    (node.runId ?? "?").slice(0, 12),
    persistenceOf(node),
    node.maxmemoryPolicy ?? "?",
    node.marker ? "yes" : (node.markerValue?.split(":")[0] ?? "no"),
    quarantine > 0
      ? node.quarantineJudged === false
        ? "judging"
        : `${Math.ceil(quarantine / 1000)} s`
      : "no",
  ];
}

function describe(what: string, verdict: Verdict): string {
  const count = `${verdict.usable} of ${verdict.reasons.length + verdict.usable} nodes usable, ${verdict.needed} needed`;
  const head = `${what}: ${verdict.safe ? "safe" : "NOT safe"} (${count})`;
  return [head, ...verdict.reasons.map((reason) => `  ${reason}`)].join("\n");
}

export function statusCommand(): Command {
  return new Command("status")
    .description(
      "each node's state, and whether the cluster is safe for locks and for IDs " +
        "(exit 0 when safe for locks, 3 when not)",
    )
    .addOption(nodesOption())
    .addOption(jsonOption())
    .action(async (options: StatusOptions) => {
      const redlock = new Redlock(nodesFrom(options), { onWarning });
      let nodes: NodeStatus[];
      try {
        nodes = await redlock.status();
      } finally {
        await redlock.close();
      }
      const verdict = verdictOf(nodes);
      if (options.json) {
        printJson({ nodes, verdict });
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
            ],
            nodes.map(row),
          ),
        );
        printData(`\n${describe("locks", verdict.locks)}\n${describe("IDs", verdict.ids)}`);
      }
      if (!verdict.locks.safe) process.exitCode = exitCodes.unavailable;
    });
}
