/** `redquorum init`: Redlock.init(), and per node what it found and did. */
import { Command } from "commander";
import { Redlock } from "../lock/redlock.js";
import {
  formatTable,
  jsonOption,
  type MaxTtlOptions,
  maxTtlOption,
  type NodesOptions,
  nodesFrom,
  nodesOption,
  onWarning,
  printData,
  printJson,
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
      } finally {
        await redlock.close();
      }
    });
}
