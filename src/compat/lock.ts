/**
 * node-redlock's `Lock` over a redquorum lock: `expiration` is read from
 * redquorum's validity, measured on the monotonic clock, and shown as a
 * wall-clock time (milliseconds since the epoch) at each read.
 */
import type { Clock } from "../clock.js";
import type { Lock as CoreLock } from "../lock/lock.js";
import type { ExecutionResult, ExecutionStats } from "./execution.js";
import type { Redlock } from "./redlock.js";

/** A drop-in lock's link to the redquorum lock it shows. */
export interface LockState {
  readonly core: CoreLock;
  readonly clock: Clock;
  /**
   * Milliseconds taken off the validity: a call's `driftFactor` above the
   * instance's (redquorum applies the instance's to the lock itself).
   */
  readonly extraDriftMs: number;
  /** Replaced by the lock `extend` returned, or released: `expiration` reads 0, as in node-redlock. */
  invalidated: boolean;
  /** A lower expiration set by the caller, on the monotonic clock. */
  capMs: number;
  /**
   * The lowest expiration the caller set that was already past when set
   * (node-redlock's own code sets 0): read back as given, as node-redlock
   * does. Converted to and from the monotonic clock it could read a
   * millisecond off (0 read back as -1).
   */
  pastCap: number;
}

const states = new WeakMap<Lock, LockState>();

/**
 * A granted lock, as node-redlock's: `release()` and `extend(duration)`
 * (which resolves to a new `Lock`; this one then reads `expiration` 0).
 * Locks come from `acquire` and `extend`: one made with `new Lock(…)` holds
 * nothing, and its `release` and `extend` reject.
 */
export class Lock {
  readonly redlock: Redlock;
  readonly resources: string[];
  readonly value: string;
  readonly attempts: ReadonlyArray<Promise<ExecutionStats>>;
  /** `expiration` of a lock made with `new Lock(…)`, as given. */
  private givenExpiration: number;

  constructor(
    redlock: Redlock,
    resources: string[],
    value: string,
    attempts: ReadonlyArray<Promise<ExecutionStats>>,
    expiration: number,
  ) {
    this.redlock = redlock;
    this.resources = resources;
    this.value = value;
    this.attempts = attempts;
    this.givenExpiration = expiration;
  }

  /**
   * When the lock's validity ends, in milliseconds since the epoch (as
   * `Date.now()`); 0 once released, replaced by `extend`, or found lost.
   * Read from the monotonic validity at each read, so a wall clock that
   * jumps moves it along: `lock.expiration > Date.now()` says whether the
   * lock is still valid, whatever the wall clock did.
   */
  get expiration(): number {
    const state = states.get(this);
    if (!state) return this.givenExpiration;
    const { core, clock } = state;
    const validUntilMs = Math.min(core.validUntilMs - state.extraDriftMs, state.capMs);
    if (state.invalidated || core.released || validUntilMs === Number.NEGATIVE_INFINITY) return 0;
    // Never after the present, so a wall clock stepped back still reads it expired.
    if (state.pastCap !== Number.POSITIVE_INFINITY) return Math.min(state.pastCap, Date.now() - 1);
    return Math.floor(Date.now() + validUntilMs - clock.now());
  }

  /** Lowers it (only): node-redlock's own code sets it to 0 to invalidate a lock. */
  set expiration(value: number) {
    const state = states.get(this);
    if (!state) {
      this.givenExpiration = value;
      return;
    }
    const now = Date.now();
    state.capMs = Math.min(state.capMs, state.clock.now() + (value - now));
    if (value < now) state.pastCap = Math.min(state.pastCap, value);
  }

  release(): Promise<ExecutionResult> {
    return this.redlock.release(this);
  }

  extend(duration: number): Promise<Lock> {
    return this.redlock.extend(this, duration);
  }
}

// Bundled beside redquorum's own Lock, the bundler renames this class
// ("Lock2"), which constructor.name and util.inspect would show:
// node-redlock's is "Lock". (Not esbuild's keepNames: that wraps every
// named closure, on the hot path too.)
Object.defineProperty(Lock, "name", { value: "Lock" });

/** A drop-in lock showing `core`. */
export function lockOf(
  owner: Redlock,
  core: CoreLock,
  clock: Clock,
  attempts: ReadonlyArray<Promise<ExecutionStats>>,
  extraDriftMs: number,
): Lock {
  const lock = new Lock(owner, [...core.resources], core.value, attempts, 0);
  states.set(lock, {
    core,
    clock,
    extraDriftMs,
    invalidated: false,
    capMs: Number.POSITIVE_INFINITY,
    pastCap: Number.POSITIVE_INFINITY,
  });
  return lock;
}

/** The link of a lock this module made; undefined for one made with `new Lock(…)`. */
export function stateOf(lock: Lock): LockState | undefined {
  return states.get(lock);
}
