import type { NodeTransport } from "./transport.js";

/** The part of a node-redis (`redis` package, v4 or later) client we use. */
export interface NodeRedisLike {
  sendCommand(args: string[]): Promise<unknown>;
  isOpen: boolean;
  options?: { url?: string; socket?: { host?: string; port?: number; path?: string } };
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

  constructor(client: NodeRedisLike) {
    this.client = client;
    this.endpoint = endpointOf(client);
  }

  send(args: readonly string[]): Promise<unknown> {
    if (!this.client.isOpen)
      return Promise.reject(new Error("client is not open (call connect())"));
    return this.client.sendCommand([...args]);
  }

  async close(): Promise<void> {}
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
