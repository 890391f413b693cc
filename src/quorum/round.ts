import { NodeError, NodeTimeoutError } from "../errors.js";
import type { RedisNode } from "../node/redis-node.js";

/** What one node answered in a round. `undefined` in a result: not yet answered when the round ended early. */
export type Outcome<T> =
  | { readonly kind: "yes"; readonly value: T }
  | { readonly kind: "no"; readonly value: T }
  | { readonly kind: "error"; readonly error: NodeError };

export interface RoundResult<T> {
  readonly outcomes: ReadonlyArray<Outcome<T> | undefined>;
  readonly yesCount: number;
  readonly noCount: number;
  readonly errorCount: number;
  /** Whether the caller's signal ended the round. */
  readonly aborted: boolean;
  /** Resolves (never rejects) once every node's call has settled, also after an early end. */
  readonly done: Promise<void>;
}

export type RoundState = "won" | "lost" | "open";

/**
 * Pure counting: a round is won once `quorum` nodes said yes, and lost once so
 * many said no or failed that the rest can no longer make a quorum.
 */
export function roundState(
  yesCount: number,
  notYesCount: number,
  nodeCount: number,
  quorum: number,
): RoundState {
  if (yesCount >= quorum) return "won";
  if (nodeCount - notYesCount < quorum) return "lost";
  return "open";
}

export function quorumOf(nodeCount: number): number {
  return Math.floor(nodeCount / 2) + 1;
}

/**
 * Answers needed from nodes other than a lost one (each still holding its
 * value) to repair it: N - Q + 1. A winning majority has Q nodes, at least
 * Q - 1 of them other than the lost node, and (N - Q + 1) + (Q - 1) = N >
 * N - 1: any N - Q + 1 of the other nodes include one of them. Never more
 * than Q, one less on an even N; for N = 1 it exceeds the N - 1 = 0 other
 * nodes (a lone node cannot be repaired).
 */
export function repairReadsOf(nodeCount: number): number {
  return nodeCount - quorumOf(nodeCount) + 1;
}

export type RoundStop = "decided" | "won" | "all";

export interface RoundOptions<T> {
  /** Whether a node's reply counts as a vote for the operation. */
  isYes: (value: T) => boolean;
  /**
   * When the round ends: as soon as it is decided, won or lost
   * (`"decided"`); as soon as it is won, a lost round waiting for every
   * answer to learn from all of them (`"won"`); or only once every node
   * answered or timed out (`"all"`). Calls still in flight run to
   * completion in the background; their replies are dropped.
   */
  stop: RoundStop;
  signal?: AbortSignal | undefined;
  /**
   * Bound on each node's call, in milliseconds: one timer for the round;
   * when it fires, every node that has not answered counts as timed out.
   */
  timeoutMs: number;
  /**
   * Count a reply that arrived in time but was read after the deadline
   * (the event loop was blocked) as the answer it is, not as a timeout.
   * Only for rounds whose result carries no validity (releases): an
   * acquire must not count an answer older than `timeoutMs`.
   */
  acceptLateReplies?: boolean;
}

/**
 * The one fan-out that locks, IDs and fences share: `call` on every node at
 * once, each answer classified as yes / no / error with the node's identity.
 */
export function runRound<T>(
  nodes: readonly RedisNode[],
  quorum: number,
  call: (node: RedisNode, index: number) => Promise<T>,
  options: RoundOptions<T>,
): Promise<RoundResult<T>> {
  const { isYes, stop, signal, timeoutMs, acceptLateReplies = false } = options;
  const startedMs = performance.now();
  const nodeCount = nodes.length;
  const outcomes: Array<Outcome<T> | undefined> = new Array(nodeCount).fill(undefined);
  // A call settles once: by its reply, or by the round's timer (a late reply is then ignored).
  const settledCalls: boolean[] = new Array(nodeCount).fill(false);
  let yesCount = 0;
  let noCount = 0;
  let errorCount = 0;
  let unsettled = nodeCount;
  let aborted = false;
  let finished = false;
  // Created only when the round ends before every call settled.
  let onAllSettled: (() => void) | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;

  return new Promise((resolve) => {
    const finish = () => {
      if (finished) return;
      finished = true;
      signal?.removeEventListener("abort", onAbort);
      const done =
        unsettled === 0
          ? settledRound
          : new Promise<void>((resolveDone) => {
              onAllSettled = resolveDone;
            });
      resolve({ outcomes, yesCount, noCount, errorCount, aborted, done });
    };
    const onAbort = () => {
      aborted = true;
      finish();
    };
    const record = (index: number, outcome: Outcome<T>) => {
      if (settledCalls[index]) return;
      settledCalls[index] = true;
      unsettled--;
      if (unsettled === 0) clearTimeout(timer);
      if (finished) {
        if (unsettled === 0) onAllSettled?.();
        return;
      }
      outcomes[index] = outcome;
      if (outcome.kind === "yes") yesCount++;
      else if (outcome.kind === "no") noCount++;
      else errorCount++;
      if (unsettled === 0 || stop === "all") {
        if (unsettled === 0) finish();
        return;
      }
      const state = roundState(yesCount, noCount + errorCount, nodeCount, quorum);
      if (state === "won" || (state === "lost" && stop === "decided")) finish();
    };
    if (signal?.aborted) {
      aborted = true;
      unsettled = 0;
      finish();
      return;
    }
    signal?.addEventListener("abort", onAbort, { once: true });

    const timeOut = () => {
      for (let index = 0; index < nodeCount; index++) {
        if (settledCalls[index]) continue;
        record(index, {
          kind: "error",
          error: new NodeTimeoutError(nodes[index]!.endpoint, timeoutMs),
        });
      }
    };
    // Timers run before the poll phase of the event loop: after a stall,
    // replies that arrived in time are still unread when the timer fires.
    // setImmediate runs after the poll phase, once they have been read
    // (and, unless acceptLateReplies, counted as timeouts if read late).
    timer = setTimeout(() => setImmediate(timeOut), timeoutMs);

    for (let index = 0; index < nodeCount; index++) {
      const node = nodes[index]!;
      invoke(() => call(node, index)).then(
        (value) =>
          // A reply handled after the deadline (the event loop was blocked
          // while it waited) counts as a timeout, as if the timer had won:
          // callers rely on every counted answer being at most timeoutMs old.
          !acceptLateReplies && performance.now() - startedMs > timeoutMs
            ? record(index, {
                kind: "error",
                error: new NodeTimeoutError(node.endpoint, timeoutMs),
              })
            : record(index, { kind: isYes(value) ? "yes" : "no", value }),
        (error: unknown) =>
          record(index, {
            kind: "error",
            error: error instanceof NodeError ? error : new NodeError(node.endpoint, error),
          }),
      );
    }
  });
}

/** The `done` of a round whose calls had all settled when it ended. */
export const settledRound: Promise<void> = Promise.resolve();

function invoke<T>(start: () => Promise<T>): Promise<T> {
  try {
    return start();
  } catch (error) {
    return Promise.reject(error);
  }
}

/** The per-node errors of a round, in node order. */
export function nodeErrorsOf<T>(result: RoundResult<T>): NodeError[] {
  const errors: NodeError[] = [];
  for (const outcome of result.outcomes) if (outcome?.kind === "error") errors.push(outcome.error);
  return errors;
}
