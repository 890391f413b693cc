/**
 * redquorum's public API. Everything exported is listed here by name;
 * anything not listed is internal and may change.
 */

export type { Clock, RandomSource } from "./clock.js";
export { cryptoRandom, systemClock } from "./clock.js";
export {
  LocalCluster,
  type LocalClusterOptions,
  type LocalNode,
  type Persistence,
  type RestartOptions,
} from "./cluster/local-cluster.js";
export { maxId } from "./decimal.js";
export {
  AlreadyInitializedError,
  ClosedError,
  ContentionError,
  DurabilityError,
  type ErrorCode,
  FenceOverflowError,
  IdOverflowError,
  InvalidArgumentError,
  LockExpiredError,
  LockLostError,
  MembershipError,
  NodeConfigurationError,
  NodeError,
  NodeTimeoutError,
  NotInitializedError,
  QueueFullError,
  QuorumError,
  RedquorumError,
  ResourceLockedError,
} from "./errors.js";
export { type FencedSetResult, fencedSet, fencedSetScript } from "./fencing/fenced-store.js";
export type { FencingFloorOptions, FencingFloorReport } from "./fencing/floor.js";
export { NextId } from "./id/next-id.js";
export type {
  IdProposals,
  IdRetryOptions,
  IdStrategy,
  NextIdOptions,
  RepairEvent,
  SeedStrategy,
} from "./id/options.js";
export { defaults, limits } from "./limits.js";
export type { InitOptions, InitReport } from "./lock/init.js";
export { Lock } from "./lock/lock.js";
export type { AcquireOptions, RedlockOptions, RetryOptions, UsingOptions } from "./lock/options.js";
export { Redlock } from "./lock/redlock.js";
export {
  changeMembers,
  type Member,
  type MemberChangeReport,
  type MemberChangeRequest,
  type MembershipOptions,
  type MembershipRecord,
  type MembershipStatus,
  membershipStatus,
  type NodeMembershipReport,
} from "./membership/api.js";
export type { NodeInput } from "./node/resolve.js";
export type { NodeStatus } from "./node/status.js";
export type { NodeTransport } from "./node/transport.js";
export type { Logger, NodeState, RedquorumEvent } from "./observe.js";
export type { NodeWarning } from "./quorum/node-group.js";
