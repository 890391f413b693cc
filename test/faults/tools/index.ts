/** The fault tools the runner and the rows use; everything else in this folder is internal. */
export { NodeClock, type NodeClockOptions, type ShiftResult } from "./clock.js";
export { FaultLog, type FaultNote } from "./fault-log.js";
export {
  type AofSample,
  AofSampler,
  noAofRewriteArgs,
  sampleAof,
  truncateAof,
} from "./power-loss.js";
export {
  killProcess,
  NodeFaults,
  type ProcessTarget,
  pauseProcessFor,
} from "./process-faults.js";
export { type Direction, FaultProxy, type FaultProxyOptions, startProxies } from "./proxy.js";
export {
  commandIs,
  type ProxyCommand,
  type ReplyAction,
  scriptIs,
  scriptNames,
  type Trigger,
  type TriggerSpec,
} from "./triggers.js";
