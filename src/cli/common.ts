/** What every command shares: the nodes, output on stdout, diagnostics on stderr. */

import { Option } from "commander";
import { defaults, idDefaults, limits } from "../limits.js";
import { endpointOfUrl } from "../node/resolve.js";
import type { NodeWarning } from "../quorum/node-group.js";
import { durationOption, formatDuration } from "./duration.js";
import { UsageError } from "./errors.js";
import { exitCodes } from "./exit-codes.js";

export const nodesEnv = "REDQUORUM_NODES";

export interface NodesOptions {
  nodes?: string;
}

export const nodesOption = (): Option =>
  new Option("--nodes <urls>", "comma-separated redis:// URLs of the Redis masters").env(nodesEnv);

export const jsonOption = (): Option => new Option("--json", "print the result as JSON");

export const maxTtlEnv = "REDQUORUM_MAX_TTL";

export interface MaxTtlOptions {
  maxTtl: number;
}

/**
 * Redlock's maxTtlMs (lock, init): give the one your services use. The
 * restart quarantine lasts the longest maxTtlMs of the cluster's recent
 * clients (lock/horizon.ts), so a longer one here lengthens theirs.
 * `lock` passes its shortest TTL as `minMs`: a shorter --max-ttl leaves no
 * TTL to give, and is refused as itself (not as a --ttl nobody gave).
 */
export const maxTtlOption = (minMs = 1): Option =>
  durationOption(
    "--max-ttl <duration>",
    "the longest lock TTL of this cluster's clients, as their maxTtlMs: the restart quarantine's length",
    formatDuration(defaults.maxTtlMs),
    { minMs, maxMs: limits.ttlMsMax },
  ).env(maxTtlEnv);

/**
 * The bound on each node's answer in a round, --node-timeout or
 * $REDQUORUM_NODE_TIMEOUT (lock: Redlock's default; id, serve: NextId's).
 */
export const nodeTimeoutOption = (defaultMs: number, description: string): Option =>
  durationOption(
    "--node-timeout <duration>",
    `bound on each node's answer in a round${description}`,
    formatDuration(defaultMs),
    { minMs: 1, maxMs: limits.nodeTimeoutMsMax },
  ).env("REDQUORUM_NODE_TIMEOUT");

/** NextId's `proposals` (id next, serve). */
export const proposalsOption = (): Option =>
  new Option(
    "--proposals <kind>",
    'what ID rounds propose: "dense" (1, 2, 3, …) or "clock" (microseconds since the epoch, ' +
      "so many independent clients win more rounds; a counter never goes back to small IDs)",
  )
    .choices(["dense", "clock"])
    .env("REDQUORUM_PROPOSALS")
    .default(idDefaults.proposals);

/**
 * The ID counter's key, --key or $REDQUORUM_ID_KEY: every command that
 * names the counter reads both, so that one environment serves `serve`,
 * `id init`, `id next` and `status` alike (a command that read only the
 * flag would act on another counter than the server's).
 */
export const idKeyOption = (description: string): Option =>
  new Option("--key <key>", description).env("REDQUORUM_ID_KEY").default("redquorum:id");

/** The node URLs from --nodes or $REDQUORUM_NODES. */
export function nodesFrom(options: NodesOptions): string[] {
  const nodes = (options.nodes ?? "")
    .split(",")
    .map((url) => url.trim())
    .filter((url) => url.length > 0);
  if (nodes.length === 0) {
    throw new UsageError(
      "--nodes",
      `give the Redis masters as comma-separated redis:// URLs, with --nodes or $${nodesEnv}`,
    );
  }
  // One address given twice is a mistake in the list typed (exit 2), not a
  // cluster misconfigured (the library's NodeConfigurationError, exit 3).
  // A URL that does not parse is left to the library, which names it.
  const seen = new Map<string, number>();
  nodes.forEach((url, index) => {
    let endpoint: string;
    try {
      endpoint = endpointOfUrl(url, index);
    } catch {
      return;
    }
    const first = seen.get(endpoint);
    if (first !== undefined) {
      throw new UsageError(
        `--nodes (or $${nodesEnv})`,
        `URLs ${first + 1} and ${index + 1} are the same node (${endpoint}): give each node once`,
      );
    }
    seen.set(endpoint, index);
  });
  return nodes;
}

