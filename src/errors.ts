/**
 * Every error redquorum throws is a `RedquorumError` with a stable `code`.
 * Callers branch on `code` (or `instanceof`), never on message text.
 */
export type ErrorCode =
  | "ERR_INVALID_ARGUMENT"
  | "ERR_NODE_CONFIG"
  | "ERR_NODE"
  | "ERR_NODE_TIMEOUT"
  | "ERR_RESOURCE_LOCKED"
  | "ERR_QUORUM"
  | "ERR_LOCK_EXPIRED"
  | "ERR_LOCK_LOST"
  | "ERR_CLOSED"
  | "ERR_REDIS_NOT_FOUND"
  | "ERR_CLUSTER"
  | "ERR_NODE_DURABILITY"
  | "ERR_CONTENTION"
  | "ERR_ID_OVERFLOW"
  | "ERR_FENCE_OVERFLOW"
  | "ERR_NOT_INITIALIZED"
  | "ERR_ALREADY_INITIALIZED"
  | "ERR_QUEUE_FULL"
  | "ERR_MEMBERSHIP";

export class RedquorumError extends Error {
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }

  override get name(): string {
    return this.constructor.name;
  }
}

/** An argument or option was outside what is allowed; nothing was sent to any node. */
export class InvalidArgumentError extends RedquorumError {
  readonly argument: string;
  /** What was wrong and what is allowed, without the argument's name. */
  readonly detail: string;

  constructor(argument: string, message: string) {
    super("ERR_INVALID_ARGUMENT", `Invalid ${argument}: ${message}`);
    this.argument = argument;
    this.detail = message;
  }
}

/**
 * The set of nodes cannot give independent votes: the same server twice, a
 * replica, or a setting that breaks the algorithm's assumptions.
 */
export class NodeConfigurationError extends RedquorumError {
  readonly endpoints: readonly string[];

  constructor(endpoints: readonly string[], message: string, code: ErrorCode = "ERR_NODE_CONFIG") {
    super(code, message);
    this.endpoints = endpoints;
  }
}

/**
 * A node does not persist every write before answering (`appendonly yes` +
 * `appendfsync always`), or its settings cannot be read: NextId refuses it
 * unless the caller opts out explicitly.
 */
export class DurabilityError extends NodeConfigurationError {
  readonly setting: string;

  constructor(endpoint: string, setting: string, message: string) {
    super([endpoint], message, "ERR_NODE_DURABILITY");
    this.setting = setting;
  }
}

/**
 * The node list does not match the membership the nodes record (see
 * docs/membership.md): a node of another cluster or not a member, a member
 * the list lacks, or a change of members the client's list predates. Refused
 * before any vote counts; `endpoints` names the nodes that differ.
 */
export class MembershipError extends NodeConfigurationError {
  /**
   * "list": the list as a whole does not fit (another cluster, another
   * member set: reload the list), which stops every operation of the client;
   * "node": one node is not a member (say, it lost its memory and cannot
   * rejoin by itself), which takes that node out of service like any failed
   * check after first contact.
   */
  readonly scope: "list" | "node";

  constructor(endpoints: readonly string[], message: string, scope: "list" | "node" = "list") {
    super(endpoints, message, "ERR_MEMBERSHIP");
    this.scope = scope;
  }
}

/** One node failed one call: which node, and why. */
export class NodeError extends RedquorumError {
  readonly endpoint: string;

  constructor(endpoint: string, cause: unknown, code: ErrorCode = "ERR_NODE") {
    super(code, `${endpoint}: ${describeCause(cause)}`, { cause });
    this.endpoint = endpoint;
  }
}

/**
 * A node did not answer within the per-node timeout. `notReady`, when the
 * connection was not ready to carry the call: why (it was being opened;
 * the server answered but is loading its data set).
 */
export class NodeTimeoutError extends NodeError {
  readonly timeoutMs: number;

  constructor(endpoint: string, timeoutMs: number, notReady?: string) {
    super(
      endpoint,
      new Error(`no reply within ${timeoutMs} ms${notReady ? ` (${notReady})` : ""}`),
      "ERR_NODE_TIMEOUT",
    );
    this.timeoutMs = timeoutMs;
  }
}

/** Enough nodes answered, but another holder has the resource on too many of them. */
export class ResourceLockedError extends RedquorumError {
  readonly resources: readonly string[];
  /** Nodes that answered "held by someone else" in the last attempt. */
  readonly heldNodeCount: number;
  readonly nodeCount: number;
  readonly attempts: number;
  /** Nodes that failed in the last attempt besides (quarantined, down, ...). */
  readonly nodeErrors: readonly NodeError[];

