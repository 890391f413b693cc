import { once } from "node:events";
import { createConnection, createServer, type Server, type Socket } from "node:net";

/**
 * A loopback TCP proxy in front of one redis-server, for driving connection
 * faults a real server cannot be made to show on cue: while `hold` is on, a
 * new connection is accepted (the client sees it open) but nothing is
 * forwarded until the test resets or forwards it.
 */
export class TcpProxy {
  readonly port: number;
  /** Hold every new connection instead of forwarding it. */
  hold = false;
  private readonly server: Server;
  private targetPort: number;
  private readonly sockets = new Set<Socket>();
  private readonly held: Socket[] = [];
  private heldWaiters: Array<(socket: Socket) => void> = [];

  private constructor(server: Server, port: number, targetPort: number) {
    this.server = server;
    this.port = port;
    this.targetPort = targetPort;
    server.on("connection", (socket) => this.accept(socket));
  }

  static async start(targetPort: number): Promise<TcpProxy> {
    const server = createServer();
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const address = server.address();
    const port = typeof address === "object" && address ? address.port : 0;
    return new TcpProxy(server, port, targetPort);
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** The next held connection (already accepted, or the next one to be). */
  nextHeld(): Promise<Socket> {
    const socket = this.held.shift();
    if (socket) return Promise.resolve(socket);
    return new Promise((resolve) => this.heldWaiters.push(resolve));
  }

  /** Ends a held connection with a TCP reset, as a flapping network does. */
  reset(socket: Socket): void {
    socket.resetAndDestroy();
  }

  /** Drops every open connection, as a network fault does: the client reconnects. */
  drop(): void {
    for (const socket of this.sockets) socket.destroy();
  }

  /** Stops holding: forwards every connection still held, and new ones from now on. */
  forwardHeld(): void {
    this.hold = false;
    for (const socket of this.held.splice(0)) if (!socket.destroyed) this.forward(socket);
  }

  /** Starts forwarding a held connection (what the client wrote meanwhile included). */
  forward(socket: Socket): void {
    const upstream = createConnection({ host: "127.0.0.1", port: this.targetPort });
    this.sockets.add(upstream);
    upstream.on("close", () => this.sockets.delete(upstream));
    upstream.on("error", () => socket.destroy());
    socket.on("error", () => upstream.destroy());
    upstream.on("close", () => socket.destroy());
    socket.on("close", () => upstream.destroy());
    socket.pipe(upstream);
    upstream.pipe(socket);
  }

  /**
   * Sends new connections to another port from now on, and drops the open
   * ones: the client reconnects to whatever server is behind that port now
   * (an address that comes back as another server).
   */
  retarget(targetPort: number): void {
    this.targetPort = targetPort;
    for (const socket of this.sockets) socket.destroy();
  }

  async close(): Promise<void> {
    const closed = new Promise((resolve) => this.server.close(resolve));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }

  private accept(socket: Socket): void {
    this.sockets.add(socket);
    socket.on("close", () => this.sockets.delete(socket));
    socket.on("error", () => {});
    if (!this.hold) {
      this.forward(socket);
      return;
    }
    const waiter = this.heldWaiters.shift();
    if (waiter) waiter(socket);
    else this.held.push(socket);
  }
}
