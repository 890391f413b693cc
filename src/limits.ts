/**
 * Defaults and hard limits, in one place. Every option that has a default is
 * listed here with its unit in its name; the assertions at the bottom keep the
 * relationships between them true.
 *
 * `defaults` and `limits` (Redlock's, and what locks and IDs share) are
 * public API; `idDefaults` and `idLimits` (NextId), `fenceDefaults` and
 * `fenceLimits` (fencing tokens) and `releaseNoticeLimits` (the heir
 * watch) are internal.
 */
import { assert } from "./assert.js";

export const defaults = {
  /** Clock drift allowance as a fraction of the TTL (Redlock's "a few ms" plus drift). */
  driftFactor: 0.01,
  /** Fixed drift allowance added to `ttl * driftFactor`, in milliseconds. */
  driftMs: 2,
  /** How long one node may take to answer one call; far below any TTL. */
  nodeTimeoutMs: 50,
  /**
   * Timeout of the one-time checks on first contact (INFO): this may include
   * opening the connection, so it is longer than `nodeTimeoutMs`.
   */
  checkTimeoutMs: 2_000,
  /**
   * How long a node's checks (role, run_id, NextId's durability) are
   * trusted before they are made again; they are also made again after
   * every reconnect.
   */
  recheckIntervalMs: 10_000,
  /** Longest TTL a lock may ask for; later the length of the restart quarantine. */
  maxTtlMs: 5 * 60_000,
  /**
   * How long an instance may keep taking back a single-key lock it
   * releases before the nodes hand the key to the next waiter of another
   * instance (lock/turns.ts), in milliseconds; 0: hand it over at every
   * release. A waiter waits about one turn and one handover (or about 16
   * in-process handoffs) per instance ahead of it. 2, not more: with 64
   * processes contending here, the acquire p99 grew with the turn (about
   * 63 × (turn + a handover of 5–7 ms)) and stayed within the
   * benchmark's bound (10 × the p99 of one contender alone × those ahead, ~550–700 ms)
   * only up to about 5 ms; 2 ms kept most of the grants/s that turns add
   * (bench/results/contention.md).
   */
  turnMs: 2,
  retry: {
    /** Attempts after the first one. */
    retries: 10,
    delayMs: 200,
    jitterMs: 100,
  },
  /**
   * Wait before repairing a lost counter (Redlock's and NextId's
   * `repairDelayMs`): above every node timeout (`limits.nodeTimeoutMsMax`),
   * so no round that might still count the lost node's old vote is running.
   */
  repairDelayMs: 2_000,
  /**
   * A node that has had commands outstanding with no reply at all for this
   * long is stalled (SIGSTOP, a black-holed network): new calls to it fail
   * at once instead of piling up in its connection's queue (fault row
   * I15, docs/faults.md). Twice the longest node timeout: any call still
   * waiting on it has long timed out, so no vote is lost that could still
   * count. The default of Redlock's and NextId's `nodeStallMs`, which may
   * be no less than twice their own node timeout.
   */
  nodeStallMs: 2_000,
} as const;

