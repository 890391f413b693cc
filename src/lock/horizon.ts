/**
 * The cluster's horizon: how long its locks may last, the longest
 * `maxTtlMs` of its clients. A node that lost its memory must sit out the
 * TTL of every lock it may have forgotten, and that lock may be another
 * client's, granted with a longer `maxTtlMs` than this client's: a
 * quarantine as long as this client's (a CLI run with its default, a
 * service configured apart) would end while that lock is still held, and
 * a second client could take it.
 *
 * So every client records its `maxTtlMs` on each node it checks (the
 * certify script, `redquorum:horizon`), and the quarantine of a lost node
 * is judged from the records of the other nodes, read after the loss
 * (lock/quarantine-judge.ts): not from what one client knows, which may
 * be stale. This class holds the client's side: its record and how long
 * it lives, and the longest record its checks have heard of, which is
 * warned of once (the clients of one cluster should agree) and judges the
 * quarantine of a cluster of one node, which has no other node to read.
 *
 * A record lapses `recordLifetimeMs` after the client's last check of the
 * node, so a client that stopped (a one-off CLI run) does not lengthen the
 * quarantine for good. It outlives the locks the client was granted: a
 * node votes only while its last passed check is less than one recheck
 * interval and one check timeout old (NodeGroup: rechecks that keep
 * failing take it out), so the client's last grant or extend there comes
 * within that of the check that recorded it, and the lock lasts at most
 * maxTtlMs after that.
 */

import { limits } from "../limits.js";
import type { NodeWarning } from "../node/admission.js";

export interface HorizonOptions {
  readonly maxTtlMs: number;
  readonly recheckIntervalMs: number;
  readonly checkTimeoutMs: number;
}

export class QuarantineHorizon {
  /** This client's maxTtlMs, as recorded on the nodes. */
  readonly ownMs: number;
  /** How long a node keeps this client's record after a check. */
  readonly recordLifetimeMs: number;
  private readonly onWarning: (warning: NodeWarning) => void;
  /**
   * Per node endpoint: the longest maxTtlMs its checks reported, and until
   * when (this client's clock) it may still stand for a lock held: as long
   * as the record it came from lives after it was read. A node that lost
   * its records (restarted empty) does not erase what it reported before.
   */
  private readonly reported = new Map<string, { ms: number; untilMs: number }>();
  private warnedMs: number;
  /** This client's clock (ms). */
  private readonly now: () => number;

  constructor(
    options: HorizonOptions,
    onWarning: (warning: NodeWarning) => void,
    now: () => number,
  ) {
    this.now = now;
    this.ownMs = options.maxTtlMs;
    // Twice the interval and the check timeout: room for a late recheck.
    this.recordLifetimeMs =
      options.maxTtlMs + 2 * (options.recheckIntervalMs + options.checkTimeoutMs);
    this.onWarning = onWarning;
    this.warnedMs = this.ownMs;
  }

  /** This client's maxTtlMs, or a longer one recorded on a node it checked and not lapsed since. */
  get ms(): number {
    const now = this.now();
    let longest = this.ownMs;
    for (const [endpoint, heard] of this.reported) {
      if (heard.untilMs <= now) this.reported.delete(endpoint);
      else longest = Math.max(longest, heard.ms);
    }
    return longest;
  }

  /** The certify script's arguments after durability: this client's record and its lifetime. */
  get recordArgs(): readonly string[] {
    return [String(this.ownMs), String(this.recordLifetimeMs)];
  }

  /**
   * What node `endpoint`'s certify reply says is recorded there (ms). A
   * longest value above this client's maxTtlMs is warned of, once per new
   * value: the clients of one cluster should agree.
   */
  learn(endpoint: string, recordedMs: unknown): void {
    const value = typeof recordedMs === "number" ? recordedMs : Number.NaN;
    if (!Number.isSafeInteger(value) || value < 0) return;
    // A record beyond what any client may set (written by hand) counts as the most allowed.
    const ms = Math.min(value, limits.ttlMsMax);
    const now = this.now();
    const before = this.reported.get(endpoint);
    // The record lives its client's maxTtlMs plus that client's slack
    // after its last check; the slack is not recorded, so this client's.
    const heard = { ms, untilMs: now + ms + this.recordLifetimeMs - this.ownMs };
    if (!before || before.untilMs <= now || before.ms <= ms) this.reported.set(endpoint, heard);
    const longest = this.ms;
    if (longest > this.warnedMs) {
      this.warnedMs = longest;
      this.onWarning({
        code: "REDQUORUM_MAX_TTL",
        endpoint,
        message:
          `${endpoint} records a maxTtlMs of ${longest} ms from another client of this ` +
          `cluster, longer than this client's ${this.ownMs} ms: a restart quarantine lasts ` +
          `${longest} ms (give every client of a cluster the same maxTtlMs)`,
      });
    }
  }
}
