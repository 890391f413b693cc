/**
 * The fault suite's checkers: each reads a history (history.ts) and returns
 * a CheckResult. The runner calls these; the modules behind them are internal.
 */

export { type BoundedSample, checkHygiene, type HygieneOptions } from "./hygiene.js";
export { checkIds } from "./ids.js";
export { checkLiveness, type LivenessOptions } from "./liveness.js";
export { checkMutualExclusion, type MutualExclusionOptions } from "./mutual-exclusion.js";
export { MalformedHistoryError, type Operation, pairOperations } from "./operations.js";
export { checkResource, type ResourceOptions } from "./resource.js";
export { checkLinearizable, type LinearizabilityOptions } from "./wgl/check.js";
export { availabilityWindows, type FaultWindow, faultWindows, type Window } from "./windows.js";
