/**
 * One Redlock client as a workload: the operations the `lock` and
 * `lock-set` workloads perform, each recorded in the history, and the IPC
 * commands that let a scripted row perform them at an exact moment.
 */
import { Redis } from "ioredis";
import { fencedSet, type Lock, Redlock } from "../../../src/index.js";
import { monotonicMs } from "../history.js";
import { type Commands, type Recorder, sharedClock, type WorkloadOptions } from "./common.js";

export class LockClient {
  readonly redlock: Redlock;
  readonly held = new Map<string, Lock>();
  private store: Redis | undefined;

  constructor(
    readonly options: WorkloadOptions,
    readonly recorder: Recorder,
  ) {
    this.redlock = new Redlock(options.urls as string[], {
      // Rows about node timeouts set their own; the rest must not fail on a
      // loaded machine's late answers at the 50 ms default (a release that
      // reached 2 of 5 nodes, a contended round with 2 nodes stopped).
      nodeTimeoutMs: 200,
      ...options.library,
      fencing: options.fencing,
      clock: sharedClock,
    });
    if (options.storeUrl) {
      this.store = new Redis(options.storeUrl, { commandTimeout: 1_000, maxRetriesPerRequest: 1 });
      this.store.on("error", () => {});
    }
  }

  async acquire(
    resource: string,
    ttlMs = this.options.ttlMs,
    extra: Record<string, unknown> = {},
  ): Promise<Lock> {
    const lock = await this.recorder.op(
      "acquire",
      resource,
      { ttlMs },
      () => this.redlock.acquire([resource], ttlMs, extra),
      (lock) => ({
        ...(lock.fence === undefined ? {} : { fence: lock.fence.toString() }),
        validUntilMs: lock.validUntilMs,
        grantedNodeCount: lock.grantedNodeCount,
      }),
    );
    this.held.set(resource, lock);
    return lock;
  }

  /**
   * Whether the lock on `resource` has more than a third of its TTL left:
   * a careful client acts only then (a process starved of CPU on a loaded
   * machine would otherwise act after its validity, L15's pause by accident).
   */
  stillValid(resource: string): boolean {
    return (this.held.get(resource)?.remainingMs() ?? 0) > Math.max(50, this.options.ttlMs / 3);
  }

  /** The critical section's moment: recorded as an instant op with the fence the holder believes in. */
  async use(resource: string): Promise<{ remainingMs: number }> {
    const lock = this.held.get(resource);
    const fence = lock?.fence?.toString();
    return this.recorder.op(
      "use",
      resource,
      { ...(fence === undefined ? {} : { fence }), remainingMs: lock?.remainingMs() ?? 0 },
      async () => ({ remainingMs: lock?.remainingMs() ?? 0 }),
      (result) => result,
    );
  }

  async release(resource: string): Promise<void> {
    const lock = this.held.get(resource);
    if (!lock) return;
    this.held.delete(resource);
    await this.recorder.op("release", resource, undefined, () => lock.release());
  }

  async extend(resource: string, ttlMs = this.options.ttlMs): Promise<void> {
    const lock = this.held.get(resource);
    if (!lock) throw new Error(`no lock held on ${resource}`);
    await this.recorder.op(
      "extend",
      resource,
      { ttlMs },
      () => lock.extend(ttlMs),
      () => ({ validUntilMs: lock.validUntilMs }),
    );
  }

  /** lock-set: reads the shared value of `resource` from the store. */
  async read(resource: string): Promise<number> {
    const store = this.requireStore();
    const fence = this.held.get(resource)?.fence?.toString();
    return this.recorder.op(
      "read",
      resource,
      fence === undefined ? undefined : { fence },
      async () => Number((await store.get(`value:${resource}`)) ?? "0"),
      (value) => ({ value }),
    );
  }

