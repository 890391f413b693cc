/**
 * Releases across Redlock instances: hearing the releases other instances
 * announce for the keys this one waits for (ReleaseWatch, one ChannelSync
 * per node), and letting their waiters go first after a release of ours
 * they heard (Courtesy).
 */

import type { Clock } from "../clock.js";
import { releaseNoticeLimits } from "../limits.js";
import type { RedisNode } from "../node/redis-node.js";
import type { Subscription } from "../node/transport.js";

/** The release script publishes on this channel + the key it deleted. */
export const releaseChannelPrefix = "redquorum:released:";

/**
 * Hears releases done by other Redlock instances (other processes), for the
 * keys this instance has waiters for: the release script publishes on every
 * node where it deleted the key, and one pub/sub connection per node, opened
 * on the first wait, listens. Like Redisson's lock channel, a message is
 * only a hint to try now; the waiters' fallback timers cover lost ones.
 *
 * A release publishes a tag, `<instance>:<sequence>`; each node repeats it,
 * so only the first copy counts, and an instance ignores its own tags (it
 * woke its waiters itself) unless the tag is marked as a yield (`y:`): then
 * its own waiters hear it no sooner than anyone else's.
 */
export class ReleaseWatch {
  private readonly nodes: readonly RedisNode[];
  /** Whether any node's transport offers pub/sub. */
  readonly available: boolean;
  private readonly ownPrefix: string;
  private readonly onReleased: (key: string) => void;
  private subscriptions: Array<ChannelSync | undefined> | undefined;
  /** Per watched key, the tag heard last (each node sends a copy). */
  private readonly lastTag = new Map<string, string>();
  private closed = false;
  private sequence = 0;

  constructor(nodes: readonly RedisNode[], instanceId: string, onReleased: (key: string) => void) {
    this.nodes = nodes;
    this.available = nodes.some((node) => node.transport.subscribe !== undefined);
    this.ownPrefix = `${instanceId}:`;
    this.onReleased = onReleased;
  }

  /** The tag for a release: heard by other instances, or with `yielding` by all. */
  nextTag(yielding: boolean): string {
    this.sequence++;
    return `${yielding ? "y:" : ""}${this.ownPrefix}${this.sequence}`;
  }

  watch(key: string): void {
    if (this.closed) return;
    this.subscriptions ??= this.nodes.map((node) => {
      const subscription = node.transport.subscribe?.((channel, message) =>
        this.hear(channel, message),
      );
      return subscription && new ChannelSync(subscription);
    });
    this.lastTag.set(key, "");
    for (const sync of this.subscriptions) sync?.want(releaseChannelPrefix + key, true);
  }

  unwatch(key: string): void {
    this.lastTag.delete(key);
    if (this.closed || !this.subscriptions) return;
    for (const sync of this.subscriptions) sync?.want(releaseChannelPrefix + key, false);
  }

  async close(): Promise<void> {
    this.closed = true;
    const subscriptions = this.subscriptions ?? [];
    this.subscriptions = undefined;
    await Promise.allSettled(subscriptions.map((sync) => sync?.close()));
  }

  private hear(channel: string, tag: string): void {
    if (!channel.startsWith(releaseChannelPrefix) || tag.startsWith(this.ownPrefix)) return;
    const key = channel.slice(releaseChannelPrefix.length);
    const last = this.lastTag.get(key);
    if (last === undefined || last === tag) return;
    this.lastTag.set(key, tag);
    this.onReleased(key);
  }
}

/**
 * One node's pub/sub connection, kept subscribed to the channels wanted
 * now. Waiters come and go far faster than a node answers SUBSCRIBE, and on
 * a stalled or unreachable node every change would wait in the
 * connection's queue without bound: so one batch of changes is in flight at
 * a time, and what changes meanwhile is folded into the next batch (a key
 * watched and unwatched in between costs nothing). A failed change is
 * retried with the next one; messages are only hints.
 */
export class ChannelSync {
  private readonly subscription: Subscription;
  private readonly wanted = new Set<string>();
  /** What the node was last asked for (in flight or done). */
  private readonly asked = new Set<string>();
  private syncing = false;

  constructor(subscription: Subscription) {
    this.subscription = subscription;
  }

  want(channel: string, on: boolean): void {
    if (on) this.wanted.add(channel);
    else this.wanted.delete(channel);
    this.sync();
  }

  close(): Promise<void> {
    this.wanted.clear();
    return this.subscription.close();
  }

  private sync(): void {
    if (this.syncing) return;
    const add = [...this.wanted].filter((channel) => !this.asked.has(channel));
    const remove = [...this.asked].filter((channel) => !this.wanted.has(channel));
    if (add.length === 0 && remove.length === 0) return;
    this.syncing = true;
    for (const channel of add) this.asked.add(channel);
    for (const channel of remove) this.asked.delete(channel);
    const changes = [
      ...add.map((channel) =>
        this.subscription.add(channel).then(
          () => true,
          () => {
            this.asked.delete(channel); // not subscribed: asked again with the next change
            return false;
          },
        ),
      ),
      ...remove.map((channel) =>
        this.subscription.remove(channel).then(
          () => true,
          () => {
            this.asked.add(channel); // maybe still subscribed: unsubscribed with the next change
            return false;
          },
        ),
      ),
    ];
    void Promise.all(changes).then((done) => {
      this.syncing = false;
      // After a failure, wait for the next change rather than retry at once.
      if (done.every(Boolean)) this.sync();
    });
  }
}

/**
 * After an instance released a lock that waiters in other instances heard
 * of, its own next acquire of that key within `courtesyMs` waits out the
 * rest of that window first. They wake up to `noticeJitterMs` late (see
 * `Redlock`), while a loop that releases and acquires again would be back
 * at once and take the lock every time.
 */
export class Courtesy {
  private readonly clock: Clock;
  private readonly courtesyMs: number;
  private readonly until = new Map<string, number>();

  constructor(clock: Clock, courtesyMs: number) {
    this.clock = clock;
    this.courtesyMs = courtesyMs;
  }

  grant(key: string): void {
    // A bound on the memory: entries only matter for a few milliseconds.
    if (this.until.size >= releaseNoticeLimits.courtesyEntriesMax) this.until.clear();
    this.until.set(key, this.clock.now() + this.courtesyMs);
  }

  remainingMs(key: string): number {
    const until = this.until.get(key);
    if (until === undefined) return 0;
    const left = until - this.clock.now();
    if (left <= 0) this.until.delete(key);
    return Math.max(0, left);
  }
}
