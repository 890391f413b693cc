import { onAbort } from "../clock.js";
import { NodeError, NodeTimeoutError } from "../errors.js";
import type { RedisNode } from "../node/redis-node.js";
import { roundEnded, roundStarted } from "../node/rounds-under-way.js";

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
  /**
   * Every node's outcome as its call settles, also those that came after
   * the round ended (which `outcomes` leaves out): complete once `done`
   * resolved.
   */
  readonly settled: ReadonlyArray<Outcome<T> | undefined>;
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
  return new Promise((resolve) => new RoundRun(nodes, quorum, options, resolve).start(call));
}

/** One round under way: the calls, their outcomes as they settle, and when the round ends. */
class RoundRun<T> {
  private readonly nodes: readonly RedisNode[];
  private readonly quorum: number;
  private readonly options: RoundOptions<T>;
  private readonly resolve: (result: RoundResult<T>) => void;
  private readonly startedMs = performance.now();
  private readonly outcomes: Array<Outcome<T> | undefined>;
  /**
   * Each call's outcome once it settled: a call settles once, by its reply
   * or by the round's timer (a late reply is then ignored).
   */
  private readonly settled: Array<Outcome<T> | undefined>;
  private yesCount = 0;
  private noCount = 0;
  private errorCount = 0;
  private unsettled: number;
  private aborted = false;
  private finished = false;
  /** Counted in `roundsUnderWay` (a round its signal ended before it began is not). */
  private underWay = false;
  /** Created only when the round ends before every call settled. */
  private onAllSettled: (() => void) | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly abort = () => {
    this.aborted = true;
    this.finish();
  };
  /** Removes `abort` from the signal's watch (clock.ts, onAbort). */
  private unwatch: () => void = () => {};

  constructor(
    nodes: readonly RedisNode[],
    quorum: number,
    options: RoundOptions<T>,
    resolve: (result: RoundResult<T>) => void,
  ) {
    this.nodes = nodes;
    this.quorum = quorum;
    this.options = options;
    this.resolve = resolve;
    this.outcomes = new Array(nodes.length).fill(undefined);
    this.settled = new Array(nodes.length).fill(undefined);
    this.unsettled = nodes.length;
  }

  start(call: (node: RedisNode, index: number) => Promise<T>): void {
    const { signal, timeoutMs } = this.options;
    if (signal?.aborted) {
      this.aborted = true;
      this.unsettled = 0;
      this.finish();
      return;
    }
    this.unwatch = onAbort(signal, this.abort);
    this.underWay = true;
    roundStarted();
    // Timers run before the poll phase of the event loop: after a stall,
    // replies that arrived in time are still unread when the timer fires.
    // setImmediate runs after the poll phase, once they have been read
    // (and, unless acceptLateReplies, counted as timeouts if read late).
    this.timer = setTimeout(() => setImmediate(() => this.timeOut()), timeoutMs);
    for (let index = 0; index < this.nodes.length; index++) this.callNode(call, index);
  }

  private callNode(call: (node: RedisNode, index: number) => Promise<T>, index: number): void {
    const { isYes, timeoutMs, acceptLateReplies = false } = this.options;
    const node = this.nodes[index]!;
    invoke(() => call(node, index)).then(
      (value) =>
        // A reply handled after the deadline (the event loop was blocked
        // while it waited) counts as a timeout, as if the timer had won:
        // callers rely on every counted answer being at most timeoutMs old.
        !acceptLateReplies && performance.now() - this.startedMs > timeoutMs
          ? this.record(index, {
              kind: "error",
              error: new NodeTimeoutError(node.endpoint, timeoutMs),
            })
          : this.record(index, { kind: isYes(value) ? "yes" : "no", value }),
      (error: unknown) =>
        this.record(index, {
          kind: "error",
          error: error instanceof NodeError ? error : new NodeError(node.endpoint, error),
        }),
    );
  }

  private timeOut(): void {
    for (let index = 0; index < this.nodes.length; index++) {
      if (this.settled[index]) continue;
      this.record(index, {
        kind: "error",
        error: this.nodes[index]!.timeoutError(this.options.timeoutMs),
      });
    }
  }

  private record(index: number, outcome: Outcome<T>): void {
    if (this.settled[index]) return;
    this.settled[index] = outcome;
    this.unsettled--;
    if (this.unsettled === 0) clearTimeout(this.timer);
    if (this.finished) {
      if (this.unsettled === 0) this.onAllSettled?.();
      return;
    }
    this.outcomes[index] = outcome;
    if (outcome.kind === "yes") this.yesCount++;
    else if (outcome.kind === "no") this.noCount++;
    else this.errorCount++;
    const { stop } = this.options;
    if (this.unsettled === 0 || stop === "all") {
      if (this.unsettled === 0) this.finish();
      return;
    }
    const notYes = this.noCount + this.errorCount;
    const state = roundState(this.yesCount, notYes, this.nodes.length, this.quorum);
    if (state === "won" || (state === "lost" && stop === "decided")) this.finish();
  }

  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    if (this.underWay) roundEnded();
    this.unwatch();
    const done =
      this.unsettled === 0
        ? settledRound
        : new Promise<void>((resolveDone) => {
            this.onAllSettled = resolveDone;
          });
    const { outcomes, yesCount, noCount, errorCount, aborted, settled } = this;
    this.resolve({ outcomes, yesCount, noCount, errorCount, aborted, done, settled });
  }
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
