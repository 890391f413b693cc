import { createConnection, createServer, type Server, type Socket } from "node:net";

/**
 * A TCP proxy on a free loopback port in front of one Redis node that holds
 * back every reply by `delayMs`: a node that answers correctly but later
 * than the others (a slower machine, a longer network path). Commands go
 * through at once, replies keep their order. When the node goes away (killed,
 * restarted) the client's connection is ended after the replies already
 * received are delivered, so the client reconnects as it would to the node
 * itself; a new connection reaches whatever listens on the port then.
 */
export class DelayProxy {
  readonly delayMs: number;
  private readonly server: Server;
  private readonly targetPort: number;
  private readonly sockets = new Set<Socket>();

  private constructor(server: Server, targetPort: number, delayMs: number) {
    this.server = server;
    this.targetPort = targetPort;
    this.delayMs = delayMs;
    server.on("connection", (client) => this.relay(client));
  }

  static async start(targetPort: number, delayMs: number): Promise<DelayProxy> {
    const server = createServer();
    const proxy = new DelayProxy(server, targetPort, delayMs);
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    return proxy;
  }

  get port(): number {
    const address = this.server.address();
    return typeof address === "object" && address ? address.port : 0;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Stops listening and drops every connection. */
  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private relay(client: Socket): void {
    const upstream = createConnection({ host: "127.0.0.1", port: this.targetPort });
    this.sockets.add(client);
    this.sockets.add(upstream);
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    // Replies wait in order; one timer delivers those whose time has come.
    const pending: Array<{ atMs: number; chunk: Buffer }> = [];
    let timer: ReturnType<typeof setTimeout> | undefined;
    let upstreamGone = false;
    const finish = () => {
      client.destroy();
      upstream.destroy();
      this.sockets.delete(client);
      this.sockets.delete(upstream);
      clearTimeout(timer);
    };
    const deliver = () => {
      timer = undefined;
      const nowMs = performance.now();
      while (pending.length > 0 && pending[0]!.atMs <= nowMs) {
        if (!client.destroyed) client.write(pending.shift()!.chunk);
        else pending.shift();
      }
      if (pending.length > 0) {
        timer = setTimeout(deliver, Math.max(0, pending[0]!.atMs - nowMs));
      } else if (upstreamGone) {
        finish();
      }
    };
    upstream.on("data", (chunk: Buffer) => {
      pending.push({ atMs: performance.now() + this.delayMs, chunk });
      timer ??= setTimeout(deliver, this.delayMs);
    });
    const onUpstreamGone = () => {
      if (upstreamGone) return;
      upstreamGone = true;
      if (pending.length === 0) finish();
    };
    upstream.on("close", onUpstreamGone);
    upstream.on("error", onUpstreamGone);
    client.on("data", (chunk: Buffer) => {
      if (!upstream.destroyed) upstream.write(chunk);
    });
    client.on("close", finish);
    client.on("error", finish);
  }
}
