/**
 * What a drain needs of node:http beyond `close()`, so that keep-alive and
 * pipelining clients get answers, not resets: the listener stops, the open
 * connections stay until the drain ends, and every response written
 * meanwhile says whether its connection closes after it.
 */
import type { Server, ServerResponse } from "node:http";
import { Server as NetServer, type Socket } from "node:net";

/**
 * Stops accepting connections and leaves the open ones be. http.Server's
 * own close() also destroys every idle keep-alive connection at once, and a
 * request its client had just sent on one met a reset; kept open until the
 * drain ends, such a request gets 503 "draining". It would also stop
 * node's request and headers timeouts, which still bound those connections.
 */
export function stopAccepting(server: Server): void {
  NetServer.prototype.close.call(server);
}

/**
 * The server's open connections, so that the end of a drain can give the
 * idle ones a moment before it closes them.
 */
export class OpenConnections {
  private readonly sockets = new Set<Socket>();
  private emptied: (() => void) | undefined;

  constructor(server: Server) {
    server.on("connection", (socket: Socket) => {
      this.sockets.add(socket);
      socket.once("close", () => {
        this.sockets.delete(socket);
        if (this.sockets.size === 0) this.emptied?.();
      });
    });
  }

  /**
   * Resolves once every connection has closed, after `ms`, or when `signal`
   * aborts. A keep-alive connection answered just before the drain began
   * looks idle, but its client may be sending its next request already:
   * closed now, that request would meet a reset; given this moment, it
   * gets 503 "draining" and the connection closes after it. Connections
   * whose last answer said Connection: close are closing already.
   */
  async linger(ms: number, signal: AbortSignal): Promise<void> {
    if (this.sockets.size === 0 || signal.aborted) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let onAbort: (() => void) | undefined;
    try {
      await new Promise<void>((resolve) => {
        this.emptied = resolve;
        timer = setTimeout(resolve, ms);
        onAbort = resolve;
        signal.addEventListener("abort", onAbort, { once: true });
      });
    } finally {
      this.emptied = undefined;
      clearTimeout(timer);
      if (onAbort) signal.removeEventListener("abort", onAbort);
    }
  }
}

/**
 * Calls `write(last)` for a response given during a drain once its turn on
 * its connection has come: `last` says whether any response is still due
 * after it there, among `pending`. The last one must close the connection
 * (Connection: close), and one before it must not: the client would not
 * read the answers after it, and its requests would meet a reset.
 *
 * Its turn comes one turn of the event loop later, so that node has parsed
 * every request that came with this one (pipelined requests arrive in one
 * read and are parsed one after the other, each answered before the next is
 * seen), and, for a response queued behind another on its connection, once
 * node hands it the socket (`socket` event).
 */
export function writeInTurn(
  res: ServerResponse,
  pending: () => Iterable<ServerResponse>,
  write: (last: boolean) => void,
): void {
  const inTurn = () => {
    // Answered meanwhile (the end of the drain answers what is left), or gone.
    if (res.headersSent || res.destroyed) return;
    write(isLast(res, pending()));
  };
  setImmediate(() => {
    if (res.socket) inTurn();
    else res.once("socket", inTurn);
  });
}

/** Whether none of `pending` but `res` is still to be written on its connection. */
function isLast(res: ServerResponse, pending: Iterable<ServerResponse>): boolean {
  for (const other of pending) {
    // Those before it on the connection have finished by its turn.
    if (other !== res && other.req.socket === res.req.socket && !other.writableFinished) {
      return false;
    }
  }
  return true;
}
