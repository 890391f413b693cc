/**
 * One direction of one proxied connection: bytes go out in the order they
 * came in, never earlier than their latency allows, cut into slices and
 * paced as the current conditions say. A single loop per direction does
 * the delivering, so order holds whatever the timers do.
 */
import type { Socket } from "node:net";

/** How one direction of a link behaves now; read at each step, so changes apply at once. */
export interface StreamConditions {
  latency?: { readonly ms: number; readonly jitterMs: number };
  slicer?: {
    readonly sizeBytes: number;
    readonly sizeVariationBytes: number;
    readonly delayMs: number;
  };
  bandwidth?: { readonly bytesPerSecond: number };
  /** Close the connection once this many bytes went this way (since it opened). */
  limitBytes?: number;
}

/** What an item's action decides when the item reaches the head of the queue. */
export type Verdict = "deliver" | "drop" | "reset";

interface Item {
  bytes: Buffer;
  readyAtMs: number;
  action: (() => Promise<Verdict>) | undefined;
}

export interface PipeHooks {
  conditions(): StreamConditions;
  /** True while the link is partitioned: nothing moves. */
  blocked(): boolean;
  random(): number;
  /** An action said "reset", or `limitBytes` was reached. */
  reset(reason: "action" | "limit"): void;
  /** A bug in the pipe itself: reported, the connection reset. */
  failed(error: unknown): void;
}

export class Pipe {
  /** Bytes written so far (for `limitBytes`). */
  sentBytes = 0;
  private readonly queue: Item[] = [];
  private lastReadyAtMs = 0;
  private nextSendAtMs = 0;
  private running = false;
  private stopped = false;
  private muted = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private wakeUp: (() => void) | undefined;
  private idleWaiters: Array<() => void> = [];

  constructor(
    private readonly to: Socket,
    private readonly hooks: PipeHooks,
  ) {}

  /**
   * Queues bytes; `holdMs` delays them beyond the latency, `action` runs
   * (awaited) when they reach the head, and decides their fate.
   */
  push(bytes: Buffer, options: { holdMs?: number; action?: () => Promise<Verdict> } = {}): void {
    if (this.stopped || this.muted) return;
    const latency = this.hooks.conditions().latency;
    const jitterMs = latency ? (this.hooks.random() * 2 - 1) * latency.jitterMs : 0;
    const delayMs = Math.max(0, (latency?.ms ?? 0) + jitterMs) + (options.holdMs ?? 0);
    // Never before the bytes ahead: a latency may lower, order may not change.
    const readyAtMs = Math.max(this.lastReadyAtMs, performance.now() + delayMs);
    this.lastReadyAtMs = readyAtMs;
    this.queue.push({ bytes, readyAtMs, action: options.action });
    this.run().catch((error: unknown) => this.hooks.failed(error));
  }

  /** From now on nothing more goes this way (a reply was swallowed). */
  mute(): void {
    this.muted = true;
    this.queue.length = 0;
  }

  /** The partition was healed or the conditions changed: look again. */
  wake(): void {
    this.wakeUp?.();
  }

  /** Resolves once everything queued went out (or was dropped, or the pipe stopped). */
  idle(): Promise<void> {
    if (this.queue.length === 0 || this.stopped) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  stop(): void {
    this.stopped = true;
    this.queue.length = 0;
    this.wake();
    this.settleIdle();
  }

  private async run(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      while (!this.stopped && this.queue.length > 0) {
        if (this.hooks.blocked()) {
          await this.sleep(undefined);
          continue;
        }
        const item = this.queue[0]!;
        const nowMs = performance.now();
        if (item.readyAtMs > nowMs) {
          await this.sleep(item.readyAtMs - nowMs);
          continue;
        }
        if (item.action) {
          const action = item.action;
          item.action = undefined;
          const verdict = await action();
          if (this.stopped) break;
          if (verdict !== "deliver") {
            this.queue.shift();
            if (verdict === "reset") this.hooks.reset("action");
            continue;
          }
        }
        if (this.nextSendAtMs > performance.now()) {
          await this.sleep(this.nextSendAtMs - performance.now());
          continue;
        }
        this.send(item);
      }
    } finally {
      this.running = false;
      if (this.queue.length === 0) this.settleIdle();
    }
  }

  /** Writes the head item, or as much of it as slicer and bandwidth allow now. */
  private send(item: Item): void {
    const { slicer, bandwidth, limitBytes } = this.hooks.conditions();
    let size = item.bytes.length;
    if (slicer) {
      const variation = Math.round((this.hooks.random() * 2 - 1) * slicer.sizeVariationBytes);
      size = Math.min(size, Math.max(1, slicer.sizeBytes + variation));
    }
    // Bandwidth in 10 ms worth of bytes at a time, so the rate is smooth.
    if (bandwidth) size = Math.min(size, Math.max(1, Math.floor(bandwidth.bytesPerSecond / 100)));
    if (limitBytes !== undefined && this.sentBytes + size >= limitBytes) {
      const rest = Math.max(0, limitBytes - this.sentBytes);
      if (rest > 0) this.to.write(item.bytes.subarray(0, rest));
      this.sentBytes += rest;
      this.queue.length = 0;
      this.hooks.reset("limit");
      return;
    }
    this.to.write(item.bytes.subarray(0, size));
    this.sentBytes += size;
    item.bytes = item.bytes.subarray(size);
    if (item.bytes.length === 0) this.queue.shift();
    const nowMs = performance.now();
    let nextMs = nowMs;
    if (slicer && item.bytes.length > 0) nextMs = nowMs + slicer.delayMs;
    if (bandwidth) {
      nextMs = Math.max(
        nextMs,
        Math.max(this.nextSendAtMs, nowMs) + (size * 1000) / bandwidth.bytesPerSecond,
      );
    }
    this.nextSendAtMs = nextMs;
  }

  /** Waits `ms` (or until woken, when undefined); `wake()` and `stop()` end it early. */
  private sleep(ms: number | undefined): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(this.timer);
        this.timer = undefined;
        this.wakeUp = undefined;
        resolve();
      };
      this.wakeUp = done;
      if (ms !== undefined) this.timer = setTimeout(done, ms);
    });
  }

  private settleIdle(): void {
    for (const resolve of this.idleWaiters.splice(0)) resolve();
  }
}
