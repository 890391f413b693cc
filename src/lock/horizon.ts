/**
 * How long a node that lost its memory stays in the restart quarantine:
 * the longest `maxTtlMs` this client knows of among the cluster's clients,
 * not only its own. A node that forgot a lock must sit out that lock's
 * TTL, and the lock may be another client's, granted with a longer
 * `maxTtlMs`: a quarantine started with a shorter one (a CLI run with its
 * default, a service configured apart) ends while that lock is still held,
 * and a second client can take it.
 *
 * So every client records its `maxTtlMs` on each node it checks (the
 * certify script, `redquorum:horizon`) and learns the longest recorded
 * there; its quarantine is the longest of its own and every node's it
 * heard, and a restart found by the certify script is quarantined for at
 * least the longest recorded on that node. A node that restarted empty has
 * lost its own records, but the others still carry them, and first
 * contact checks every node before the first vote (NodeGroup.ready).
 *
 * This narrows the gap between clients configured apart; it does not
 * close it, and every client of a cluster should still use one
 * `maxTtlMs`. A client that meets a loss before it has heard the longer
 * record starts the shorter quarantine: one already running when the
 * longer client first checked the other nodes (it learns of it at its
 * next recheck of them), or one whose first contact went on after a
 * majority without the slower nodes that carry it (NodeGroup.ready's
 * grace). Closing it needs the lost node's quarantine judged from the
 * records of N - Q + 1 other nodes read after the loss, as the fencing
 * repair does for counters.
 *
 * A record lapses `recordLifetimeMs` after the client's last check of the
 * node, so a client that stopped (a one-off CLI run) does not lengthen the
 * quarantine for good. It outlives the locks the client was granted: a
 * node votes while checked within the recheck interval or while its
 * recheck runs, so the client's last grant there comes about one interval
 * and one check timeout after the last check that recorded it, and the
 * lock lasts at most maxTtlMs after that. (A node whose rechecks keep
 * failing while its votes succeed keeps voting, and its record can lapse
 * first; the other nodes' records are still there.)
 */

import { limits } from "../limits.js";
import type { NodeWarning } from "../node/admission.js";

export interface HorizonOptions {
  readonly maxTtlMs: number;
  readonly quarantine: boolean;
  readonly recheckIntervalMs: number;
  readonly checkTimeoutMs: number;
}

export class QuarantineHorizon {
  /** This client's maxTtlMs, as recorded on the nodes. */
  readonly ownMs: number;
  /** How long a node keeps this client's record after a check. */
  readonly recordLifetimeMs: number;
  private readonly quarantine: boolean;
  private readonly onWarning: (warning: NodeWarning) => void;
  /** Per node endpoint: the longest maxTtlMs its last check reported. */
  private readonly reported = new Map<string, number>();
  private longestMs: number;
  private warnedMs: number;

  constructor(options: HorizonOptions, onWarning: (warning: NodeWarning) => void) {
    this.ownMs = options.maxTtlMs;
    // Twice the interval and the check timeout: room for a late recheck.
    this.recordLifetimeMs =
      options.maxTtlMs + 2 * (options.recheckIntervalMs + options.checkTimeoutMs);
    this.quarantine = options.quarantine;
    this.onWarning = onWarning;
    this.longestMs = this.ownMs;
    this.warnedMs = this.ownMs;
  }

  /** The quarantine in ms: this client's maxTtlMs, or a longer one recorded on a node. */
  get ms(): number {
    return this.longestMs;
  }

  /**
   * The scripts' quarantine argument: the quarantine in ms, negative with
   * the quarantine off (this client waits none out, but still starts one,
   * as long as the cluster's, for the others: node-state.ts).
   */
  get arg(): string {
    return String(this.quarantine ? this.ms : -this.ms);
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
    this.reported.set(endpoint, Math.min(value, limits.ttlMsMax));
    this.longestMs = Math.max(this.ownMs, ...this.reported.values());
    if (this.longestMs > this.warnedMs) {
      this.warnedMs = this.longestMs;
      this.onWarning({
        code: "REDQUORUM_MAX_TTL",
        endpoint,
        message:
          `${endpoint} records a maxTtlMs of ${this.longestMs} ms from another client of this ` +
          `cluster, longer than this client's ${this.ownMs} ms: its restart quarantine lasts ` +
          `${this.longestMs} ms too (give every client of a cluster the same maxTtlMs)`,
      });
    }
  }
}
