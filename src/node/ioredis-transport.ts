import { Redis, type RedisOptions } from "ioredis";
import type { NodeTransport, Subscription } from "./transport.js";

/** The part of an ioredis client we use; matched structurally so any ioredis 5.x copy works. */
export interface IoredisLike {
  status: string;
  options: { host?: string; port?: number; path?: string };
  call(command: string, ...args: string[]): Promise<unknown>;
  connect(): Promise<void>;
  disconnect(): void;
  once(event: string, listener: (...args: unknown[]) => void): unknown;
  removeListener(event: string, listener: (...args: unknown[]) => void): unknown;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  duplicate?(options?: RedisOptions): unknown;
  /** The connection's socket (ioredis exposes it); corked to batch a tick's commands. */
  stream?: { cork(): void; uncork(): void };
}

export function isIoredisLike(value: unknown): value is IoredisLike {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as IoredisLike).status === "string" &&
    typeof (value as IoredisLike).call === "function" &&
    typeof (value as IoredisLike).connect === "function"
  );
}

/**
 * Options for the connections redquorum opens itself. Two matter for safety:
 * no offline queue and no automatic resend, so a command that timed out is
 * never replayed later on a new connection (a late `SET NX` would recreate a
 * lock key after we gave up on it); pending commands fail when the connection
 * drops instead of waiting for a reconnect.
 */
const ownClientOptions: RedisOptions = {
  lazyConnect: true,
  enableOfflineQueue: false,
  autoResendUnfulfilledCommands: false,
  maxRetriesPerRequest: 0,
  connectTimeout: 2_000,
  retryStrategy: (attempt: number) => Math.min(attempt * 50, 1_000),
};

/**
 * The pub/sub connection: unlike the command connection it may queue while
 * connecting and resubscribes after a reconnect (SUBSCRIBE is idempotent,
 * and a message lost meanwhile only costs a waiter its fallback poll).
 */
const subscriberOptions: RedisOptions = {
  ...ownClientOptions,
  lazyConnect: false,
  enableOfflineQueue: true,
  autoResubscribe: true,
  maxRetriesPerRequest: null,
};

export class IoredisTransport implements NodeTransport {
  readonly endpoint: string;
  private readonly client: IoredisLike;
  private readonly openSubscriber: (() => Redis) | undefined;
  private readonly owned: boolean;
  private lastError: unknown;
  /** The socket is corked until the end of this tick. */
  private corked = false;

  private constructor(
    client: IoredisLike,
    owned: boolean,
    endpoint: string,
    openSubscriber: (() => Redis) | undefined,
  ) {
    this.client = client;
    this.openSubscriber = openSubscriber;
    this.owned = owned;
    this.endpoint = endpoint;
    if (owned) {
      // Without a listener ioredis prints every connection error; we keep the
      // last one to explain why a node is unusable.
      client.on("error", (error) => {
        this.lastError = error;
      });
    }
  }

  static fromUrl(url: string, endpoint: string): IoredisTransport {
    return new IoredisTransport(new Redis(url, ownClientOptions), true, endpoint, () => {
      return new Redis(url, subscriberOptions);
    });
  }

  static fromClient(client: IoredisLike): IoredisTransport {
    const { host = "127.0.0.1", port = 6379, path } = client.options ?? {};
    const duplicate = client.duplicate?.bind(client);
    return new IoredisTransport(
      client,
      false,
      path ?? `${host}:${port}`,
      duplicate && (() => duplicate(subscriberOptions) as Redis),
    );
  }

  send(args: readonly string[], timeoutMs: number): Promise<unknown> {
    const [command, ...rest] = args as [string, ...string[]];
    const status = this.client.status;
    if (status === "ready" && this.owned) return this.sendCorked(command, rest);
    if (status === "ready" || !this.owned) return this.client.call(command, ...rest);
    if (status === "reconnecting" || status === "end" || status === "close") {
      // Fail at once: waiting for a reconnect would only spend the caller's time.
      const cause = this.lastError instanceof Error ? `: ${this.lastError.message}` : "";
      return Promise.reject(new Error(`connection ${status}${cause}`));
    }
    return this.whenReady(timeoutMs).then(() => this.client.call(command, ...rest));
  }

  /**
   * Commands sent in the same tick go out together: the socket is corked
   * for the rest of the tick, so they leave in one write instead of one
   * system call per command, which is what many concurrent locks or IDs on
   * one connection cost most (and, unlike an ioredis pipeline, it allocates
   * nothing per batch). Order on the connection is kept.
   */
  private sendCorked(command: string, rest: readonly string[]): Promise<unknown> {
    const stream = this.client.stream;
    if (!this.corked && stream && typeof stream.cork === "function") {
      this.corked = true;
      stream.cork();
      process.nextTick(() => {
        this.corked = false;
        stream.uncork();
      });
    }
    return this.client.call(command, ...rest);
  }

  private whenReady(timeoutMs: number): Promise<void> {
    if (this.client.status === "wait") this.client.connect().catch(() => {});
    return new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        this.client.removeListener("ready", onReady);
        this.client.removeListener("end", onEnd);
      };
      const onReady = () => {
        done();
        resolve();
      };
      const onEnd = () => {
        done();
        reject(new Error("connection ended"));
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`not connected within ${timeoutMs} ms`));
      }, timeoutMs);
      this.client.once("ready", onReady);
      this.client.once("end", onEnd);
    });
  }

  async close(): Promise<void> {
    if (this.owned) this.client.disconnect();
  }

  get subscribe() {
    const open = this.openSubscriber;
    if (!open) return undefined;
    return (onMessage: (channel: string, message: string) => void): Subscription => {
      const subscriber = open();
      subscriber.on("error", () => {}); // the command connection reports node trouble
      subscriber.on("message", onMessage);
      let closed = false; // no command after close(): it could open the connection again
      return {
        add: async (channel) => {
          if (!closed) await subscriber.subscribe(channel);
        },
        remove: async (channel) => {
          if (!closed) await subscriber.unsubscribe(channel);
        },
        close: async () => {
          closed = true;
          subscriber.disconnect();
        },
      };
    };
  }
}
