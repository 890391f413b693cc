import type { NodeTransport, Subscription } from "./transport.js";

/** How long closing a pub/sub duplicate waits for its connect in progress, ms. */
const connectSettleMs = 1_000;

/**
 * The part of a node-redis client we use (`redis` package 4.0.1 up to 5.x,
 * checked by scripts/check-package.mjs), matched structurally. A 6.x client
 * speaks RESP3 by default, whose CONFIG GET replies redquorum does not read
 * yet: create it with `RESP: 2`.
 */
export interface NodeRedisLike {
  sendCommand(args: string[]): Promise<unknown>;
  isOpen: boolean;
  options?: { url?: string; socket?: { host?: string; port?: number; path?: string } };
  duplicate?(): NodeRedisSubscriberLike;
  /** node-redis clients are event emitters; used only to count reconnects (see `epoch`). */
  on?(event: string, listener: () => void): unknown;
  removeListener?(event: string, listener: () => void): unknown;
}

/** The part of a duplicated node-redis client used for pub/sub. */
interface NodeRedisSubscriberLike {
  connect(): Promise<unknown>;
  on(event: "error", listener: (error: unknown) => void): unknown;
  on(event: "ready", listener: () => void): unknown;
  subscribe(
    channel: string,
    listener: (message: string, channel: string) => void,
  ): Promise<unknown>;
  unsubscribe(
    channel: string,
    listener: (message: string, channel: string) => void,
  ): Promise<unknown>;
  destroy?(): unknown;
  disconnect?(): Promise<unknown>;
}

export function isNodeRedisLike(value: unknown): value is NodeRedisLike {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as NodeRedisLike).sendCommand === "function" &&
    typeof (value as NodeRedisLike).isOpen === "boolean"
  );
}

/**
 * Adapter for a caller's own node-redis client. The caller owns its lifetime
 * (connect, reconnect policy, quit); redquorum never closes it.
 */
export class NodeRedisTransport implements NodeTransport {
  readonly endpoint: string;
  private readonly client: NodeRedisLike;
  private closes = 0;
  private readonly onClose = () => {
    this.closes++;
  };

  constructor(client: NodeRedisLike) {
    this.client = client;
    this.endpoint = endpointOf(client);
    // node-redis emits "reconnecting" as it drops a connection to open
    // another (and at every further attempt), "end" when it is closed.
    if (typeof client.on === "function") {
      client.on("reconnecting", this.onClose);
      client.on("end", this.onClose);
    }
  }

  /** Grows whenever the client lost its connection; stays 0 for a client that cannot tell. */
  get epoch(): number {
    return this.closes;
  }

  send(args: readonly string[]): Promise<unknown> {
    if (!this.client.isOpen)
      return Promise.reject(new Error("client is not open (call connect())"));
    return this.client.sendCommand([...args]);
  }

  /** The caller's client lives on: only our listeners are removed. */
  async close(): Promise<void> {
    if (typeof this.client.removeListener === "function") {
      this.client.removeListener("reconnecting", this.onClose);
      this.client.removeListener("end", this.onClose);
    }
  }

  /** A duplicate of the caller's client (same options), owned and closed by redquorum. */
  get subscribe() {
    if (typeof this.client.duplicate !== "function") return undefined;
    return (
      onMessage: (channel: string, message: string) => void,
      onResubscribed?: () => void,
    ): Subscription => {
      const subscriber = this.client.duplicate!();
      subscriber.on("error", () => {}); // the command connection reports node trouble
      let channelCount = 0;
      let connectedBefore = false;
      // node-redis is ready again once it subscribed the channels again.
      subscriber.on("ready", () => {
        if (!connectedBefore) {
          connectedBefore = true;
          return;
        }
        if (!closed && channelCount > 0) onResubscribed?.();
      });
      const connected = subscriber.connect();
      let settled = false;
      const markSettled = () => {
        settled = true;
      };
      connected.then(markSettled, markSettled);
      const listener = (message: string, channel: string) => onMessage(channel, message);
      let closed = false;
      return {
        add: async (channel) => {
          channelCount++;
          await connected;
          if (!closed) await subscriber.subscribe(channel, listener);
        },
        remove: async (channel) => {
          channelCount = Math.max(0, channelCount - 1);
          await connected;
          // With the listener: node-redis then marks the channel as leaving,
          // so a subscribe before the UNSUBSCRIBE reply sends SUBSCRIBE again.
          // Never after close(): a command would bring the client back.
          if (!closed) await subscriber.unsubscribe(channel, listener);
        },
        close: async () => {
          closed = true;
          // node-redis leaves the socket open if destroy() comes while it is
          // connecting: let a connect in progress finish first, but not for
          // long (to a node that is down, connect() never settles).
          if (!settled) {
            let timer: ReturnType<typeof setTimeout> | undefined;
            await Promise.race([
              connected.catch(() => {}),
              new Promise((resolve) => {
                timer = setTimeout(resolve, connectSettleMs);
              }),
            ]);
            clearTimeout(timer);
          }
          try {
            if (subscriber.destroy) subscriber.destroy();
            else await subscriber.disconnect?.();
          } catch {
            // already closed
          }
        },
      };
    };
  }
}

function endpointOf(client: NodeRedisLike): string {
  const socket = client.options?.socket;
  if (socket?.path) return socket.path;
  if (socket?.host || socket?.port) return `${socket.host ?? "localhost"}:${socket.port ?? 6379}`;
  if (client.options?.url) {
    try {
      const url = new URL(client.options.url);
      return `${url.hostname}:${url.port || 6379}`;
    } catch {
      // fall through: an unparsable URL is the client's business, not ours
    }
  }
  return "node-redis client";
}
