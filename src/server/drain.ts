/**
 * The graceful shutdown, and what it needs of node:http beyond `close()`,
 * so that keep-alive and pipelining clients get answers, not resets: the
 * listener stops, the open connections stay until the drain ends, and
 * every response written meanwhile says whether its connection closes
 * after it.
 */
import type { Server, ServerResponse } from "node:http";
import { Server as NetServer, type Socket } from "node:net";
import type { Answers } from "./answers.js";
import { drainingError } from "./http-error.js";
import type { OpenResponses } from "./open-responses.js";

/**
 * How long the end of a drain waits for its 503 "draining" answers to be
 * written before it closes every connection: they are small, so they leave
 * at once unless a client stopped reading.
 */
export const refusalFlushMs = 1_000;

/**
 * How long the end of a drain keeps idle keep-alive connections open for a
 * request their client may have sent already (see OpenConnections.linger).
 * It ends sooner once every connection has closed.
 */
const idleLingerMs = 1_000;

export interface DrainParts {
  readonly http: Server;
  readonly open: OpenResponses;
  readonly answers: Answers;
  /** Requests the drain waits for (a body arriving, IDs being won). */
  readonly pending: () => number;
  /** How long the drain waits for them, in milliseconds. */
  readonly drainTimeoutMs: number;
}

/**
 * Graceful shutdown: stop accepting connections, answer the requests in
 * flight and those whose body is arriving, then close what is left once
 * they are done or after `drainTimeoutMs`. Open connections stay open
 * meanwhile: a request arriving on one gets 503 "draining", and the last
 * response on each closes it (Connection: close), so a keep-alive client
 * is never reset.
 */
export class Drain {
  private readonly parts: DrainParts;
  private readonly connections: OpenConnections;
  /** Aborted by `hurry()`: the drain stops waiting for requests in flight and idle connections. */
  private readonly hurried = new AbortController();
  private drained: (() => void) | undefined;

  constructor(parts: DrainParts) {
    this.parts = parts;
    this.connections = new OpenConnections(parts.http);
  }

  /** No request is pending any more: a drain waiting for them goes on. */
  idle(): void {
    this.drained?.();
  }

  /** Stops waiting for the requests in flight: they are answered 503 "draining" at once. */
  hurry(): void {
    this.hurried.abort();
    this.drained?.();
  }

  async run(): Promise<{ unfinished: number }> {
    const { http, answers, pending, drainTimeoutMs } = this.parts;
    answers.draining = true;
    stopAccepting(http);
    let timer: ReturnType<typeof setTimeout> | undefined;
    if (pending() > 0 && !this.hurried.signal.aborted) {
      await new Promise<void>((resolve) => {
        this.drained = resolve;
        timer = setTimeout(resolve, drainTimeoutMs);
      });
    }
    clearTimeout(timer);
    const unfinished = pending();
    await this.refuseUnanswered();
    await this.connections.linger(idleLingerMs, this.hurried.signal);
    // What arrived meanwhile is answered 503 "draining" at once; what is
    // still being written, waited for.
    await this.refuseUnanswered();
    // The idle connections closed and node's timeout checks stopped, then the rest.
    http.close();
    http.closeAllConnections();
    return { unfinished };
  }

  /**
   * What the drain left unanswered (a body still arriving, IDs still being
   * won) gets a JSON 503 "draining" rather than a bare reset: the client
   * knows to retry elsewhere. Their IDs are never handed out. Then a wait
   * for every response under way to be written, as the connections are
   * closed next.
   */
  private async refuseUnanswered(): Promise<void> {
    const { open, answers } = this.parts;
    const written: Promise<void>[] = [];
    for (const [res, work] of open.entries()) {
      if (res.req.socket.destroyed || res.writableFinished) continue;
      // Not yet written: also one waiting for its turn on its connection,
      // whose own answer goes first (writeInTurn writes one answer only).
      if (!res.headersSent) {
        const error = drainingError(true);
        work.stop(error);
        res.setHeader("Retry-After", "1");
        answers.fail(res, error);
      }
      written.push(
        new Promise((resolve) => {
          res.once("finish", resolve);
          res.once("close", resolve);
        }),
      );
    }
    if (written.length === 0) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.all(written),
      new Promise((resolve) => {
        timer = setTimeout(resolve, refusalFlushMs);
      }),
    ]);
    clearTimeout(timer);
  }
}

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
