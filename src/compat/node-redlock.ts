/**
 * `redquorum/node-redlock`: a drop-in for node-redlock v5 over redquorum.
 * A node-redlock program changes its import line and nothing else:
 *
 *   import Redlock, { ResourceLockedError, ExecutionError } from "redquorum/node-redlock";
 *   const { default: Redlock } = require("redquorum/node-redlock");
 */
import type { Client } from "./execution.js";
import { Redlock } from "./redlock.js";

export { ResourceLockedError } from "../errors.js";
export {
  type Client,
  ExecutionError,
  type ExecutionResult,
  type ExecutionStats,
} from "./execution.js";
export { Lock } from "./lock.js";
export { Redlock, type RedlockAbortSignal } from "./redlock.js";
export type { RedlockSettings, RedquorumSettings, Settings } from "./settings.js";

/** node-redlock's per-client vote, as its types name it. */
export type ClientExecutionResult =
  | { client: Client; vote: "for"; value: number }
  | { client: Client; vote: "against"; error: Error };

export default Redlock;
