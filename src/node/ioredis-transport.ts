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
  lazyConnect: false,
  enableOfflineQueue: true,
  autoResubscribe: true,
  maxRetriesPerRequest: null,
  connectTimeout: 2_000,
  retryStrategy: (attempt: number) => Math.min(attempt * 50, 1_000),
};

export class IoredisTransport implements NodeTransport {
  readonly endpoint: string;
  private readonly client: IoredisLike;
  private readonly openSubscriber: (() => Redis) | undefined;
  private readonly owned: boolean;
  private lastError: unknown;
  private batch:
    | Array<{
        args: readonly string[];
        resolve: (reply: unknown) => void;
        reject: (error: unknown) => void;
      }>
    | undefined;

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
    if (status === "ready" && this.owned) return this.enqueue(args);
    if (status === "ready" || !this.owned) return this.client.call(command, ...rest);
    if (status === "reconnecting" || status === "end" || status === "close") {
      // Fail at once: waiting for a reconnect would only spend the caller's time.
      const cause = this.lastError instanceof Error ? `: ${this.lastError.message}` : "";
      return Promise.reject(new Error(`connection ${status}${cause}`));
    }
    return this.whenReady(timeoutMs).then(() => this.client.call(command, ...rest));
  }

  /**
   * Commands sent in the same tick go out together: one write to the socket
   * (a pipeline) instead of one per command, which is what many concurrent
   * locks or IDs on one connection cost most. A lone command is sent as is,
   * one tick later at most. Order on the connection is kept either way.
   */
  private enqueue(args: readonly string[]): Promise<unknown> {
    return new Promise((resolve, reject) => {
      if (this.batch === undefined) {
        this.batch = [];
        process.nextTick(() => this.flush());
      }
      this.batch.push({ args, resolve, reject });
    });
  }

  private flush(): void {
    const batch = this.batch ?? [];
    this.batch = undefined;
    if (batch.length === 1) {
      const { args, resolve, reject } = batch[0]!;
      const [command, ...rest] = args as [string, ...string[]];
      this.client.call(command, ...rest).then(resolve, reject);
      return;
    }
    const pipeline = (this.client as unknown as Redis).pipeline();
    for (const { args } of batch) {
      const [command, ...rest] = args as [string, ...string[]];
      pipeline.call(command, ...rest);
    }
    pipeline.exec().then(
      (results) => {
        batch.forEach(({ resolve, reject }, i) => {
          const [error, reply] = results?.[i] ?? [new Error("no reply in pipeline"), undefined];
          if (error) reject(error);
          else resolve(reply);
        });
      },
      (error: unknown) => {
        for (const { reject } of batch) reject(error);
      },
    );
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
      return {
        add: async (channel) => {
          await subscriber.subscribe(channel);
        },
        remove: async (channel) => {
          await subscriber.unsubscribe(channel);
        },
        close: async () => {
          subscriber.disconnect();
        },
      };
    };
  }
}
