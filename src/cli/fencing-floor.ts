/** `redquorum fencing-floor <token>`: Redlock.raiseFencingFloor(), and per node what it found and did. */
import { Command } from "commander";
import type { FencingFloorReport } from "../fencing/floor.js";
import { Redlock } from "../lock/redlock.js";
import {
  diagnose,
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

interface FencingFloorCliOptions extends NodesOptions {
  json?: boolean;
}

export function fencingFloorCommand(): Command {
  return new Command("fencing-floor")
    .description(
      "after more than N - Q nodes lost their fencing counters before any repair (fenced locks " +
        "refused for good): set the floor of every node whose counters are unknown to <token>, " +
        "which must be at least every fencing token issued (the highest token your protected " +
        "resource accepted); a value too low lets a token go backwards",
    )
    .argument("<token>", "at least every fencing token issued on this cluster (decimal)")
    .addOption(nodesOption())
    .addOption(jsonOption())
    .action(async (token: string, options: FencingFloorCliOptions) => {
      const redlock = new Redlock(nodesFrom(options), { onWarning });
      try {
        const reports = await redlock.raiseFencingFloor({ atLeast: token });
        if (options.json) {
          printJson(reports);
        } else {
          printData(
            formatTable(
              ["NODE", "FOUND", "ACTION", "DETAIL"],
              reports.map((r) => [r.endpoint, r.found, r.action, r.detail]),
            ),
          );
        }
        const left = leftUnknown(reports);
        if (left) {
          diagnose(`fencing-floor: ${left}`);
          process.exitCode = exitCodes.unavailable;
        }
      } finally {
        await redlock.close();
      }
    });
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