export const limits = {
  /** Bytes of one resource name (UTF-8). */
  resourceBytesMax: 1024,
  /** Resources in one lock. */
  resourceCountMax: 64,
  /** Independent nodes; Redlock with more than this is a deployment error. */
  nodeCountMax: 15,
  /** Upper bound for `maxTtlMs` (about 24 days: timers cannot go beyond 2^31-1 ms). */
  ttlMsMax: 2 ** 31 - 1,
  retriesMax: 10_000,
  /** Longest `turnMs`: a waiter's wait grows with it. */
  turnMsMax: 10_000,
  delayMsMax: 60_000,
  /**
   * Any per-node timeout, for locks and IDs alike: repairs of lost counters
   * wait `repairDelayMs`, which must exceed every client's node timeout.
   */
  nodeTimeoutMsMax: 1_000,
  checkTimeoutMsMax: 60_000,
  /** @deprecated The default of `repairDelayMs`: `defaults.repairDelayMs`. */
  repairDelayMs: defaults.repairDelayMs,
  /**
   * How long a node trusts its cached memory identity (node/memory-check.ts)
   * before a vote script reads INFO again: a restore in place completed
   * within this long of its copy being taken is seen only when it has
   * passed. INFO commandstats costs Redis tens of µs, so not every call.
   */
  memoryCheckIntervalMs: 100,
  /**
   * `close()` runs the repairs its instance scheduled (NextId's ID counters,
   * Redlock's fencing counters and quarantine judgements) when their delay
   * ends rather than dropping them, so a short-lived client leaves the
   * nodes it found in need of repair repaired. It waits at most the delay
   * (`repairDelayMs`, 0 for a judgement), two node timeouts (a repair's
   * rounds) and this margin; a repair still running then is stopped.
   */
  closeRepairMarginMs: 1_000,
  /**
   * Handoffs in a row from one instance's lock holders to its own waiters
   * before the lock is really released (and announced), so that waiters in
   * other processes are not starved: `handoffRunMin` while another instance
   * was heard listening at the last such release, doubling up to
   * `handoffRunMax` while none was, and back to `handoffRunMin` as soon as
   * a handoff finds another instance's waiter at the head of a node's
   * queue. Each real release costs about one round.
   */
  handoffRunMin: 16,
  handoffRunMax: 1024,
  /**
   * Waiters woken by another instance's release notice wait a random 0 to
   * this many ms first: every subscriber hears in subscription order, so
   * without it the first instance to subscribe would win every such race.
   */
  noticeJitterMs: 3,
  /**
   * A waiter named the heir by some nodes but not yet by a majority is woken
   * this long after the first notice (lock/heir-watch.ts): the time a
   * release takes to reach the other nodes, a few ms on a loaded machine.
   */
  heirNoticeWindowMs: 3,
  /**
   * How long a release reserves a lock key for the head of a node's queue
   * (heir-queue.ts): the notified heir needs one round; a reservation not
   * taken up lapses into a free key after this long.
   */
  heirReservationMs: 200,
  /**
   * How many rounds a release's notice woke a multi-resource waiter for
   * count as one of its retries (lock/acquire.ts): the notice concerns one
   * of its keys, and its round may be refused for another still held, so
   * one each would use its retries up beside a busy key; none would leave
   * its rounds bounded only in time.
   */
  noticedRoundsPerRetry: 10,
  /**
   * How long a release within its instance's turn keeps a key with waiters
   * for that instance's next acquire (lock/turns.ts): one round trip is
   * enough; if the instance is gone, the key is free again this soon.
   */
  turnReservationMs: 50,
  /**
   * How long a lock's release waits for a majority's answers, whatever
   * `nodeTimeoutMs` says (the cap on it, so still within the bound
   * `repairDelayMs` counts on). A release protects no validity: cut off
   * at 50 ms on a busy machine it reported a release that happened as
   * failed ("reached 0 of 5 nodes"). The undo of a failed attempt keeps
   * `nodeTimeoutMs`: the caller's next attempt waits on it.
   */
  releaseWaitMs: 1_000,
  /** A waiter's registration in a node's queue lasts at least this long unless renewed. */
  queueRegistrationMinMs: 1_000,
  /** Callers of one Redlock instance waiting for locks at once; more fail with QueueFullError. */
  waitersMax: 100_000,
  /** 20 random bytes per acquisition, as the Redlock algorithm suggests. */
  lockValueBytes: 20,
  /** @deprecated The default of `nodeStallMs`: `defaults.nodeStallMs`. */
  nodeStallMs: defaults.nodeStallMs,
  /**
   * Commands outstanding on one node at most; more fail at once. Bounds
   * the memory a node that stalls under heavy load can hold before
   * `nodeStallMs` has passed (each costs about a few KiB until answered).
   */
  outstandingCommandsMax: 5_000,
  /**
   * Calls of the lock's acquire or release script that one batch call to a
   * node carries at most (node/redis-node.ts): one call less per lock up to
   * here, and a bounded reply (a batch is answered as a whole).
   */
  scriptBatchMax: 64,
  /**
   * Calls in flight on a node from which its lock script calls are batched
   * (below it each goes out at once: one worker's calls, whose node has at
   * most its last round's late reply in flight, never wait for a batch).
   */
  scriptBatchFromOutstanding: 4,
} as const;

