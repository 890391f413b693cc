/**
 * WGL: the linearizability cross-check. Splits the history per key, runs
 * the bounded Wing & Gong search on each, and reports `unknown` for a key
 * over the size bound or past the time budget rather than guessing.
 */

import type { CheckResult, HistoryEvent } from "../../history.js";
import { groupBy, pairOperations } from "../operations.js";
import { idModel, idOps, type KeyedOp, lockModel, lockOps } from "./models.js";
import { type Model, searchLinearization } from "./search.js";

export interface LinearizabilityOptions {
  readonly model: "lock" | "ids";
  /** Operations per key above which the key is not searched: `unknown` (default 300). */
  readonly maxOps?: number;
  /** The whole check's time budget: keys left when it runs out are `unknown` (default 2000 ms). */
  readonly timeBudgetMs?: number;
}

export function checkLinearizable(
  events: readonly HistoryEvent[],
  options: LinearizabilityOptions,
): CheckResult {
  const operations = pairOperations(events);
  return options.model === "lock"
    ? checkKeys(lockModel, lockOps(operations), options)
    : checkKeys(idModel, idOps(operations), options);
}

function checkKeys<S, I>(
  model: Model<S, I>,
  ops: readonly KeyedOp<I>[],
  options: LinearizabilityOptions,
): CheckResult {
  const maxOps = options.maxOps ?? 300;
  const deadlineMs = performance.now() + (options.timeBudgetMs ?? 2000);
  const violations: string[] = [];
  const unknown: string[] = [];
  const keys = groupBy(ops, (op) => op.key);
  let searched = 0;
  for (const [key, keyOps] of keys) {
    const name = key === "" ? "(no key)" : key;
    if (keyOps.length > maxOps) {
      unknown.push(`${name}: ${keyOps.length} operations, above the bound of ${maxOps}`);
      continue;
    }
    const outcome = searchLinearization(model, keyOps, deadlineMs);
    searched++;
    if (outcome.kind === "unknown") unknown.push(`${name}: ${outcome.reason}`);
    if (outcome.kind === "violation") {
      const stuck = keyOps[outcome.stuckAt];
      violations.push(
        `${name}: not linearizable; at most ${outcome.linearizedMax} of ${keyOps.length} ` +
          `operations linearized, then ${stuck ? stuck.describe : "the end"} could not be placed`,
      );
    }
  }
  const verdict = violations.length > 0 ? "violation" : unknown.length > 0 ? "unknown" : "ok";
  return {
    checker: "WGL",
    verdict,
    // `unknown` keys are listed too, so a report says why the verdict is not ok.
    violations: [...violations, ...unknown.map((u) => `unknown: ${u}`)],
    stats: { keys: keys.size, searched, unknownKeys: unknown.length, operations: ops.length },
  };
}
