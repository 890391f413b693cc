/**
 * Hearing that a waiter of this instance is a lock's heir: a release on
 * another instance (or ours) reserved the key for it on a node and
 * published its id on this instance's own channel (heir-queue.ts). One
 * pub/sub connection per node, opened on the first wait, subscribes to
 * that one channel; like Redisson's lock channel, a message is only a
 * hint to try now, and the waiters' fallback timers cover lost ones.
 */

import type { RedisNode } from "../node/redis-node.js";
import type { Subscription } from "../node/transport.js";
import { heirChannelPrefix } from "./heir-queue.js";

export class HeirWatch {
  private readonly nodes: readonly RedisNode[];
  /** Whether any node's transport offers pub/sub. */
  readonly available: boolean;
  /** This instance's id, the first part of its waiters' ids. */
  readonly instanceId: string;
  private readonly channel: string;
  private readonly onHeir: (message: string) => void;
  private subscriptions: Array<ChannelSubscription | undefined> | undefined;
  private closed = false;

  constructor(nodes: readonly RedisNode[], instanceId: string, onHeir: (message: string) => void) {
    this.nodes = nodes;
    this.available = nodes.some((node) => node.transport.subscribe !== undefined);
    this.instanceId = instanceId;
    this.channel = heirChannelPrefix + instanceId;
    this.onHeir = onHeir;
  }

  /** Subscribes on every node, once (a failed subscription is tried again on the next call). */
  listen(): void {
    if (this.closed) return;
    this.subscriptions ??= this.nodes.map((node) => {
      const subscription = node.transport.subscribe?.((channel, message) => {
        if (channel === this.channel) this.onHeir(message);
      });
      return subscription && new ChannelSubscription(subscription, this.channel);
    });
    for (const subscription of this.subscriptions) subscription?.ensure();
  }

  async close(): Promise<void> {
    this.closed = true;
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

  ensure(): void {
    if (this.asked) return;
    this.asked = true;
    this.subscription.add(this.channel).catch(() => {
      this.asked = false;
    });
  }

  close(): Promise<void> {
    return this.subscription.close();
  }
}