  /** lock-set: writes the shared value, through the fenced store when configured. */
  async write(resource: string, value: number): Promise<void> {
    const store = this.requireStore();
    const token = this.held.get(resource)?.fence;
    await this.recorder.op(
      "write",
      resource,
      { value, ...(token === undefined ? {} : { fence: token.toString() }) },
      async () => {
        if (this.options.fencedStore && token !== undefined) {
          const result = await fencedSet(store, `value:${resource}`, String(value), token);
          if (!result.written) {
            throw Object.assign(new Error(`stale fence ${token} < ${result.seenToken}`), {
              code: "STALE_FENCE",
            });
          }
        } else {
          await store.set(`value:${resource}`, String(value));
        }
      },
    );
  }

  commands(): Commands {
    const resource = (args: Record<string, unknown>) =>
      String(args.resource ?? this.options.resources[0]);
    return {
      acquire: async (args) => {
        const lock = await this.acquire(
          resource(args),
          typeof args.ttlMs === "number" ? args.ttlMs : undefined,
          (args.acquireOptions as Record<string, unknown>) ?? {},
        );
        return {
          fence: lock.fence?.toString(),
          validUntilMs: lock.validUntilMs,
          nowMs: monotonicMs(),
        };
      },
      use: (args) => this.use(resource(args)),
      release: (args) => this.release(resource(args)),
      extend: (args) =>
        this.extend(resource(args), typeof args.ttlMs === "number" ? args.ttlMs : undefined),
      read: (args) => this.read(resource(args)),
      write: (args) => this.write(resource(args), Number(args.value)),
      /** read, +1, write: lock-set's step, under a lock the process holds. */
      increment: async (args) => {
        const value = await this.read(resource(args));
        await this.write(resource(args), value + 1);
        return { value: value + 1 };
      },
      /**
       * L16: the event loop blocked for `blockMs` right after the acquire
       * sent its commands (the replies arrive during the block and are read
       * after it).
       */
      acquireBlocked: async (args) => {
        const name = resource(args);
        const ttlMs = Number(args.ttlMs ?? this.options.ttlMs);
        const lock = await this.recorder.op(
          "acquire",
          name,
          { ttlMs, blockMs: args.blockMs },
          async () => {
            const acquiring = this.redlock.acquire([name], ttlMs, { retry: { retries: 0 } });
            // setImmediate runs after this turn's writes went out and before
            // the next poll phase reads the replies: the block falls between.
            await new Promise<void>((resolve) =>
              setImmediate(() => {
                const until = monotonicMs() + Number(args.blockMs);
                while (monotonicMs() < until) {
                  // the blocked event loop (a long synchronous task, a GC pause)
                }
                resolve();
              }),
            );
            return acquiring;
          },
          (lock) => ({ fence: lock.fence?.toString(), validUntilMs: lock.validUntilMs }),
        );
        this.held.set(name, lock);
        return { validUntilMs: lock.validUntilMs };
      },
      /** L24: two extensions of one lock issued in one tick; reports the validity the Lock claims after both. */
      extendBoth: async (args) => {
        const name = resource(args);
        const lock = this.held.get(name);
        if (!lock) throw new Error(`no lock held on ${name}`);
        const ttls = args.ttls as number[];
        const settled = await Promise.allSettled(
          ttls.map((ttlMs) =>
            this.recorder.op(
              "extend",
              name,
              { ttlMs },
              () => lock.extend(ttlMs),
              () => ({ validUntilMs: lock.validUntilMs }),
            ),
          ),
        );
        return {
          outcomes: settled.map((s) => s.status),
          remainingMs: lock.remainingMs(),
          nowMs: monotonicMs(),
        };
      },
      remaining: async (args) => ({
        remainingMs: this.held.get(resource(args))?.remainingMs() ?? 0,
      }),
    };
  }

  async close(): Promise<void> {
    for (const resource of [...this.held.keys()]) await this.release(resource).catch(() => {});
    await this.redlock.close();
    this.store?.disconnect();
  }

  private requireStore(): Redis {
    if (!this.store) throw new Error("this workload has no storeUrl");
    return this.store;
  }
}
