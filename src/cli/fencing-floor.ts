/** `redquorum fencing-floor <token>`: Redlock.raiseFencingFloor(), and per node what it found and did. */
import { Command } from "commander";
import type { FencingFloorReport } from "../fencing/floor.js";
import { Redlock } from "../lock/redlock.js";
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

interface FencingFloorCliOptions extends NodesOptions, MaxTtlOptions {
  json?: boolean;
}

export function fencingFloorCommand(): Command {
  return (
    new Command("fencing-floor")
      .description(
        "after more than N - Q nodes lost their fencing counters before any repair (fenced locks " +
          "refused for good): raise every node's fencing floor to <token>, and the nodes whose " +
          "counters are unknown vote on tokens again; <token> must be at least every fencing token " +
          "issued (your protected resource's highest accepted token plus a margin larger than the " +
          "grants made since: a holder may have a higher one not yet presented); a value too low " +
          "lets a token go back or repeat (run it again with a higher one: a floor is only ever " +
          "raised); a node with no marker is taken for one that lost its memory (marked lost, " +
          "quarantined)",
      )
      .argument("<token>", "at least every fencing token issued on this cluster (decimal)")
      .addOption(nodesOption())
      // Its first contact records this client's maxTtlMs on the nodes, as
      // every client's does: a longer one would lengthen later quarantines.
      .addOption(maxTtlOption())
      .addOption(jsonOption())
      .action(async (token: string, options: FencingFloorCliOptions) => {
        const redlock = new Redlock(nodesFrom(options), { onWarning, maxTtlMs: options.maxTtl });
        try {
          const reports = await redlock.raiseFencingFloor({ atLeast: token });
          printNodeReports("fencing-floor", reports, options.json, leftUnknown(reports));
        } finally {
          await redlock.close();
        }
      })
  );
}

/** Nodes that may still have unknown counters after the command, if any: why. */
export function leftUnknown(reports: readonly FencingFloorReport[]): string | undefined {
  const unknown = reports.filter((r) => r.found === "unknown" && r.action === "none").length;
  const unreachable = reports.filter((r) => r.found === "unreachable").length;
  if (unknown === 0 && unreachable === 0) return undefined;
  const parts = [
    unknown > 0 ? `${unknown} with unknown counters left as they are` : "",
    unreachable > 0 ? `${unreachable} unreachable` : "",
  ].filter(Boolean);
  return `${parts.join(", ")}; see each node's DETAIL, and run it again`;
}