  /**
   * node-redlock's shape, `new ResourceLockedError(message)`: the same class
   * as the errors redquorum throws (so `instanceof` holds for both), for a
   * node-redlock program that makes its own; it names no resources, and
   * its counts are 0.
   */
  constructor(message?: string);
  constructor(
    resources: readonly string[],
    heldNodeCount: number,
    nodeCount: number,
    attempts: number,
    nodeErrors?: readonly NodeError[],
  );
  constructor(
    resourcesOrMessage: readonly string[] | string = "",
    heldNodeCount = 0,
    nodeCount = 0,
    attempts = 0,
    nodeErrors: readonly NodeError[] = [],
  ) {
    const also = nodeErrors.map((error) => error.message).join("; ");
    const resources = typeof resourcesOrMessage === "string" ? [] : resourcesOrMessage;
    super(
      "ERR_RESOURCE_LOCKED",
      typeof resourcesOrMessage === "string"
        ? resourcesOrMessage
        : `${formatResources(resources)} is locked by another holder ` +
            `(held on ${heldNodeCount} of ${nodeCount} nodes in the last of ${attempts} attempt(s)` +
            (also ? `; failed: ${also})` : ")"),
    );
    this.resources = resources;
    this.heldNodeCount = heldNodeCount;
    this.nodeCount = nodeCount;
    this.attempts = attempts;
    this.nodeErrors = nodeErrors;
  }
}

/** Not enough nodes gave a usable answer to reach a majority. */
export class QuorumError extends RedquorumError {
  readonly operation: string;
  readonly quorum: number;
  readonly nodeCount: number;
  readonly successCount: number;
  /** One entry per failed node, with its endpoint and cause. */
  declare readonly nodeErrors: readonly NodeError[];

  constructor(
    operation: string,
    quorum: number,
    nodeCount: number,
    successCount: number,
    nodeErrors: readonly NodeError[],
  ) {
    // One line per failed node, once: the node errors are not repeated as a
    // cause or as an enumerable property (an uncaught error prints both).
    const lines = nodeErrors.map((error) => `\n  ${error.message}`).join("");
    const refused =
      nodeErrors.length > 0 && nodeErrors.every((error) => /ECONNREFUSED/.test(error.message));
    super(
      "ERR_QUORUM",
      `${operation} reached ${successCount} of ${nodeCount} nodes, needs ${quorum}` +
        (lines ? `:${lines}` : "") +
        (refused
          ? `\nis Redis running at ${nodeErrors.map((error) => error.endpoint).join(", ")}?`
          : ""),
    );
    this.operation = operation;
    this.quorum = quorum;
    this.nodeCount = nodeCount;
    this.successCount = successCount;
    Object.defineProperty(this, "nodeErrors", { value: nodeErrors, enumerable: false });
  }
}

/** The lock's validity ran out before the call: mutual exclusion is no longer guaranteed. */
export class LockExpiredError extends RedquorumError {
  readonly resources: readonly string[];
  readonly operation: string;

  constructor(operation: string, resources: readonly string[], message?: string) {
    super(
      "ERR_LOCK_EXPIRED",
      message ??
        `cannot ${operation} ${formatResources(resources)}: the lock's validity has run out`,
    );
    this.operation = operation;
    this.resources = resources;
  }
}

/** Rounds kept losing to other writers until the retry budget ran out. */
export class ContentionError extends RedquorumError {
  readonly operation: string;
  readonly attempts: number;

  constructor(operation: string, attempts: number) {
    super(
      "ERR_CONTENTION",
      `${operation} lost ${attempts} round(s) in a row to concurrent writers; ` +
        "raise retry.retries, or route callers through fewer NextId instances",
    );
    this.operation = operation;
    this.attempts = attempts;
  }
}

/** The next IDs would pass the largest ID redquorum hands out (2^63 - 1). */
export class IdOverflowError extends RedquorumError {
  readonly lastId: bigint;
  readonly maxId: bigint;

  constructor(lastId: bigint, requested: number, maxId: bigint) {
    super(
      "ERR_ID_OVERFLOW",
      `cannot hand out ${requested} more ID(s) after ${lastId}: the largest ID is ${maxId}`,
    );
    this.lastId = lastId;
    this.maxId = maxId;
  }
}

