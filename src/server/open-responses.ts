/**
 * Every response the server has not closed yet, with what stops its work:
 * the drain answers those still unanswered at its end, and a parse error
 * on a connection is answered through the response on the wire there.
 */
import type { Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { LinkedList, type ListEntry } from "../linked-list.js";
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

/** An open response and its work. */
interface Open {
  readonly res: ServerResponse;
  work: OpenWork;
}

/**
 * The open responses in the order they were added, in a LinkedList rather
 * than a Map keyed by response: one comes and goes per request, and with a
 * Map each request's objects were promoted to the old generation
 * (linked-list.ts).
 */
export class OpenResponses {
  private readonly list = new LinkedList<Open>();

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
    return this.list.size;
  }

  /** Every open response with its work, oldest first, as they are now (closing one meanwhile is safe). */
  entries(): IterableIterator<[ServerResponse, OpenWork]> {
    return this.list
      .values()
      .map(({ res, work }): [ServerResponse, OpenWork] => [res, work])
      [Symbol.iterator]();
  }

  /** Every open response, oldest first, as they are now. */
  keys(): IterableIterator<ServerResponse> {
    return this.list
      .values()
      .map(({ res }) => res)
      [Symbol.iterator]();
  }

  /** Holds `res` until it, or its connection, closes. */
  add(res: ServerResponse): void {
    const entry = this.list.push({ res, work: noWork });
    res.on("close", () => this.forget(entry));
  }

  /**
   * Gives `res` (added already) the work that `stop` and its close end.
   * Searched from the newest: a request's work is watched in the turn its
   * response was added, so it is the last entry or close to it.
   */
  watch(res: ServerResponse, work: OpenWork): void {
    const entry = this.list.findLast((open) => open.res === res);
    if (entry) entry.value.work = work;
  }

  /** Stops the work of `res`, if it is still open. */
  stop(res: ServerResponse, reason: HttpError): void {
    this.list.findLast((open) => open.res === res)?.value.work.stop(reason);
  }

  /** The open responses on `socket`, oldest first. */
  on(socket: unknown): ServerResponse[] {
    return this.onSocket(socket).map(({ value }) => value.res);
  }

  private onSocket(socket: unknown): ListEntry<Open>[] {
    return this.list.entries(({ res }) => res.req.socket === socket);
  }

  private forget(entry: ListEntry<Open>): void {
    if (this.list.remove(entry)) entry.value.work.closed();
  }

  private socketClosed(socket: Socket): void {
    // Found first, then forgotten: a work's `closed` may end other responses.
    for (const entry of this.onSocket(socket)) this.forget(entry);
  }
}
