/** `redquorum status`: Redlock.status(), one row per node, and a verdict. */
import { Command } from "commander";
import { Redlock } from "../lock/redlock.js";
import type { NodeStatus } from "../node/status.js";
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

/** Why a node cannot take part in locks, or undefined when it can. */
function lockProblem(node: NodeStatus): string | undefined {
  if (!node.reachable) return `unreachable (${node.error ?? "no answer"})`;
  if (node.role !== "master") return `role ${node.role ?? "unknown"}, not master`;
  if ((node.quarantineRemainingMs ?? 0) > 0) {
    return `quarantined for ${Math.ceil(node.quarantineRemainingMs! / 1000)} s more`;
  }
  if (!node.marker) return "no marker: run `redquorum init` on a new cluster";
  return undefined;
}

/** Why a node cannot take part in IDs, or undefined when it can. */
function idProblem(node: NodeStatus): string | undefined {
  const problem = lockProblem(node);
  if (problem) return problem;
  if (node.appendonly !== "yes") return `appendonly ${node.appendonly ?? "unknown"}, needs yes`;
  if (node.appendfsync !== "always") {
    return `appendfsync ${node.appendfsync ?? "unknown (CONFIG disabled?)"}, needs always`;
  }
  return undefined;
}

function verdictBy(
  nodes: readonly NodeStatus[],
  problemOf: (node: NodeStatus) => string | undefined,
): Verdict {
  const needed = Math.floor(nodes.length / 2) + 1;
  const reasons: string[] = [];
  let usable = 0;
  for (const node of nodes) {
    const problem = problemOf(node);
    if (problem) reasons.push(`${node.endpoint}: ${problem}`);
    else usable++;
  }
  return { safe: usable >= needed, usable, needed, reasons };
}

/**
 * Safe for locks: a majority of the nodes reachable, masters, marked and not
 * quarantined. Safe for IDs: a majority that are all that and also run
 * appendonly yes + appendfsync always.
 */
export function verdictOf(nodes: readonly NodeStatus[]): ClusterVerdict {
  return { locks: verdictBy(nodes, lockProblem), ids: verdictBy(nodes, idProblem) };
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
    node.marker ? "yes" : "no",
    quarantine > 0 ? `${Math.ceil(quarantine / 1000)} s` : "no",
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
