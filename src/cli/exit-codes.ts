/**
 * The command line's exit codes, in one table: printed at the end of every
 * `--help` and in the README's "Command line" section. `exitCodeOf` maps
 * every error (the library's typed errors and the CLI's own) to one of them.
 */
import { constants } from "node:os";
import {
  AlreadyInitializedError,
  ContentionError,
  FenceOverflowError,
  IdOverflowError,
  InvalidArgumentError,
  LockExpiredError,
  LockLostError,
  NodeConfigurationError,
  NodeError,
  NotInitializedError,
  QueueFullError,
  QuorumError,
  RedquorumError,
  ResourceLockedError,
} from "../errors.js";
import { ListenError } from "../server/listen-error.js";
import { CounterInUseError, InterruptedError, LockNotAcquiredError, UsageError } from "./errors.js";

export const exitCodes = {
  ok: 0,
  unexpected: 1,
  usage: 2,
  unavailable: 3,
  lockNotAcquired: 4,
  lockLost: 5,
  /**
   * An ID space or a resource's fencing tokens used up. Not 3
   * (unavailable): that one says try again later, and this never passes;
   * not 1 (unexpected): it is no bug, and scripts should be able to tell
   * it apart.
   */
  idSpaceExhausted: 6,
  /**
   * `id init` on a counter that already handed out IDs. Not 1 (unexpected):
   * running it again on an initialised cluster is a normal mistake, and a
   * setup script may want to accept it; not 3: the cluster is fine.
   */
  idCounterInUse: 7,
  /**
   * stdout's reader went away (EPIPE) before everything was written: 128 +
   * SIGPIPE, what shells report for a C tool killed by it (`yes | head -1`
   * under `set -o pipefail`). Not 0: the output was cut short, which a
   * script may need to know; not 1: it is no bug.
   */
  outputClosed: 141,
} as const;

export type ExitCode = (typeof exitCodes)[keyof typeof exitCodes];

/** Rows of the table: code, meaning. */
export const exitCodeTable: readonly (readonly [string, string])[] = [
  ["0", "success; status: the cluster is safe for locks; init: a quorum of nodes serves locks"],
  ["1", "unexpected error"],
  [
    "2",
    "bad arguments or usage; serve: an address it cannot listen on (--port taken, a bad --host)",
  ],
  [
    "3",
    "cluster unavailable (too few nodes, misconfigured, not initialised; dev: no redis-server, or a node that did not start); status: not safe for locks, or the node list refused; " +
      "init: fewer than a quorum of nodes serve locks after it (say, quarantines to wait out: run it again); " +
      "lock: nodes too slow for --ttl (the command was not run)",
  ],
  ["4", "lock: the lock could not be had within --wait (the command was not run)"],
  [
    "5",
    "lock: the lock was lost while the command ran (SIGTERM, then SIGKILL after --kill-after; at once when its keys were found gone)",
  ],
  [
    "6",
    "id next: the ID space is used up (the counter would pass 2^63 - 1; a smaller --count may still fit); " +
      "retrying will not help: start a new counter under another --key; " +
      "lock: the resource's fencing tokens are used up (its counter is at 2^63 - 1): lock another resource name",
  ],
  [
    "7",
    "id init: the counter already handed out IDs; it is left as it is (not an error if it was initialised before: " +
      "id next takes IDs from it; a new counter needs another --key)",
  ],
  ["126, 127", "lock: the command could not be run (not executable, not found), as in shells"],
  [
    "141",
    "stdout was closed before all of the output was written (`| head -1`, `| grep -q`): the rest was dropped " +
      "quietly, as shells report a tool killed by SIGPIPE; id next: IDs not printed were taken but not " +
      "delivered (holes: none is handed out again); lock: only as the command's own code",
  ],
  [
    "other",
    "lock: the command's own exit code; 128 + n if it was killed by signal n; " +
      "serve: 128 + n after a second signal n stopped the drain",
  ],
];

/** The table as plain text, for the `--help` epilogue. */
export function exitCodeHelp(): string {
  const width = Math.max(...exitCodeTable.map(([code]) => code.length));
  const rows = exitCodeTable.map(([code, meaning]) => `  ${code.padEnd(width)}  ${meaning}`);
  return `\nExit codes:\n${rows.join("\n")}\n`;
}

/** 128 + the signal's number, as shells report a process killed by it. */
export function signalExitCode(signal: NodeJS.Signals): number {
  return 128 + (constants.signals[signal] ?? 0);
}

/** The one place where errors become exit codes. */
export function exitCodeOf(error: unknown): number {
  if (error instanceof UsageError || error instanceof InvalidArgumentError) return exitCodes.usage;
  // serve: the --host/--port given cannot be listened on.
  if (error instanceof ListenError) return exitCodes.usage;
  if (error instanceof IdOverflowError || error instanceof FenceOverflowError) {
    return exitCodes.idSpaceExhausted;
  }
  if (error instanceof CounterInUseError || error instanceof AlreadyInitializedError) {
    return exitCodes.idCounterInUse;
  }
  if (error instanceof InterruptedError) return signalExitCode(error.signal);
  if (error instanceof LockNotAcquiredError || error instanceof ResourceLockedError) {
    return exitCodes.lockNotAcquired;
  }
  // (`lock` itself returns lockLost for a LockExpiredError after the command ran.)
  if (error instanceof LockLostError) return exitCodes.lockLost;
  if (
    error instanceof LockExpiredError || // an acquire round slower than the TTL
    error instanceof QuorumError ||
    error instanceof NodeConfigurationError || // also DurabilityError
    error instanceof NodeError ||
    error instanceof NotInitializedError ||
    error instanceof ContentionError ||
    error instanceof QueueFullError
  ) {
    return exitCodes.unavailable;
  }
  // `dev` without redis-server, or with a node that did not start (a
  // redis-server that exits at once): nothing to run the cluster on.
  if (
    error instanceof RedquorumError &&
    (error.code === "ERR_REDIS_NOT_FOUND" || error.code === "ERR_CLUSTER")
  ) {
    return exitCodes.unavailable;
  }
  return exitCodes.unexpected; // ClosedError, bugs
}
