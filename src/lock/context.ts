/**
 * What the lock operations (acquire, release, extend) need from the Redlock
 * instance that runs them. The instance builds one context and passes it
 * in; each operation names the part it uses (`Pick<LockContext, ...>`), so
 * no operation imports the class back, and what it may touch is written
 * down.
 */

import type { Timer } from "../clock.js";
import type { FenceIssuer } from "../fencing/issuer.js";
import type { NodeGroup } from "../quorum/node-group.js";
import type { LockOwner } from "./lock.js";
import type { ResolvedRedlockOptions } from "./options.js";
import type { Courtesy, ReleaseWatch } from "./release-watch.js";
import type { ScriptRunner } from "./scripts.js";
import type { WaitQueues } from "./wait-queue.js";

export interface LockContext {
  /** What granted locks call back (the Redlock itself). */
  readonly owner: LockOwner;
  readonly options: ResolvedRedlockOptions;
  readonly group: NodeGroup;
  /** Runs the lock and fencing scripts (guardedRunner). */
  readonly run: ScriptRunner;
  readonly fences: FenceIssuer;
  /** ARGV[3] of the acquire, extend and fence scripts: the quarantine in ms, "0" for off. */
  readonly quarantineArg: string;
  /** Callers of this instance waiting for a lock, first come first served per key. */
  readonly waits: WaitQueues;
  /** Releases by other instances, heard through pub/sub for the keys waited for. */
  readonly watch: ReleaseWatch;
  /** Keys this instance just released to waiters elsewhere: its next acquire waits a moment. */
  readonly courtesy: Courtesy;
  /** Fallback timers of parked waiters, on the instance's clock. */
  readonly timer: Timer;
  /** Whether `close()` was called. */
  isClosed(): boolean;
  /** Throws `ClosedError` once `close()` was called. */
  assertOpen(): void;
  /** Wakes the first waiter of `key` a random moment later (as a release notice would). */
  wakeLater(key: string): void;
  /** Lets `close()` wait for `operation`. */
  track<T>(operation: Promise<T>): Promise<T>;
}