/**
 * A resource's fencing tokens are used up: its counter, or the node's
 * fencing floor, is at the last token (2^63 - 1) on more nodes than a
 * majority can spare, so no majority can ever accept a higher one. The
 * lock was not granted (every key it set was deleted again); retrying
 * cannot help.
 */
export class FenceOverflowError extends RedquorumError {
  /** The resource with no token left. */
  readonly resource: string;
  /** The last token (2^63 - 1). */
  readonly maxToken: bigint;

  constructor(resource: string, nodesAtMax: number, nodeCount: number, maxToken: bigint) {
    super(
      "ERR_FENCE_OVERFLOW",
      `no fencing token is left for ${JSON.stringify(resource)}: its counter (or the node's ` +
        `fencing floor) is at the last token (${maxToken}) on at least ${nodesAtMax} of ` +
        `${nodeCount} nodes, so no majority can accept a higher one; retrying will not help. ` +
        "Lock it under another resource name; if every resource fails so, the nodes' fencing " +
        "floors are at the last token and no fenced lock is left on these nodes",
    );
    this.resource = resource;
    this.maxToken = maxToken;
  }
}

/** The ID counter was never initialised on a majority of nodes. */
export class NotInitializedError extends RedquorumError {
  readonly key: string;
  /** How many of the nodes that answered hold no counter. */
  readonly missingNodeCount: number;
  /** How many nodes the client has. */
  readonly nodeCount: number;

  constructor(key: string, missingNodeCount: number, nodeCount: number) {
    super(
      "ERR_NOT_INITIALIZED",
      `the ID counter ${JSON.stringify(key)} is missing on ${missingNodeCount} of ${nodeCount} nodes: ` +
        "on a new cluster call init() once; if these nodes lost their data, bring back nodes that kept it " +
        "(init() would repeat IDs)",
    );
    this.key = key;
    this.missingNodeCount = missingNodeCount;
    this.nodeCount = nodeCount;
  }
}

/** `init()` found a counter that already handed out IDs. */
export class AlreadyInitializedError extends RedquorumError {
  readonly key: string;
  readonly endpoints: readonly string[];

  constructor(key: string, endpoints: readonly string[]) {
    super(
      "ERR_ALREADY_INITIALIZED",
      `the ID counter ${JSON.stringify(key)} already holds a value on ${endpoints.join(", ")}: ` +
        "init() is only for a new cluster (resetting it would repeat IDs)",
    );
    this.key = key;
    this.endpoints = endpoints;
  }
}

/** Too many calls are waiting; this one was refused instead of queued. */
export class QueueFullError extends RedquorumError {
  constructor(what: string, limit: number) {
    super("ERR_QUEUE_FULL", `${what}: more than ${limit} calls waiting`);
  }
}

/**
 * A lock held by `Redlock.using` could not be kept: an extension failed
 * (majority lost, keys gone) and its validity was about to run out. The
 * routine's signal aborts with this before the validity ends.
 */
export class LockLostError extends RedquorumError {
  readonly resources: readonly string[];

  constructor(resources: readonly string[], cause: unknown) {
    super(
      "ERR_LOCK_LOST",
      `lost the lock on ${formatResources(resources)}: ${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
    this.resources = resources;
  }
}

/** The object was closed; it makes no more calls. */
export class ClosedError extends RedquorumError {
  constructor(what: string) {
    super("ERR_CLOSED", `${what} is closed`);
  }
}

function formatResources(resources: readonly string[]): string {
  const shown = resources.slice(0, 3).map((r) => JSON.stringify(truncate(r, 80)));
  const more = resources.length > 3 ? ` and ${resources.length - 3} more` : "";
  return `resource ${shown.join(", ")}${more}`;
}

function truncate(text: string, length: number): string {
  return text.length <= length ? text : `${text.slice(0, length)}…`;
}

function describeCause(cause: unknown): string {
  if (cause instanceof Error) {
    // ioredis fails the commands it holds when a connection closes and its
    // maxRetriesPerRequest is spent (ours retry none): those written
    // (the node stopped, restarted or dropped the connection) and, on a
    // caller's client with an offline queue, those never sent. Its words
    // name the option, not what happened.
    if (cause.name === "MaxRetriesPerRequestError") {
      return (
        "the connection closed before a reply came (the node stopped, restarted or dropped it; " +
        "or, on a client that queues commands while disconnected, it was never reached within " +
        "that client's maxRetriesPerRequest)"
      );
    }
    return cause.message || cause.name;
  }
  return String(cause);
}
