/**
 * Hearing that a waiter of this instance is a lock's heir: a release on
 * another instance (or ours) reserved the key for it on a node and
 * published its id on this instance's own channel (heir-queue.ts). One
 * pub/sub connection per node, opened on the first wait, subscribes to
 * that one channel; like Redisson's lock channel, a message is only a
 * hint to try now, and the waiters' fallback timers cover lost ones.
 *
 * A release reaches the nodes at different moments, and each node sends
 * its notice when it has run it. An heir that tried on the first notice
 * would often reach a node before the release did (on a busy machine, or
 * with one node farther away), be refused there, and lose its round: an
 * undo, a requeue, and the reservation spent. So the heir is woken once a
 * majority of nodes have named it, or `windowMs` after the first notice
 * if fewer do (a node down, a notice lost, the nodes' queues disagreeing
 * on the head): at 8 contending processes on this project's machine,
 * 14.8 → 12.3 script calls per grant (CHANGELOG, docs/benchmarks.md).
 *
 * The channel is subscribed at the first wait, after the refusal that
 * queued the waiter: a release in between publishes to nobody. Such a
 * waiter waits until a majority of nodes confirmed the subscription
 * (`whenListening`) and tries once more (acquire.ts): its reservation is
 * taken, or its refusal renews its place (heir-queue.ts). Left to its
 * fallback poll instead, a waiter with a long retry delay was dropped
 * from the queue as one that never came and starved while others took
 * turns. Likewise a node's pub/sub connection that drops and comes back
 * lost what was published meanwhile: every waiter whose turn it is then
 * tries once (`onNoticesLost`), instead of waiting for its poll.
 */

import type { Timer } from "../clock.js";
import type { RedisNode } from "../node/redis-node.js";
import type { Subscription } from "../node/transport.js";
import { heirChannelPrefix } from "./heir-notice.js";
import { parseHeirNotice } from "./queue-place.js";

/** Waiters with notices being counted at once at most; beyond, a notice wakes its waiter at once. */
const countedMax = 10_000;

export interface HeirWatchOptions {
  readonly nodes: readonly RedisNode[];
  readonly instanceId: string;
  /** Nodes that must name the heir before it is woken without waiting (a majority). */
  readonly quorum: number;
  /** How long after the first notice the heir is woken however many nodes named it. */
  readonly windowMs: number;
  /** The instance's clock (ms) and timer: a window also ends at a notice that comes after it. */
  readonly now: () => number;
  readonly timer: Timer;
  /** The heir `waiterId` is to try now; `fence`: the highest fencing counter its notices carried. */
  readonly onHeir: (waiterId: string, fence: bigint | undefined) => void;
  /**
   * A node's pub/sub connection came back after a drop: the notices it
   * sent meanwhile were lost, and any waiter may have been an heir.
   */
  readonly onNoticesLost?: () => void;
}

/** The notices heard for one waiter within a window. */
interface Counted {
  openedAtMs: number;
  count: number;
  /** The nodes counted (each once). */
  nodes: Set<number>;
  fence: bigint | undefined;
  woken: boolean;
  cancel: () => void;
}

export class HeirWatch {
  private readonly options: HeirWatchOptions;
  /** Whether any node's transport offers pub/sub. */
  readonly available: boolean;
  /** This instance's id, the first part of its waiters' ids. */
  readonly instanceId: string;
  private readonly channel: string;
  private readonly counted = new Map<string, Counted>();
  private subscriptions: Array<ChannelSubscription | undefined> | undefined;
  /** Nodes whose SUBSCRIBE was confirmed. */
  private readonly confirmed = new Set<number>();
  /** Callers waiting for a majority's confirmation (see `whenListening`). */
  private listeners: Array<() => void> = [];
  private closed = false;

  constructor(options: HeirWatchOptions) {
    this.options = options;
    this.available = options.nodes.some((node) => node.transport.subscribe !== undefined);
    this.instanceId = options.instanceId;
    this.channel = heirChannelPrefix + options.instanceId;
  }

  /** Subscribes on every node, once (a failed subscription is tried again on the next call). */
  listen(): void {
    if (this.closed) return;
    this.subscriptions ??= this.options.nodes.map((node, index) => {
      const subscription = node.transport.subscribe?.(
        (channel, message) => {
          if (channel === this.channel) this.heard(message, index);
        },
        () => {
          if (!this.closed) this.options.onNoticesLost?.();
        },
      );
      return subscription && new ChannelSubscription(subscription, this.channel);
    });
    for (const [index, subscription] of this.subscriptions.entries()) {
      subscription?.ensure(() => this.confirm(index));
    }
  }

  /**
   * Whether a majority of nodes confirmed the subscription: a notice
   * published from then on reaches this instance (or pub/sub is not
   * offered, and nothing ever will: waiters poll).
   */
  get listening(): boolean {
    return !this.available || this.confirmed.size >= this.options.quorum;
  }

