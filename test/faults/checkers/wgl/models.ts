/**
 * The models the linearizability checker knows, each with how a history
 * becomes its operations and how those split into independent keys
 * (P-compositionality: a history is linearizable iff each key's is).
 */

import { extractHolds } from "../holds.js";
import { decimal, describeOperation, type Operation } from "../operations.js";
import type { Model, SearchOp } from "./search.js";

export interface KeyedOp<I> extends SearchOp<I> {
  readonly key: string;
  readonly describe: string;
}

/**
 * A lock: `acquire` takes it if free (and, when fenced, with a token above
 * the last one); `end` gives it back. A hold's end is the instant the sweep
 * uses (release call or validity deadline), so the two checkers judge the
 * same intervals.
 */
export type LockInput =
  | { readonly kind: "acquire"; readonly process: string; readonly fence: bigint | undefined }
  | { readonly kind: "end"; readonly process: string };

export interface LockState {
  readonly holder: string | undefined;
  readonly fence: bigint | undefined;
}

export const lockModel: Model<LockState, LockInput> = {
  init: { holder: undefined, fence: undefined },
  step(state, input) {
    if (input.kind === "end") {
      return state.holder === input.process ? { holder: undefined, fence: state.fence } : undefined;
    }
    if (state.holder !== undefined) return undefined;
    if (input.fence !== undefined && state.fence !== undefined && input.fence <= state.fence) {
      return undefined;
    }
    return { holder: input.process, fence: input.fence ?? state.fence };
  },
  key: (state) => `${state.holder ?? ""}|${state.fence ?? ""}`,
};

export function lockOps(operations: readonly Operation[]): KeyedOp<LockInput>[] {
  const ops: KeyedOp<LockInput>[] = [];
  for (const hold of extractHolds(operations).holds) {
    const { acquire } = hold;
    ops.push({
      key: hold.resource,
      describe: describeOperation(acquire),
      callMs: acquire.invokeMs,
      returnMs: acquire.completeMs,
      optional: false,
      input: { kind: "acquire", process: hold.client, fence: hold.fence },
    });
    ops.push({
      key: hold.resource,
      describe: `${hold.client} hold end (${hold.endedBy}) at ${hold.endMs.toFixed(3)} ms`,
      callMs: hold.endMs,
      returnMs: hold.endMs,
      optional: false,
      input: { kind: "end", process: hold.client },
    });
  }
  // An indeterminate acquire may have taken the lock at any time after its call, or never.
  for (const op of operations) {
    if (op.op !== "acquire" || op.type !== "info") continue;
    ops.push({
      key: op.resource ?? "",
      describe: describeOperation(op),
      callMs: op.invokeMs,
      returnMs: Number.POSITIVE_INFINITY,
      optional: true,
      input: { kind: "acquire", process: op.process, fence: undefined },
    });
  }
  return ops;
}

/** IDs: each call's IDs increase and are all above every ID linearized before it. */
export const idModel: Model<bigint, readonly bigint[]> = {
  init: -1n,
  step(highest, ids) {
    let previous = highest;
    for (const id of ids) {
      if (id <= previous) return undefined;
      previous = id;
    }
    return previous;
  },
  key: (highest) => highest.toString(),
};

/** Only `ok` calls: `info` and crashed calls returned nothing, `fail` ones drew nothing. */
export function idOps(operations: readonly Operation[]): KeyedOp<readonly bigint[]>[] {
  return operations
    .filter((op) => op.op === "ids" && op.type === "ok")
    .map((op) => ({
      key: op.resource ?? "",
      describe: describeOperation(op),
      callMs: op.invokeMs,
      returnMs: op.completeMs,
      optional: false,
      input: ((op.result.ids as unknown[]) ?? []).map((id, i) => decimal(id, op, `ids[${i}]`)),
    }));
}
