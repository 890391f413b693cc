/**
 * The fault suite's checkers: each reads a history (history.ts) and returns
 * a CheckResult; the runner calls these, the modules behind them are
 * internal. A row states what it expects through the options, e.g.
 *
 *   checkMutualExclusion(events, { fencing: true })
 *   checkIds(events)
 *   checkResource(events, { fenced: true })
 *   checkLiveness(events, { op: "acquire", maxGapMs: 2 * ttlMs, nodeCount: 5, recoveryMs: ttlMs })
 *   checkLiveness(events, { unavailableWindows: faultWindows(events).filter((f) => f.fault === "blackhole"), processes: ["lock-1"] })
 *   checkHygiene(events, { allowedErrorCodes: ["ERR_QUORUM", "ERR_LOCK_LOST"], bounded: [{ key: "heapUsedBytes", growthMax: 8e6 }] })
 *   checkLinearizable(events, { model: "lock" })  // or "ids"; `unknown` past its bounds
 *
 * Each throws MalformedHistoryError (naming the event and process) on a
 * history that breaks the contract, e.g. a completion without invocation.
 */

export { type BoundedSample, checkHygiene, type HygieneOptions } from "./hygiene.js";
export { checkIds } from "./ids.js";
export { checkLiveness, type LivenessOptions } from "./liveness.js";
export { checkMutualExclusion, type MutualExclusionOptions } from "./mutual-exclusion.js";
export { MalformedHistoryError, type Operation, pairOperations } from "./operations.js";
export { checkResource, type ResourceOptions } from "./resource.js";
export { checkLinearizable, type LinearizabilityOptions } from "./wgl/check.js";
export { availabilityWindows, type FaultWindow, faultWindows, type Window } from "./windows.js";
