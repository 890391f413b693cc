/**
 * Pairs each invocation in a history with its completion: the checkers
 * reason about whole operations (an interval on the monotonic clock and an
 * outcome), not about the events that bracket them.
 */

import type { HistoryEvent, OpEvent, OpName } from "../history.js";

/** One operation: its invocation and, unless the process died first, its completion. */
export interface Operation {
  readonly process: string;
  readonly opId: number;
  readonly op: OpName;
  readonly resource: string | undefined;
  /** `info` also for an invocation that never completed (the process died). */
  readonly type: "ok" | "fail" | "info";
  readonly invokeMs: number;
  /** Infinity when the operation never completed: it may take effect at any later time. */
  readonly completeMs: number;
  /** The arguments (invoke's value). */
  readonly args: Record<string, unknown>;
  /** The result (ok's value), or {} for fail/info. */
  readonly result: Record<string, unknown>;
  readonly error: { readonly code: string; readonly message: string } | undefined;
  /** Index of the invoke event in the input: names the line in error messages. */
  readonly index: number;
}

/** The input history breaks the contract of history.ts. */
export class MalformedHistoryError extends Error {
  override readonly name = "MalformedHistoryError";
}

const where = (event: OpEvent, index: number) =>
  `event #${index + 1} (${event.process} op ${event.opId} ${event.op} ${event.type} at ${event.timeMs} ms)`;

/**
 * Every operation of `events`, ordered by invocation time. Throws
 * MalformedHistoryError on a completion without an invocation, a second
 * invocation or completion of one opId, or a completion before its invocation.
 */
export function pairOperations(events: readonly HistoryEvent[]): Operation[] {
  const open = new Map<string, { event: OpEvent; index: number }>();
  const done = new Set<string>();
  const operations: Operation[] = [];
  events.forEach((event, index) => {
    if (event.kind !== "op") return;
    const key = `${event.process}\u0000${event.opId}`;
    if (event.type === "invoke") {
      if (open.has(key) || done.has(key)) {
        throw new MalformedHistoryError(`${where(event, index)}: opId invoked twice`);
      }
      open.set(key, { event, index });
      return;
    }
    const invoked = open.get(key);
    if (!invoked) {
      const why = done.has(key) ? "completed twice" : "completion without invocation";
      throw new MalformedHistoryError(`${where(event, index)}: ${why}`);
    }
    if (event.timeMs < invoked.event.timeMs) {
      throw new MalformedHistoryError(`${where(event, index)}: completes before its invocation`);
    }
    open.delete(key);
    done.add(key);
    operations.push(toOperation(invoked.event, invoked.index, event));
  });
  for (const { event, index } of open.values()) operations.push(toOperation(event, index));
  return operations.sort((a, b) => a.invokeMs - b.invokeMs || a.index - b.index);
}

function toOperation(invoke: OpEvent, index: number, completion?: OpEvent): Operation {
  return {
    process: invoke.process,
    opId: invoke.opId,
    op: invoke.op,
    resource: invoke.resource,
    type: completion ? (completion.type as Operation["type"]) : "info",
    invokeMs: invoke.timeMs,
    completeMs: completion ? completion.timeMs : Number.POSITIVE_INFINITY,
    args: invoke.value ?? {},
    result: completion?.type === "ok" ? (completion.value ?? {}) : {},
    error: completion?.error,
    index,
  };
}

/** "lock-3 op 7 (acquire x) 12.345–20.000 ms": how violations name an operation. */
export function describeOperation(op: Operation): string {
  const on = op.resource === undefined ? "" : ` ${op.resource}`;
  const end = Number.isFinite(op.completeMs) ? op.completeMs.toFixed(3) : "never";
  return `${op.process} op ${op.opId} (${op.op}${on}, ${op.type}) ${op.invokeMs.toFixed(3)}–${end} ms`;
}

/** A decimal string from the history as a bigint; names the operation if it is not one. */
export function decimal(value: unknown, op: Operation, field: string): bigint {
  if (typeof value !== "string" || !/^-?\d+$/.test(value)) {
    throw new MalformedHistoryError(
      `${describeOperation(op)}: ${field} is ${JSON.stringify(value)}, not a decimal string`,
    );
  }
  return BigInt(value);
}

/** A finite number from the history; names the operation if it is missing. */
export function finite(value: unknown, op: Operation, field: string): number {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new MalformedHistoryError(
      `${describeOperation(op)}: ${field} is ${JSON.stringify(value)}, not a finite number`,
    );
  }
  return value;
}

/** Groups items by a key, keeping input order inside each group. */
export function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const group = groups.get(k);
    if (group) group.push(item);
    else groups.set(k, [item]);
  }
  return groups;
}

/** Builds a CheckResult's verdict from its violations. */
export function verdictOf(violations: readonly string[]): "ok" | "violation" {
  return violations.length === 0 ? "ok" : "violation";
}