/** Whether stdout can no longer be written (its reader went away, or a write failed): the rest of the output is dropped. */
let stdoutClosed = false;
/** The exit code a lost output gives (see watchOutputClosed); undefined while none was lost. */
let outputLostCode: number | undefined;
/** Whether stderr's reader went away: diagnostics are dropped, the exit code still tells. */
let stderrClosed = false;

/** The exit code that wins over the command's own when output was lost, if it was. */
export function outputLostExitCode(): number | undefined {
  return outputLostCode;
}

/**
 * Reads the end of the readers (`| head -1`, `| grep -q`) as Unix tools do:
 * without this, the EPIPE of the next write is an unhandled 'error' event,
 * a stack and exit 1, so a script could not trust the exit code. Node
 * ignores SIGPIPE, so it is not killed as a C tool would be: stdout's EPIPE
 * gives the code a shell reports for that (141), and the command goes on
 * writing nothing, closing its connections, so the process ends by itself.
 * Any other write error on stdout (a full disk, `> /dev/full`) loses the
 * output too: one line on stderr says so and the exit code is 1, instead
 * of a stack. An error on stderr, whatever it is, only drops diagnostics:
 * the exit code is still the outcome (a `lock` whose command runs, or
 * whose lock is lost, must not die of a diagnostic line).
 */
export function watchOutputClosed(): void {
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    stdoutClosed = true;
    // Also when this arrives after main() set the exit code (help is
    // written synchronously, its EPIPE is reported a tick later).
    if (error.code === "EPIPE") {
      outputLostCode = exitCodes.outputClosed;
    } else {
      outputLostCode ??= exitCodes.unexpected;
      diagnose(`could not write the output (${error.code ?? error.message}): it is lost`);
    }
    process.exitCode = outputLostCode;
  });
  process.stderr.on("error", () => {
    stderrClosed = true;
  });
}

/** Data: stdout. */
export function printData(text: string): void {
  if (stdoutClosed) return;
  process.stdout.write(text.endsWith("\n") ? text : `${text}\n`);
}

export function printJson(value: unknown): void {
  printData(JSON.stringify(value, (_key, v) => (typeof v === "bigint" ? v.toString() : v), 2));
}

/** Diagnostics: stderr, prefixed with the program's name. */
export function diagnose(message: string): void {
  if (stderrClosed) return;
  process.stderr.write(`redquorum: ${message}\n`);
}

/** Risky node settings (eviction) as one stderr line each, instead of process warnings. */
export function onWarning(warning: NodeWarning): void {
  diagnose(`warning: ${warning.endpoint}: ${warning.message}`);
}

/** A text table with aligned columns. */
export function formatTable(
  header: readonly string[],
  rows: readonly (readonly string[])[],
): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  return [line(header), ...rows.map(line)].join("\n");
}

/** What `init` and `fencing-floor` report for one node. */
export interface NodeReport {
  readonly endpoint: string;
  readonly found: string;
  readonly action: string;
  readonly detail: string;
}

/**
 * Prints per-node reports (a table, or JSON); with `problem`, also one
 * stderr line naming `command`, and exit code 3 (the cluster is not ready).
 */
export function printNodeReports(
  command: string,
  reports: readonly NodeReport[],
  json: boolean | undefined,
  problem: string | undefined,
): void {
  if (json) {
    printJson(reports);
  } else {
    printData(
      formatTable(
        ["NODE", "FOUND", "ACTION", "DETAIL"],
        reports.map((r) => [r.endpoint, r.found, r.action, r.detail]),
      ),
    );
  }
  if (problem) {
    diagnose(`${command}: ${problem}`);
    process.exitCode = exitCodes.unavailable;
  }
}
