/**
 * `redquorum members`: the cluster's recorded membership (show), and a
 * change of one member (add, remove, replace) while clients keep running.
 */
import { Command } from "commander";
import { InvalidArgumentError } from "../errors.js";
import {
  changeMembers,
  type MemberChangeReport,
  type MemberChangeRequest,
  membershipStatus,
} from "../membership/api.js";
import { describeMembers, type MembershipRecord } from "../membership/record.js";
import { quorumOf } from "../quorum/round.js";
import {
  diagnose,
  formatTable,
  jsonOption,
  type NodesOptions,
  nodesFrom,
  nodesOption,
  printData,
  printJson,
} from "./common.js";
import { UsageError } from "./errors.js";
import { exitCodes } from "./exit-codes.js";

interface MembersOptions extends NodesOptions {
  json?: boolean;
}

/** One line for a record: what status and show print. */
export function describeRecord(record: MembershipRecord | undefined): string {
  if (!record) return "membership: not recorded (run `redquorum init` once every node answers)";
  return `membership: cluster ${record.clusterId}, epoch ${record.epoch}, ${record.members.length} members: ${describeMembers(record)}`;
}

function printChange(report: MemberChangeReport, json: boolean | undefined): void {
  if (json) {
    printJson(report);
    return;
  }
  printData(
    formatTable(
      ["NODE", "RESULT"],
      report.nodes.map((node) => [node.endpoint, node.result]),
    ),
  );
  printData(`\nfrom ${describeRecord(report.from)}\nto   ${describeRecord(report.to)}`);
  printData(
    "\nGive every client the new list now (clients on the old one are refused until they reload it).",
  );
}

/** A member that lost its memory, not yet taken back: no problem for clients (`status`, `members show`). */
export function describeLostMemory(endpoint: string): string {
  return (
    `  ${endpoint}: lost its memory (no record at a member's address); a lock or ID call of a ` +
    "client with this list takes it back once enough other members holding the record answer " +
    "(a change of members waits until then)"
  );
}

/**
 * A member change as a subcommand. `argumentNames`: the request's fields
 * as the command names them, so that a bad one is reported as the user
 * gave it (`replace`'s <old-url> is the request's `remove`).
 */
function changeCommand(
  name: string,
  args: string,
  description: string,
  request: (...values: string[]) => MemberChangeRequest,
  argumentNames: Partial<Record<keyof MemberChangeRequest, string>>,
): Command {
  return new Command(name)
    .description(description)
    .arguments(args)
    .addOption(nodesOption())
    .addOption(jsonOption())
    .action(async (...input: unknown[]) => {
      const values = input.filter((value): value is string => typeof value === "string");
      const options = input.find(
        (value): value is MembersOptions =>
          typeof value === "object" && value !== null && !(value instanceof Command),
      ) as MembersOptions;
      const report = await changeMembers(nodesFrom(options), request(...values)).catch(
        (error: unknown) => {
          const named =
            error instanceof InvalidArgumentError &&
            argumentNames[error.argument as keyof MemberChangeRequest];
          if (!named) throw error;
          throw new UsageError(named, error.detail);
        },
      );
      printChange(report, options.json);
    });
}

export function membersCommand(): Command {
  const members = new Command("members").description(
    "the cluster's recorded members, and changing one while clients keep running (--nodes: the current member list)",
  );
  members.addCommand(
    new Command("show")
      .description(
        "each node's member id and the record the nodes hold (exit 3 when they disagree)",
      )
      .addOption(nodesOption())
      .addOption(jsonOption())
      .action(async (options: MembersOptions) => {
        const status = await membershipStatus(nodesFrom(options));
        // What too few nodes hold may be out of date: a change may have
        // landed on the others (and "not recorded" may be untrue).
        const answered = status.nodes.filter((node) => node.error === undefined).length;
        const needed = quorumOf(Math.max(status.nodes.length, status.record?.members.length ?? 0));
        const unread =
          answered < needed
            ? `only ${answered} of ${status.nodes.length} nodes answered, ${needed} needed: ` +
              "what is shown was read from too few of them and may be out of date (a change may " +
              "have landed on the others); run it again once they answer"
            : undefined;
        const problem = status.problem ?? unread;
        if (options.json) printJson(problem === undefined ? status : { ...status, problem });
        else {
          printData(
            formatTable(
              ["NODE", "MEMBER ID", "EPOCH", "RECORD"],
              status.nodes.map((node) => [
                node.endpoint,
                node.id ?? "-",
                node.record ? String(node.record.epoch) : "-",
                node.error ??
                  (node.record
                    ? `${node.record.clusterId}${node.changing ? " (changing: refuses votes)" : ""}`
                    : "none"),
              ]),
            ),
          );
          printData(
            `\n${unread && !status.record ? "membership: not read from a majority" : describeRecord(status.record)}`,
          );
          for (const endpoint of status.lostMemory ?? []) printData(describeLostMemory(endpoint));
        }
        if (problem) {
          diagnose(`members: ${problem}`);
          process.exitCode = exitCodes.unavailable;
        }
      }),
  );
  members.addCommand(
    changeCommand(
      "add",
      "<url>",
      "add a node that holds no record as a member (it joins in quarantine)",
      (url) => ({
        add: url!,
      }),
      { add: "<url>" },
    ),
  );
  members.addCommand(
    changeCommand(
      "remove",
      "<url>",
      "remove a member (give it as it appears in --nodes); only from an even number of members: from 3 or 5, replace it or add one first",
      (url) => ({
        remove: url!,
      }),
      { remove: "<url>" },
    ),
  );
  members.addCommand(
    changeCommand(
      "replace",
      "<old-url> <new-url>",
      "replace a member (it may be down) by a node that holds no record, in one step",
      (old, added) => ({ remove: old!, add: added! }),
      { remove: "<old-url>", add: "<new-url>" },
    ),
  );
  return members;
}
