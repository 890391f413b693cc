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
  private subscriptions: Array<ChannelSync | undefined> | undefined;
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
      return subscription && new ChannelSync(subscription);
    });
    for (const sync of this.subscriptions) sync?.want(this.channel, true);
  }

  async close(): Promise<void> {
    this.closed = true;
    const subscriptions = this.subscriptions ?? [];
    this.subscriptions = undefined;
    await Promise.allSettled(subscriptions.map((sync) => sync?.close()));
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
