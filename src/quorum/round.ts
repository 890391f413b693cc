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
  /** The round's abort reason, when the caller's signal ended it. */
  readonly aborted: boolean;
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
}

/**
 * The one fan-out that locks, IDs and fences share: `call` on every node at
 * once, each answer classified as yes / no / error with the node's identity.
 */
export function runRound<T>(
  nodes: readonly RedisNode[],
  call: (node: RedisNode, index: number) => Promise<T>,
  options: RoundOptions<T>,
): Promise<RoundResult<T>> {
  const { quorum, isYes, stopEarly, signal } = options;
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
      resolve({ outcomes: [...outcomes], yesCount, noCount, errorCount, aborted });
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
      let pending: Promise<T>;
      try {
        pending = call(node, index);
      } catch (error) {
        pending = Promise.reject(error);
      }
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

/** The per-node errors of a round, in node order. */
export function nodeErrorsOf<T>(result: RoundResult<T>): NodeError[] {
  const errors: NodeError[] = [];
  for (const outcome of result.outcomes) if (outcome?.kind === "error") errors.push(outcome.error);
  return errors;
}