  /** Resolves once `listening` (or at close); call `listen()` first. */
  whenListening(): Promise<void> {
    if (this.listening || this.closed) return Promise.resolve();
    return new Promise((resolve) => this.listeners.push(resolve));
  }

  private confirm(node: number): void {
    this.confirmed.add(node);
    if (!this.listening) return;
    const listeners = this.listeners;
    this.listeners = [];
    for (const resolve of listeners) resolve();
  }

  /**
   * One node's notice: counted in its waiter's window (opened by the first
   * one); the waiter is woken at the quorum's notice or at the window's
   * end. Within the window, every notice after the wake wakes it again
   * (taken only if the wake's round failed: see below). \`node\`: which
   * node sent it. Before the wake only distinct nodes count: one node's
   * notices are its own release and later ones, and counting a node twice
   * woke the waiter before a majority had released (its round was refused,
   * and the rest of the release's notices were absorbed).
   */
  heard(message: string, node?: number): void {
    if (this.closed) return;
    const { waiterId, fence } = parseHeirNotice(message);
    const { quorum, windowMs, now, timer, onHeir } = this.options;
    let counted = this.counted.get(waiterId);
    // A window whose timer has not run (an injected clock's timers run
    // when the clock says so) still ends by the clock: the notice belongs
    // to a later release.
    if (counted && now() - counted.openedAtMs >= windowMs) {
      this.end(waiterId, counted);
      counted = undefined;
    }
    if (!counted) {
      if (quorum <= 1 || this.counted.size >= countedMax) {
        onHeir(waiterId, fence);
        return;
      }
      const opened: Counted = {
        openedAtMs: now(),
        count: 0,
        nodes: new Set(),
        fence: undefined,
        woken: false,
        cancel: () => {},
      };
      opened.cancel = timer(windowMs, () => this.end(waiterId, opened));
      this.counted.set(waiterId, opened);
      counted = opened;
    }
    // A node counts once; a notice without its node (tests) always counts.
    const counts = node === undefined || !counted.nodes.has(node);
    if (node !== undefined) counted.nodes.add(node);
    if (counts) counted.count++;
    if (fence !== undefined && (counted.fence === undefined || fence > counted.fence)) {
      counted.fence = fence;
    }
    if (!counted.woken && counted.count >= quorum) {
      counted.woken = true;
      onHeir(waiterId, counted.fence);
    } else if (counted.woken) {
      // A node named it after the wake. The round the wake started may
      // have been refused by the nodes that had not released yet (a late
      // notice of an earlier event can make up the majority); and a node
      // counted already names it again only for a later event (a node
      // sends one notice per heir and release: heir-queue.ts), such as
      // the release of the lock that refused that round, within a few
      // milliseconds. The heir tries again once its round ends (a wake
      // while it is not parked waits for its next park). Absorbed
      // instead, this notice left it waiting for a poll.
      onHeir(waiterId, counted.fence);
    }
  }

  /** The window's end: the heir is woken if its notices did not wake it. */
  private end(waiterId: string, counted: Counted): void {
    if (this.counted.get(waiterId) !== counted) return; // ended already
    counted.cancel();
    this.counted.delete(waiterId);
    if (!counted.woken && !this.closed) this.options.onHeir(waiterId, counted.fence);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const counted of this.counted.values()) counted.cancel();
    this.counted.clear();
    for (const resolve of this.listeners.splice(0)) resolve();
    const subscriptions = this.subscriptions ?? [];
    this.subscriptions = undefined;
    await Promise.allSettled(subscriptions.map((subscription) => subscription?.close()));
  }
}

/**
 * One node's pub/sub connection, subscribed to this instance's one channel.
 * Waiters come and go far faster than a node answers SUBSCRIBE, and on a
 * stalled or unreachable node every request would wait in the connection's
 * queue without bound: so at most one SUBSCRIBE is in flight, and a failed
 * one is sent again only at the next `ensure()` (the next first waiter of
 * a key). Messages are only hints: a waiter's fallback poll covers the time
 * without a subscription.
 */
class ChannelSubscription {
  private readonly subscription: Subscription;
  private readonly channel: string;
  /** SUBSCRIBE sent and not failed: in flight or done. */
  private asked = false;

  constructor(subscription: Subscription, channel: string) {
    this.subscription = subscription;
    this.channel = channel;
  }

  /** Subscribes unless asked already; `onConfirmed` when the node confirms. */
  ensure(onConfirmed: () => void): void {
    if (this.asked) return;
    this.asked = true;
    this.subscription.add(this.channel).then(onConfirmed, () => {
      this.asked = false;
    });
  }

  close(): Promise<void> {
    return this.subscription.close();
  }
}
