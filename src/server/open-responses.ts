/**
 * Every response the server has not closed yet, with what stops its work:
 * the drain answers those still unanswered at its end, and a parse error
 * on a connection is answered through the response on the wire there.
 */
import type { ServerResponse } from "node:http";
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

  /**
   * Holds `res` until it closes. A response queued behind another on a
   * pipelined connection gets no socket of its own, so it never closes if
   * the client goes: the socket's close forgets it too.
   */
  add(res: ServerResponse): void {
    this.works.set(res, noWork);
    let done = false;
    const forget = () => {
      if (done) return;
      done = true;
      unhook();
      this.works.get(res)?.closed();
      this.works.delete(res);
    };
    const unhook = onSocketClose(res.req.socket, forget);
    res.once("close", forget);
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
}

/** Per socket, what to run when it closes: one listener however many requests it pipelines. */
const socketCloseHooks = new WeakMap<Socket, Set<() => void>>();

/** Runs `hook` when `socket` closes, unless the returned function is called first. */
function onSocketClose(socket: Socket, hook: () => void): () => void {
  let hooks = socketCloseHooks.get(socket);
  if (!hooks) {
    const set = new Set<() => void>();
    hooks = set;
    socketCloseHooks.set(socket, set);
    socket.once("close", () => {
      for (const run of set) run();
      set.clear();
    });
  }
  hooks.add(hook);
  return () => hooks.delete(hook);
}
