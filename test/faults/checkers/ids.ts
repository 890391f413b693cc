/**
 * ID: no ID returned twice, the IDs of one call increase, and if call A
 * returned before call B was invoked, every ID of B is above every ID of A.
 * Only `ok` calls returned IDs: `info` and crashed calls returned nothing
 * (their IDs, if any were drawn, are holes) and `fail` calls drew none.
 */

import type { CheckResult, HistoryEvent } from "../history.js";
import {
  decimal,
  groupBy,
  MalformedHistoryError,
  pairOperations,
  verdictOf,
} from "./operations.js";
import { findIdViolations, type IdCall } from "./sweeps.js";

export function checkIds(events: readonly HistoryEvent[]): CheckResult {
  const operations = pairOperations(events).filter((op) => op.op === "ids");
  const calls: Array<IdCall & { resource: string }> = [];
  for (const op of operations) {
    if (op.type !== "ok") continue;
    const ids = op.result.ids;
    if (!Array.isArray(ids)) {
      throw new MalformedHistoryError(
        `${op.process} op ${op.opId}: ids ok without an ids array (event #${op.index + 1})`,
      );
    }
    calls.push({
      resource: op.resource ?? "",
      client: `${op.process} op ${op.opId}`,
      startMs: op.invokeMs,
      endMs: op.completeMs,
      ids: ids.map((id, i) => decimal(id, op, `ids[${i}]`)),
    });
  }
  // IDs of different generators (resources) are independent sequences.
  const found = [...groupBy(calls, (call) => call.resource).values()].flatMap((group) =>
    findIdViolations(group),
  );
  const count = (kind: string) => found.filter((v) => v.kind === kind).length;
  const violations = found.map((v) => `${v.kind}: ${v.message}`);
  return {
    checker: "ID",
    verdict: verdictOf(violations),
    violations,
    stats: {
      calls: operations.length,
      okCalls: calls.length,
      ids: calls.reduce((n, call) => n + call.ids.length, 0),
      failCalls: operations.filter((op) => op.type === "fail").length,
      infoCalls: operations.filter((op) => op.type === "info").length,
      duplicates: count("duplicate"),
      orderViolations: count("order"),
      batchOrderViolations: count("batch-order"),
    },
  };
}
