/**
 * The checkers the runner runs over a merged history, by name, with the
 * row's options (faults-checkers' test/faults/checkers/). Defaults chosen
 * from the history: LV looks at `ids` when the row made IDs, else at
 * `acquire`; MX checks fence order when every hold carries a token.
 */
import {
  checkHygiene,
  checkIds,
  checkLinearizable,
  checkLiveness,
  checkMutualExclusion,
  checkResource,
  type HygieneOptions,
  type LinearizabilityOptions,
  type LivenessOptions,
  type MutualExclusionOptions,
  type ResourceOptions,
} from "../checkers/index.js";
import type { CheckResult, HistoryEvent } from "../history.js";
import type { CheckerName } from "./types.js";

export interface CheckOptions {
  readonly MX?: MutualExclusionOptions;
  readonly RS?: ResourceOptions;
  readonly LV?: LivenessOptions;
  readonly HY?: HygieneOptions;
  readonly WGL?: LinearizabilityOptions;
}

/** WGL's search is exponential in the worst case: it reads the first operations only (below its 300 bound). */
const wglOpsMax = 250;

/**
 * The history up to the `opsMax`-th invocation: a prefix is a history too
 * (operations still open at the cut count as indeterminate), so a long
 * run's WGL cross-check covers its start instead of giving up on the whole.
 */
function smallPrefix(events: readonly HistoryEvent[], opsMax: number): readonly HistoryEvent[] {
  let invokes = 0;
  const cut = events.findIndex((e) => e.kind === "op" && e.type === "invoke" && ++invokes > opsMax);
  return cut === -1 ? events : events.slice(0, cut);
}

function madeIds(events: readonly HistoryEvent[]): boolean {
  return events.some((e) => e.kind === "op" && e.op === "ids");
}

export function runChecker(
  name: CheckerName,
  events: readonly HistoryEvent[],
  options: CheckOptions = {},
): CheckResult {
  try {
    switch (name) {
      case "MX":
        return checkMutualExclusion(events, options.MX);
      case "ID":
        return checkIds(events);
      case "RS":
        return checkResource(events, options.RS);
      case "LV":
        return checkLiveness(events, { op: madeIds(events) ? "ids" : "acquire", ...options.LV });
      case "HY":
        return checkHygiene(events, options.HY);
      case "WGL":
        return checkLinearizable(
          smallPrefix(events, wglOpsMax),
          options.WGL ?? { model: madeIds(events) ? "ids" : "lock" },
        );
    }
  } catch (error) {
    // A malformed history is the runner's or a workload's bug: show it, do not hide it as "ok".
    return {
      checker: name,
      verdict: "unknown",
      violations: [`checker failed: ${String(error)}`],
      stats: {},
    };
  }
}
