import { NodeError } from "../errors.js";
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
  /**
   * Per node, a promise that resolves (never rejects) once that node's call
   * has settled, also after an early end. A later operation on the same keys
   * waits for it so it is never sent to a node before this one.
   */
  readonly settled: ReadonlyArray<Promise<void>>;
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

export interface RoundOptions<T> {
  quorum: number;
  /** Whether a node's reply counts as a vote for the operation. */
  isYes: (value: T) => boolean;
  /**
   * End the round as soon as it is decided. The calls still in flight run to
   * completion in the background; their replies are dropped.
   */
  stopEarly: boolean;
  signal?: AbortSignal | undefined;
  /** Per node, what must settle before the call is made (see `RoundResult.settled`). */
  after?: ReadonlyArray<Promise<void>> | undefined;
}

const ignore = () => {};

/**
 * The one fan-out that locks, IDs and fences share: `call` on every node at
 * once, each answer classified as yes / no / error with the node's identity.
 */
export function runRound<T>(
  nodes: readonly RedisNode[],
  call: (node: RedisNode, index: number) => Promise<T>,
  options: RoundOptions<T>,
): Promise<RoundResult<T>> {
  const { quorum, isYes, stopEarly, signal, after } = options;
  const settled: Array<Promise<void>> = [];
  const outcomes: Array<Outcome<T> | undefined> = new Array(nodes.length).fill(undefined);
  let yesCount = 0;
  let noCount = 0;
  let errorCount = 0;
  let answered = 0;
  let aborted = false;

  return new Promise((resolve) => {
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      signal?.removeEventListener("abort", onAbort);
      resolve({ outcomes: [...outcomes], yesCount, noCount, errorCount, aborted, settled });
    };
    const onAbort = () => {
      aborted = true;
      finish();
    };
    if (signal?.aborted) {
      aborted = true;
      finish();
      return;
    }
    signal?.addEventListener("abort", onAbort, { once: true });

    nodes.forEach((node, index) => {
      const start = () => call(node, index);
      const previous = after?.[index];
      const pending = previous ? previous.then(start) : invoke(start);
      settled[index] = pending.then(ignore, ignore);
      pending.then(
        (value) => {
          if (finished) return;
          if (isYes(value)) {
            yesCount++;
            outcomes[index] = { kind: "yes", value };
          } else {
            noCount++;
            outcomes[index] = { kind: "no", value };
          }
          settleOne();
        },
        (error: unknown) => {
          if (finished) return;
          if (signal?.aborted) {
            aborted = true;
            finish();
            return;
          }
          errorCount++;
          outcomes[index] = {
            kind: "error",
            error: error instanceof NodeError ? error : new NodeError(node.endpoint, error),
          };
          settleOne();
        },
      );
    });

    function settleOne() {
      answered++;
      if (answered === nodes.length) return finish();
      if (
        stopEarly &&
        roundState(yesCount, noCount + errorCount, nodes.length, quorum) !== "open"
      ) {
        finish();
      }
    }
  });
}

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
