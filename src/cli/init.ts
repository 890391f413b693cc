/** `redquorum init`: Redlock.init(), and per node what it found and did. */
import { Command } from "commander";
import type { InitReport } from "../lock/init.js";
import { Redlock } from "../lock/redlock.js";
import { quorumOf } from "../quorum/round.js";
import {
  jsonOption,
  type MaxTtlOptions,
  maxTtlOption,
  type NodesOptions,
  nodesFrom,
  nodesOption,
  onWarning,
  printNodeReports,
} from "./common.js";

interface InitOptions extends NodesOptions, MaxTtlOptions {
  json?: boolean;
  liftQuarantines?: boolean;
}

export function initCommand(): Command {
  return new Command("init")
    .description(
      "mark the nodes of a cluster redquorum has not used yet (safe to run at every start: " +
        "on a cluster in use it changes nothing and reports each node; but after every node " +
        "lost its memory within the longest max TTL, the cluster looks new to it)",
    )
    .addOption(nodesOption())
    .addOption(maxTtlOption())
    .option(
      "--lift-quarantines",
      "also lift the quarantines running on a cluster with no node in service: only for nodes " +
        "you know are new (a node restarted empty looks new, and may have forgotten a lock still held)",
    )
    .addOption(jsonOption())
    .action(async (options: InitOptions) => {
      const redlock = new Redlock(nodesFrom(options), { onWarning, maxTtlMs: options.maxTtl });
      try {
        const reports = await redlock.init({ liftQuarantines: options.liftQuarantines === true });
        // A script that runs init before its services must not start them
        // on a cluster that will refuse every lock (see each node's DETAIL).
        printNodeReports("init", reports, options.json, notReadyReason(reports));
      } finally {
        await redlock.close();
      }
    });
}

/**
 * Why the cluster cannot grant a lock after init, if it cannot: fewer than
 * a quorum of nodes in service (found so, or marked now).
 */
export function notReadyReason(reports: readonly InitReport[]): string | undefined {
  const serving = reports.filter((r) => r.serves === "locks").length;
  const needed = quorumOf(reports.length);
  if (serving >= needed) return undefined;
  const recovering = reports.filter((r) => r.action === "left to recover").length;
  const quarantined = reports.filter((r) => r.found === "in quarantine").length;
  const unreachable = reports.filter((r) => r.found === "unreachable").length;
  const parts = [
    recovering > 0 ? `${recovering} left to recover` : "",
    quarantined > 0 ? `${quarantined} in quarantine` : "",
    unreachable > 0 ? `${unreachable} unreachable` : "",
  ].filter(Boolean);
  return (
    `not ready for locks: ${serving} of ${reports.length} nodes in service, ${needed} needed` +
    (parts.length > 0 ? ` (${parts.join(", ")})` : "") +
    "; see each node's DETAIL for what to do"
  );
}
