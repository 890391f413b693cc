/**
 * Every response the server has not closed yet, with what stops its work:
 * the drain answers those still unanswered at its end, and a parse error
 * on a connection is answered through the response on the wire there.
 */
import type { Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { HttpError } from "./http-error.js";

/** What a request with work under way (a body to read, IDs to win) does when it is stopped or gone. */
export interface OpenWork {
  /** Stop the work: the caller answers with `reason` (or nobody is left to answer). */
  stop(reason: HttpError): void;
  /** The response closed, or its connection did: the request is over. */
  closed(): void;
}

/** A response with no work of its own to stop (/healthz, /metrics, errors). */
const noWork: OpenWork = { stop() {}, closed() {} };

export class OpenResponses {
  private readonly works = new Map<ServerResponse, OpenWork>();

  /**
   * A response queued behind another on a pipelined connection gets no
   * socket of its own, so it never closes if the client goes: a closing
   * connection forgets its responses too. One listener per connection,
   * not one per request: this runs on the hot path.
   */
  constructor(server: Server) {
    server.on("connection", (socket: Socket) => {
      socket.once("close", () => this.socketClosed(socket));
    });
  }

  get size(): number {
    return this.works.size;
  }

  /** Every open response with its work, oldest first. */
  entries(): IterableIterator<[ServerResponse, OpenWork]> {
    return this.works.entries();
  }

  keys(): IterableIterator<ServerResponse> {
    return this.works.keys();
  }

  /** Holds `res` until it, or its connection, closes. */
  add(res: ServerResponse): void {
    this.works.set(res, noWork);
    res.on("close", () => this.forget(res));
  }

  /** Gives `res` (added already) the work that `stop` and its close end. */
  watch(res: ServerResponse, work: OpenWork): void {
    if (this.works.has(res)) this.works.set(res, work);
  }

  /** Stops the work of `res`, if it is still open. */
  stop(res: ServerResponse, reason: HttpError): void {
    this.works.get(res)?.stop(reason);
  }

  /** The open responses on `socket`, oldest first. */
  on(socket: unknown): ServerResponse[] {
    const found: ServerResponse[] = [];
    for (const res of this.works.keys()) if (res.req.socket === socket) found.push(res);
    return found;
  }

  private forget(res: ServerResponse): void {
    const work = this.works.get(res);
    if (work === undefined) return;
    this.works.delete(res);
    work.closed();
  }

  private socketClosed(socket: Socket): void {
    for (const res of this.on(socket)) this.forget(res);
  }
}
