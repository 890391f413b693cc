/**
 * node-redlock's account of an operation: one `ExecutionStats` per attempt,
 * and `ExecutionError` when the attempts ran out. The drop-in builds them
 * from redquorum's outcomes, which name a node only when it failed.
 */
import {
  LockExpiredError,
  NodeError,
  QuorumError,
  type RedquorumError,
  ResourceLockedError,
} from "../errors.js";
import type { NodeInput } from "../node/resolve.js";

/** A node as the caller gave it (node-redlock: an ioredis client). */
export type Client = NodeInput;

/**
 * One attempt's votes, as node-redlock's: `votesFor` the clients of the
 * nodes that granted (extended, released), `votesAgainst` each other
 * node's client with its error (`ResourceLockedError` where another holder
 * has the resource). For an attempt that succeeded they are exact once the
 * promise resolves (when every node answered, at most a node timeout after
 * the grant). A failed attempt names only the nodes that failed (its
 * error's `nodeErrors`): redquorum does not say which nodes granted or
 * answered "locked" there, so `grantedCount` and `lockedCount` count them.
 */
export interface ExecutionStats {
  readonly membershipSize: number;
  readonly quorumSize: number;
  readonly votesFor: Set<Client>;
  readonly votesAgainst: Map<Client, Error>;
  /** Nodes that granted (acquire), extended, or released our keys. */
  readonly grantedCount: number;
  /** Nodes that answered that another holder has a resource (acquire). */
  readonly lockedCount: number;
}

export interface ExecutionResult {
  readonly attempts: ReadonlyArray<Promise<ExecutionStats>>;
}

/**
 * An operation (acquire, extend, release) did not succeed within its
 * attempts: the resource is locked, or too few nodes answered. `cause` is
 * redquorum's error for the last attempt (`ResourceLockedError`,
 * `QuorumError`, `LockExpiredError`, `LockLostError`), with its stable `code`.
 */
export class ExecutionError extends Error {
  readonly attempts: ReadonlyArray<Promise<ExecutionStats>>;

  constructor(
    message: string,
    attempts: ReadonlyArray<Promise<ExecutionStats>>,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.attempts = attempts;
  }

  override get name(): string {
    return "ExecutionError";
  }
}

/** node-redlock's message when the attempts ran out. */
export const retryWindowMessage =
  "The operation was unable to achieve a quorum during its retry window.";

/** Clients by the endpoint redquorum names them with in its errors. */
export type ClientsByEndpoint = ReadonlyMap<string, Client>;

/** One node's answer to a round, as redquorum records it. */
export type NodeAnswer =
  | { readonly kind: "yes" | "no"; readonly value?: unknown }
  | { readonly kind: "error"; readonly error: Error }
  | undefined;

/**
 * The stats of an attempt that succeeded, from each node's answer
 * (`answers[i]` is node i's, the client `clients[i]`); `locked(i)` is the
 * error of node i that answered "no".
 */
export function answeredStats(
  clients: readonly Client[],
  quorum: number,
  answers: readonly NodeAnswer[],
  locked: (index: number) => Error,
): ExecutionStats {
  const votesFor = new Set<Client>();
  const votesAgainst = new Map<Client, Error>();
  let lockedCount = 0;
  clients.forEach((client, i) => {
    const answer = answers[i];
    if (answer?.kind === "yes") votesFor.add(client);
    else if (answer?.kind === "no") {
      lockedCount++;
      votesAgainst.set(client, locked(i));
    } else if (answer?.kind === "error") votesAgainst.set(client, answer.error);
  });
  return {
    membershipSize: clients.length,
    quorumSize: quorum,
    votesFor,
    votesAgainst,
    grantedCount: votesFor.size,
    lockedCount,
  };
}

/** The stats of an attempt that failed with `error` (one of `isVoteFailure`'s). */
export function failedStats(
  nodeCount: number,
  quorum: number,
  error: unknown,
  clients: ClientsByEndpoint,
): ExecutionStats {
  const votesAgainst = new Map<Client, Error>();
  for (const nodeError of nodeErrorsOf(error)) {
    const client = clients.get(nodeError.endpoint);
    if (client !== undefined) votesAgainst.set(client, nodeError);
  }
  const failed = nodeErrorsOf(error).length;
  const lockedCount = error instanceof ResourceLockedError ? error.heldNodeCount : 0;
  const grantedCount =
    error instanceof QuorumError
      ? error.successCount
      : error instanceof ResourceLockedError
        ? Math.max(0, nodeCount - lockedCount - failed)
        : 0;
  return {
    membershipSize: nodeCount,
    quorumSize: quorum,
    votesFor: new Set(),
    votesAgainst,
    grantedCount,
    lockedCount,
  };
}

/** The nodes an error names as failed. */
export function nodeErrorsOf(error: unknown): readonly NodeError[] {
  if (error instanceof QuorumError || error instanceof ResourceLockedError) {
    return error.nodeErrors;
  }
  return error instanceof NodeError ? [error] : [];
}

/**
 * An attempt's failure that another attempt may overcome, as node-redlock
 * retries every vote against: the resource locked, too few nodes, or a
 * majority too slow for the duration. Anything else (a bad argument, a
 * closed instance, a node set that cannot vote) ends the call at once.
 */
export function isVoteFailure(error: unknown): error is RedquorumError {
  return (
    error instanceof ResourceLockedError ||
    error instanceof QuorumError ||
    error instanceof LockExpiredError
  );
}
