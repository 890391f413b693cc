/**
 * What the ID server needs from NextId: an interface, so tests and
 * embedders can pass their own. `nextBatch` must hand out IDs above every
 * ID it handed out before the call (the server's real-time order rests on
 * it, see id-batches.ts).
 */
import type { NodeStatus } from "../node/status.js";

export interface IdSource {
  nextBatch(count: number, options?: { signal?: AbortSignal }): Promise<bigint[]>;
  status(): Promise<NodeStatus[]>;
}
