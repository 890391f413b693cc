/**
 * RS: the resource the lock protects. lock-set does read → write(read + 1)
 * under the lock; no acknowledged update may be lost. With a fenced store,
 * no write may be accepted with a token below one the store had already
 * accepted (the store must refuse it with STALE_FENCE).
 */

import type { CheckResult, HistoryEvent } from "../history.js";
import { upperBound } from "./mutual-exclusion.js";
import {
  decimal,
  describeOperation,
  finite,
  groupBy,
  type Operation,
  pairOperations,
  verdictOf,
} from "./operations.js";

export interface ResourceOptions {
  /** The store checks fencing tokens: check that no stale-token write was accepted. */
  readonly fenced?: boolean;
  /**
   * Writes never repeat a value (lock-set writes read + 1), so two acknowledged
   * writes computed from the same read value lost an update (default true).
   */
  readonly distinctValues?: boolean;
}

interface Update {
  readonly write: Operation;
  readonly read: Operation;
  readonly readValue: number;
}

export function checkResource(
  events: readonly HistoryEvent[],
  options: ResourceOptions = {},
): CheckResult {
  const operations = pairOperations(events).filter((op) => op.op === "read" || op.op === "write");
  const violations: string[] = [];
  let updates = 0;
  let staleAccepted = 0;
  for (const [resource, ops] of groupBy(operations, (op) => op.resource ?? "")) {
    const found = readModifyWrites(ops);
    updates += found.length;
    violations.push(...staleReads(resource, found, ops));
    if (options.distinctValues ?? true) violations.push(...sameReadTwice(resource, found));
    if (options.fenced) {
      const stale = staleFenceAccepted(resource, ops);
      staleAccepted += stale.length;
      violations.push(...stale);
    }
  }
  const writes = operations.filter((op) => op.op === "write");
  return {
    checker: "RS",
    verdict: verdictOf(violations),
    violations,
    stats: {
      reads: operations.length - writes.length,
      writes: writes.length,
      okWrites: writes.filter((op) => op.type === "ok").length,
      updates,
      staleAccepted,
      staleRefused: writes.filter((op) => op.type === "fail" && op.error?.code === "STALE_FENCE")
        .length,
    },
  };
}

/** Acknowledged writes paired with the read their process made just before them. */
function readModifyWrites(ops: readonly Operation[]): Update[] {
  const updates: Update[] = [];
  for (const own of groupBy(ops, (op) => op.process).values()) {
    let read: Operation | undefined;
    for (const op of own) {
      if (op.op === "read") {
        if (op.type === "ok") read = op;
        continue;
      }
      if (op.type === "ok" && read) {
        updates.push({ write: op, read, readValue: finite(read.result.value, read, "read value") });
      }
      read = undefined; // a read feeds one write
    }
  }
  return updates;
}

const writtenValue = (write: Operation) => finite(write.args.value, write, "written value");

/**
 * A write whose read value is neither the latest write acknowledged before
 * it was invoked nor a write that may have landed after that one (still
 * running or indeterminate then): an acknowledged update was overwritten.
 */
function staleReads(resource: string, updates: readonly Update[], ops: readonly Operation[]) {
  const applied = ops.filter((op) => op.op === "write" && op.type !== "fail");
  const acked = applied
    .filter((op) => op.type === "ok")
    .sort((a, b) => a.completeMs - b.completeMs);
  const byValue = groupBy(applied, (op) => String(writtenValue(op)));
  const violations: string[] = [];
  for (const { write, read, readValue } of updates) {
    const count = upperBound(acked, (op) => op.completeMs < write.invokeMs);
    const latest = count === 0 ? undefined : acked[count - 1]!;
    if (!latest || latest === write) continue;
    if (writtenValue(latest) === readValue) continue;
    const mayFollow = (byValue.get(String(readValue)) ?? []).some(
      (op) => op !== write && op.invokeMs < write.invokeMs && op.completeMs > latest.completeMs,
    );
    if (mayFollow) continue;
    violations.push(
      `lost update on ${resource}: ${describeOperation(write)} wrote from value ${readValue} ` +
        `(read by op ${read.opId}), but ${describeOperation(latest)} had already stored ${writtenValue(latest)}`,
    );
  }
  return violations;
}

/** Two acknowledged writes computed from the same value: one of them overwrote the other. */
function sameReadTwice(resource: string, updates: readonly Update[]): string[] {
  const violations: string[] = [];
  for (const [value, group] of groupBy(updates, (u) => String(u.readValue))) {
    for (const later of group.slice(1)) {
      violations.push(
        `lost update on ${resource}: ${describeOperation(group[0]!.write)} and ` +
          `${describeOperation(later.write)} both wrote from value ${value}`,
      );
    }
  }
  return violations;
}

/**
 * Fenced writes the store acknowledged with a token below one it had
 * acknowledged before they were invoked: the store failed to refuse them.
 */
function staleFenceAccepted(resource: string, ops: readonly Operation[]): string[] {
  // A write without a token (a lock without fencing) is not the fenced store's to refuse.
  const fenced = ops.filter(
    (op) => op.op === "write" && op.type === "ok" && op.args.fence !== undefined,
  );
  const byCompletion = [...fenced].sort((a, b) => a.completeMs - b.completeMs);
  const violations: string[] = [];
  let done = 0;
  let highest: { fence: bigint; op: Operation } | undefined;
  for (const write of fenced) {
    while (done < byCompletion.length && byCompletion[done]!.completeMs < write.invokeMs) {
      const op = byCompletion[done++]!;
      const fence = decimal(op.args.fence, op, "write's fence");
      if (!highest || fence > highest.fence) highest = { fence, op };
    }
    const fence = decimal(write.args.fence, write, "write's fence");
    if (highest && fence < highest.fence) {
      violations.push(
        `stale fence accepted on ${resource}: ${describeOperation(write)} with fence ${fence} ` +
          `after ${describeOperation(highest.op)} was accepted with fence ${highest.fence}`,
      );
    }
  }
  return violations;
}