// ---- NextId -------------------------------------------------------------

export const idDefaults = {
  /** Inside redquorum's own namespace, where no lock key may be. */
  key: "redquorum:id",
  /** One conditional write per round, group commit, pipelining (see IdStrategy). */
  strategy: "range",
  /** Small IDs, 1, 2, 3, …: a counter that took a clock proposal never goes back (see IdProposals). */
  proposals: "dense",
  /** Above Redlock's 50 ms: every ID round writes, and fsync on every write takes time. */
  nodeTimeoutMs: 200,
  /**
   * A lost ID round is a race with another instance, usually over by the
   * next round: the first backoff is short (1 ms, doubling up to 100), and
   * a call gives up only after many lost rounds.
   */
  retry: { retries: 30, delayMs: 1, delayMsMax: 100 },
  /** Rounds one instance keeps in flight at once (`range`), so the next round need not wait for a round trip. */
  pipelineDepth: 4,
  /** The wait fencing always uses: above every client's node timeout. */
  repairDelayMs: defaults.repairDelayMs,
} as const;

export const idLimits = {
  /** IDs in one `nextBatch` call; bounds what one call asks of a round. */
  batchCountMax: 10_000,
  /** Calls waiting in one instance (as `limits.waitersMax` for locks); more fail with QueueFullError. */
  queueLengthMax: 100_000,
  /** IDs one round may claim for the calls it serves (group commit): bounds how far one round moves the counter. */
  roundIdsMax: 1_000_000,
  /** Bound on `pipelineDepth`: each round in flight is one more call outstanding on every node. */
  pipelineDepthMax: 64,
  /**
   * How far ahead of this machine's wall clock a `proposals: "clock"`
   * reading may be: a proposal moves the shared counter for good, and a
   * reading in the wrong unit (nanoseconds) is a million times more.
   */
  clockAheadMsMax: 86_400_000,
} as const;

// ---- fencing tokens -------------------------------------------------------

export const fenceDefaults = {
  /** `fencedSet`'s bound on its one call: the protected Redis is the caller's, not one of the lock's nodes. */
  fencedSetTimeoutMs: 1_000,
} as const;

export const fenceLimits = {
  /**
   * Fencing rounds after the acquire's own, at most, before the attempt
   * counts as failed: each proposes above the highest values the last one
   * reported, so one is usually enough, and the lock is held meanwhile.
   */
  roundsMax: 3,
  /**
   * Counters one client remembers, so its next proposal is usually right
   * (FenceMemory): the oldest go first; a forgotten one may cost a fencing round.
   */
  memoryEntriesMax: 10_000,
} as const;

// ---- heir notices (lock internals) ---------------------------------------

export const releaseNoticeLimits = {
  /** Random bytes of an instance's id (its waiters' ids and heir channel): enough to tell instances apart. */
  instanceIdBytes: 8,
} as const;

assert(
  defaults.repairDelayMs > limits.nodeTimeoutMsMax,
  "repairs must wait out every node timeout",
);
assert(
  limits.releaseWaitMs <= limits.nodeTimeoutMsMax,
  "a release waits within the node timeout cap",
);
assert(
  defaults.nodeStallMs >= 2 * limits.nodeTimeoutMsMax,
  "a node may not count as stalled within a timeout",
);
assert(defaults.nodeTimeoutMs < defaults.maxTtlMs, "node timeout must be below the max TTL");
assert(defaults.maxTtlMs <= limits.ttlMsMax, "default max TTL must be within the hard limit");
assert(defaults.retry.jitterMs <= defaults.retry.delayMs, "jitter must not exceed the delay");
assert(
  idDefaults.repairDelayMs > limits.nodeTimeoutMsMax,
  "repairs must wait out every node timeout",
);
assert(
  idDefaults.nodeTimeoutMs <= limits.nodeTimeoutMsMax,
  "NextId's node timeout within the limit",
);
assert(
  fenceDefaults.fencedSetTimeoutMs <= limits.nodeTimeoutMsMax,
  "fencedSet's timeout within the node timeout cap",
);
assert(idDefaults.pipelineDepth <= idLimits.pipelineDepthMax, "pipeline depth within the limit");
