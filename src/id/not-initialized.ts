/**
 * ERR_NOT_INITIALIZED in command-line terms, for the CLI and the ID
 * server: what the operator runs is `redquorum id init`, with the key the
 * command or server was given, not the library's `init()`.
 */
import type { NotInitializedError } from "../errors.js";
import { idDefaults } from "../limits.js";

/** `nodesHint`: which `--nodes` to run it with ("this server's --nodes", "the same --nodes"). */
export function notInitializedMessage(error: NotInitializedError, nodesHint: string): string {
  const key = error.key === idDefaults.key ? "" : ` --key ${JSON.stringify(error.key)}`;
  return (
    `the ID counter ${JSON.stringify(error.key)} is missing on ${error.missingNodeCount} of ` +
    `${error.nodeCount} nodes: on a new cluster run \`redquorum id init${key}\` once, with ` +
    `${nodesHint}; if these nodes lost their data, bring back nodes that kept it ` +
    "(`redquorum id init` would repeat IDs)"
  );
}
