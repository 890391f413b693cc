/**
 * What the ID server needs from NextId: an interface, so tests and
 * embedders can pass their own. `nextBatch` must hand out IDs above every
 * ID it handed out before the call (the server's real-time order rests on
 * it, see id-batches.ts).
 */
import type { RedquorumError } from "../errors.js";
import type { NodeStatus } from "../node/status.js";

export interface IdSource {
  /**
   * Set once the source refuses every call for good (NextId: its node list
   * does not fit the cluster): /healthz says so, and its 503s carry no
   * Retry-After.
   */
  readonly refused?: RedquorumError | undefined;
  nextBatch(count: number, options?: { signal?: AbortSignal }): Promise<bigint[]>;
  status(): Promise<NodeStatus[]>;
  /**
   * Checks the nodes out of service or due a check, without waiting: called
   * on /healthz and /metrics, so that the node metrics of a server without
   * traffic follow the nodes (a node back is counted in service again).
   */
  refreshNodes?(): void;
}
