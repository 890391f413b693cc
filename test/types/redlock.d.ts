// node-redlock 5.0.0-beta.2 ships types its `exports` map does not point to
// under NodeNext resolution; this is the part of its API the interop test uses.
declare module "redlock" {
  import type { Redis } from "ioredis";
  export interface NodeRedlockLock {
    release(): Promise<unknown>;
  }
  export default class Redlock {
    constructor(clients: Iterable<Redis>, settings?: { retryCount?: number; driftFactor?: number });
    acquire(resources: string[], duration: number): Promise<NodeRedlockLock>;
    on(event: "error", listener: (error: unknown) => void): this;
  }
}
