/**
 * What redquorum tells the application about itself: a logger in the shape
 * pino, winston and `console` share (a method per level, message first),
 * and structured events a metrics library can count. Both are optional;
 * neither may break an operation (a throwing callback is ignored).
 */
import { isPromise } from "node:util/types";
import type { Clock } from "./clock.js";
import { RedquorumError } from "./errors.js";
import { requireFunction, requireOptionsObject } from "./validate.js";

type LogMethod = (message: string, fields?: Record<string, unknown>) => void;

/** `console`, a winston logger, or anything with these methods (each optional). */
export interface Logger {
  debug?: LogMethod;
  info?: LogMethod;
  warn?: LogMethod;
  error?: LogMethod;
}

/** How a node's service changed, as one client sees it. */
export type NodeState =
  /** Could not be reached or checked (down, refusing, timing out). */
  | "unreachable"
  /** Checked and in service again after being unreachable or excluded. */
  | "in service"
  /** A check found a configuration that is not safe (durability, role, alias): out until fixed. */
  | "excluded"
  /** Answered that it is in the restart quarantine (it lost its memory). */
  | "quarantined"
  /** Lost its memory or restarted: its counters (fencing or IDs) are excluded until repaired. */
  | "needs repair"
  /** Its counters were raised from the other nodes: in service again. */
  | "repaired";

export type RedquorumEvent =
  | {
      readonly type: "node";
      readonly endpoint: string;
      readonly state: NodeState;
      readonly detail: string;
    }
  | {
      readonly type: "acquire" | "extend" | "release";
      readonly resources: readonly string[];
      /** "ok", or the failing error's code (ERR_RESOURCE_LOCKED, ERR_QUORUM, …). */
      readonly outcome: string;
      readonly durationMs: number;
    }
  | {
      readonly type: "id-round";
      readonly outcome: "won" | "lost";
      /** IDs the round's calls asked for. */
      readonly ids: number;
      readonly durationMs: number;
    };

export interface ObserveOptions {
  /** Node state changes are logged (warn when a node goes out, info when it comes back). */
  logger?: Logger;
  /** Every event: node state changes, lock operations, ID rounds. */
  onEvent?: (event: RedquorumEvent) => void;
}

const levelOf: Record<NodeState, keyof Logger> = {
  unreachable: "warn",
  "in service": "info",
  excluded: "error",
  quarantined: "warn",
  "needs repair": "warn",
  repaired: "info",
};

/** Fans events out to the caller's hooks, and keeps each node's last state so only changes are told. */
export class Observer {
  private readonly logger: Logger | undefined;
  private readonly onEvent: ((event: RedquorumEvent) => void) | undefined;
  private readonly nodeStates = new Map<string, NodeState>();

  constructor(options: ObserveOptions) {
    this.logger = options.logger;
    this.onEvent = options.onEvent;
  }

  /** Whether anyone listens to operation events (they cost a clock read each). */
  get counting(): boolean {
    return this.onEvent !== undefined;
  }

  node(endpoint: string, state: NodeState, detail: string): void {
    // "in service" is only news after a node was out.
    const before = this.nodeStates.get(endpoint);
    if (before === state || (state === "in service" && before === undefined)) return;
    this.nodeStates.set(endpoint, state);
    this.log(levelOf[state], `redquorum: ${endpoint} ${state}: ${detail}`, {
      endpoint,
      state,
      detail,
    });
    this.emit({ type: "node", endpoint, state, detail });
  }

  /**
   * Reports a lock operation's outcome and duration to `onEvent` when it
   * settles, if anyone listens; returns `operation` itself.
   */
  timed<T>(
    type: "acquire" | "extend" | "release",
    resources: readonly string[],
    operation: Promise<T>,
    clock: Clock,
  ): Promise<T> {
    if (!this.onEvent) return operation;
    const startMs = clock.now();
    const report = (outcome: string) =>
      this.emit({ type, resources, outcome, durationMs: clock.now() - startMs });
    operation.then(
      () => report("ok"),
      (error: unknown) => report(error instanceof RedquorumError ? error.code : "error"),
    );
    return operation;
  }

  emit(event: RedquorumEvent): void {
    if (this.onEvent) callHook(this.onEvent, undefined, event);
  }

  private log(level: keyof Logger, message: string, fields: Record<string, unknown>): void {
    const logger = this.logger;
    if (!logger) return;
    let method: unknown;
    try {
      method = logger[level]; // a getter of the application's may throw too
    } catch {
      return;
    }
    if (typeof method === "function") {
      callHook(method as (...args: never[]) => unknown, logger, message, fields);
    }
  }
}

/**
 * Calls a hook of the application's (`logger`, `onEvent`, `onWarning`,
 * `onRepair`) so that it cannot fail what calls it: an exception is
 * dropped, and so is the rejection of a promise it returns (an `async`
 * hook), which would otherwise be an unhandled rejection in the
 * application's process, one per event. The hook's failure is its own.
 */
export function callHook(
  hook: (...args: never[]) => unknown,
  thisArg: unknown,
  ...args: unknown[]
): void {
  try {
    const returned: unknown = Reflect.apply(hook, thisArg, args);
    // Native promises only (another realm's too): only they report an
    // unhandled rejection, and calling `then` on any other thenable could
    // start what it describes (a query builder's thenable runs its query).
    if (isPromise(returned)) returned.then(undefined, ignore);
  } catch {
    // the application's hook failed; what told it goes on
  }
}

function ignore(): void {}

/** Validates the `logger` and `onEvent` options. */
export function resolveObserveOptions(
  name: string,
  input: Record<string, unknown>,
): ObserveOptions {
  const logger = input.logger;
  if (logger !== undefined) {
    requireOptionsObject(`${name}.logger`, logger);
  }
  return {
    logger: logger as Logger | undefined,
    onEvent:
      input.onEvent === undefined
        ? undefined
        : requireFunction<(event: RedquorumEvent) => void>(`${name}.onEvent`, input.onEvent),
  };
}
