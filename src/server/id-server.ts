/**
 * The HTTP ID server (seed 2's mediator): many clients ask one process for
 * IDs over HTTP, and the process asks the Redis majority through NextId,
 * whose group commit serves every request waiting at once in one round.
 * Several servers may share the nodes: NextId keeps IDs unique and in
 * real-time order across them.
 *
 *   POST /v1/ids  {"count": n}  → 200 {"ids": ["…", …]}   (strings: JSON numbers stop at 2^53)
 *   GET  /healthz               → 200 when a majority of nodes is usable for IDs, else 503
 *   GET  /metrics               → Prometheus text format
 *
 * HEAD is answered wherever GET is (RFC 9110 §9.1), with GET's status and
 * headers and no body.
 *
 * Every error is JSON, {"error": {"code": "…", "message": "…"}}, also the
 * ones node's HTTP parser finds (400, 408, 431: the 'clientError' handler).
 * The statuses a client must tell apart: 400/404/405/408/413/415/431 its
 * request is wrong; 503 try again later, on this or another instance
 * (overloaded, timeout, draining, or the cluster cannot serve); 507 the ID
 * space is used up, retrying will not help (see idSpaceExhaustedStatus).
 *
 * Plain node:http: three routes need no framework, and the hot path stays
 * one parse and one write.
 */
import {
  createServer,
  type IncomingMessage,
  maxHeaderSize,
  type OutgoingHttpHeaders,
  type Server,
  type ServerResponse,
  STATUS_CODES,
} from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { Duplex } from "node:stream";
import { RedquorumError } from "../errors.js";
import type { NodeStatus } from "../node/status.js";
import { type Verdict, verdictOf } from "../node/verdict.js";
import { OpenConnections, stopAccepting, writeInTurn } from "./drain.js";
import { errorBodyOf, HttpError } from "./http-error.js";
import { countOf, requestRefusal } from "./id-request.js";
import type { JsonLogger } from "./json-log.js";
import { ListenError } from "./listen-error.js";
import type { IdServerMetrics } from "./metrics.js";
import { readBody } from "./request-body.js";

/** What the server needs from NextId (an interface, so tests and embedders can pass their own). */
export interface IdSource {
  nextBatch(count: number, options?: { signal?: AbortSignal }): Promise<bigint[]>;
  status(): Promise<NodeStatus[]>;
}

export interface IdServerOptions {
  /** Largest `count` one request may ask for. */
  maxCount: number;
  /** Largest request body, in bytes. */
  maxBodyBytes: number;
  /**
   * POST /v1/ids requests whose body is in and that wait for their IDs, at
   * once; more get 503 "overloaded" with Retry-After. A request still
   * receiving its body is not counted: --body-timeout bounds it instead.
   */
  maxInFlight: number;
  /**
   * How long a POST /v1/ids body may take to arrive whole after its
   * headers, in milliseconds; then 408 "body_timeout" and the connection
   * is closed. At most the 10 s node allows the whole request.
   */
  bodyTimeoutMs: number;
  /** How long a shutdown waits for requests in flight, in milliseconds. */
  drainTimeoutMs: number;
  /**
   * How long one POST /v1/ids waits for its IDs once its body is read, in
   * milliseconds; then 503 "timeout". NextId alone would retry a stalled
   * majority for many seconds (30 lost rounds with node timeouts and backoff).
   */
  requestTimeoutMs: number;
  /** How long a /healthz verdict is reused, in milliseconds (it reads every node). */
  healthCacheMs: number;
  /**
   * Bound on a whole request and on its headers, in milliseconds; at least
   * `bodyTimeoutMs`. Default `clientTimeoutMs` (the command line has no
   * flag for it; tests of the bound set it short).
   */
  clientTimeoutMs?: number;
  log: JsonLogger;
  metrics: IdServerMetrics;
}

/**
 * The ID space is used up (ERR_ID_OVERFLOW: the counter is at or near
 * 2^63 - 1). 507 Insufficient Storage: the server cannot store what the
 * request needs, and retrying will not change that, so it is not 503 (no
 * Retry-After: clients and load balancers retry 503); it is a 5xx, not
 * 409, because the client did nothing wrong and an operator must act
 * (start a new counter under another key). A smaller count may still fit:
 * the message says how far the counter is.
 */
const idSpaceExhaustedStatus = 507;

/**
 * Node checks the request and headers timeouts below once per this interval
 * (default 30 s), so a stalled client held its slot up to 40 s, not 10.
 */
const connectionsCheckingIntervalMs = 1_000;

/**
 * Bound on the whole request (headers and body) and on its headers; the
 * body has a shorter bound of its own (`bodyTimeoutMs`).
 */
export const clientTimeoutMs = 10_000;

/**
 * How long the end of a drain waits for its 503 "draining" answers to be
 * written before it closes every connection: they are small, so they leave
 * at once unless a client stopped reading.
 */
const refusalFlushMs = 1_000;

/**
 * How long the end of a drain keeps idle keep-alive connections open for a
 * request their client may have sent already (see OpenConnections.linger).
 * It ends sooner once every connection has closed.
 */
const idleLingerMs = 1_000;

/** Library errors that mean "the cluster cannot serve now": 503, try again later. */
const unavailableCodes = new Set([
  "ERR_QUORUM",
  "ERR_NODE",
  "ERR_NODE_TIMEOUT",
  "ERR_NODE_CONFIG",
  "ERR_NODE_DURABILITY",
  "ERR_NOT_INITIALIZED",
  "ERR_CONTENTION",
  "ERR_QUEUE_FULL",
  "ERR_CLOSED",
]);

export class IdServer {
  private readonly http: Server;
  private readonly options: IdServerOptions;
  private readonly ids: IdSource;
  /** POST /v1/ids requests waiting for their IDs (counted against `maxInFlight`). */
  private inFlight = 0;
  /** POST /v1/ids requests whose body is still arriving. */
  private reading = 0;
  private draining = false;
  private drained: (() => void) | undefined;
  /** Aborted by `abort()`: the drain stops waiting for requests in flight and idle connections. */
  private readonly hurry = new AbortController();
  private readonly connections: OpenConnections;
  /**
   * Every response not yet closed, with what stops its work (the wait for
   * IDs): the drain answers those still unanswered at its end, and a
   * parse error on a connection is answered through its response.
   */
  private readonly open = new Map<ServerResponse, (reason: HttpError) => void>();
  private health: { atMs: number; verdict: Promise<Verdict> } | undefined;
  private closing: Promise<{ unfinished: number }> | undefined;

  constructor(ids: IdSource, options: IdServerOptions) {
    this.ids = ids;
    this.options = options;
    this.http = createServer(
      {
        // A client that stalls mid-request must not hold a slot for minutes
        // (node's defaults are 300 s for a request, 60 s for headers)...
        requestTimeout: options.clientTimeoutMs ?? clientTimeoutMs,
        headersTimeout: options.clientTimeoutMs ?? clientTimeoutMs,
        // ...nor for up to 30 s more, until node's next check.
        connectionsCheckingInterval: connectionsCheckingIntervalMs,
      },
      (req, res) => this.route(req, res),
    );
    this.connections = new OpenConnections(this.http);
    this.http.on("clientError", (error: NodeJS.ErrnoException, socket: Duplex) =>
      this.onClientError(error, socket),
    );
  }

  /** Rejects with a `ListenError` (one line, the option to change) when the address cannot be had. */
  listen(port: number, host: string): Promise<AddressInfo> {
    return new Promise((resolve, reject) => {
      const fail = (error: NodeJS.ErrnoException) => reject(new ListenError(host, port, error));
      this.http.once("error", fail);
      this.http.listen(port, host, () => {
        this.http.off("error", fail);
        resolve(this.http.address() as AddressInfo);
      });
    });
  }

  /**
   * Graceful shutdown: stop accepting connections, answer the requests in
   * flight and those whose body is arriving, then close what is left once
   * they are done or after `drainTimeoutMs`. Open connections stay open
   * meanwhile: a request arriving on one gets 503 "draining", and the last
   * response on each closes it (Connection: close), so a keep-alive client
   * is never reset. /healthz says 503 meanwhile, so a load balancer stops
   * sending.
   */
  close(): Promise<{ unfinished: number }> {
    // Once: a second call (the CLI's finally after its drain) gets the first one's outcome.
    this.closing ??= this.drain();
    return this.closing;
  }

  /**
   * Stops waiting for the requests in flight (the CLI's second signal): a
   * drain in progress, or one started now, answers them 503 "draining" at
   * once and closes every connection.
   */
  abort(): Promise<{ unfinished: number }> {
    this.hurry.abort();
    this.drained?.();
    return this.close();
  }

  private async drain(): Promise<{ unfinished: number }> {
    this.draining = true;
    stopAccepting(this.http);
    let timer: ReturnType<typeof setTimeout> | undefined;
    if (this.inFlight + this.reading > 0 && !this.hurry.signal.aborted) {
      await new Promise<void>((resolve) => {
        this.drained = resolve;
        timer = setTimeout(resolve, this.options.drainTimeoutMs);
      });
    }
    clearTimeout(timer);
    const unfinished = this.inFlight + this.reading;
    await this.refuseUnanswered();
    await this.connections.linger(idleLingerMs, this.hurry.signal);
    // What arrived meanwhile is answered 503 "draining" at once; what is
    // still being written, waited for.
    await this.refuseUnanswered();
    // The idle connections closed and node's timeout checks stopped, then the rest.
    this.http.close();
    this.http.closeAllConnections();
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
    const written: Promise<void>[] = [];
    for (const [res, stop] of this.open) {
      if (res.req.socket.destroyed || res.writableFinished) continue;
      // Not yet written: also one waiting for its turn on its connection,
      // whose own answer goes first (writeInTurn writes one answer only).
      if (!res.headersSent) {
        const error = new HttpError(
          503,
          "draining",
          "the server is shutting down and stopped waiting for this request: retry, on another instance",
        );
        stop(error);
        res.setHeader("Retry-After", "1");
        this.fail(res, error);
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

  /**
   * node's HTTP parser refused a request (a bad Content-Length, headers
   * over the limit, the request or headers timeout): answer in JSON like
   * every other error, where the connection still allows an answer, then
   * close it (the parser cannot go on after an error).
   */
  private onClientError(error: NodeJS.ErrnoException, socket: Duplex): void {
    const refusal = clientRefusal(error, this.options.clientTimeoutMs ?? clientTimeoutMs);
    if (refusal === undefined || !socket.writable) {
      socket.destroy();
      return;
    }
    const responses = [...this.open.keys()].filter((res) => res.req.socket === socket);
    if (responses.length === 0) {
      // No response under way: the answer goes on the socket itself.
      const body = JSON.stringify(errorBodyOf(refusal));
      socket.write(
        `HTTP/1.1 ${refusal.status} ${STATUS_CODES[refusal.status]}\r\n` +
          "Content-Type: application/json\r\n" +
          `Content-Length: ${Buffer.byteLength(body)}\r\n` +
          "Connection: close\r\n\r\n" +
          body,
      );
      socket.destroy();
      this.options.metrics.request(refusal.status, undefined, 0);
      return;
    }
    // The response on the wire now, if its request is the one being read
    // (a timeout mid-body): answer through it. A parse error in a later
    // pipelined request cannot be told apart from the answer to an earlier
    // one, so that connection is only closed.
    const head = responses.find((res) => res.socket === socket);
    if (head && !head.headersSent && !head.req.complete) {
      this.open.get(head)?.(refusal);
      head.setHeader("Connection", "close");
      this.fail(head, refusal);
      head.once("finish", () => socket.destroy());
      // A client that reads nothing would keep it open otherwise.
      setTimeout(() => socket.destroy(), refusalFlushMs).unref();
      return;
    }
    socket.destroy();
  }

  private route(req: IncomingMessage, res: ServerResponse): void {
    this.open.set(res, () => {});
    // A response queued behind another on a pipelined connection gets no
    // socket of its own, so it never closes if the client goes: the
    // socket's close forgets it too.
    const forget = onSocketClose(req.socket, () => this.open.delete(res));
    res.once("close", () => {
      forget();
      this.open.delete(res);
    });
    const path = (req.url ?? "/").split("?", 1)[0];
    // HEAD wherever GET (RFC 9110 §9.1): the same answer, whose body send() leaves out.
    const get = req.method === "GET" || req.method === "HEAD";
    if (path === "/v1/ids") {
      if (req.method === "POST") this.postIds(req, res);
      else this.methodNotAllowed(req, res, "POST");
    } else if (path === "/healthz") {
      if (get) {
        this.healthz(req, res).catch((error: unknown) => this.crashed("/healthz", res, error));
      } else this.methodNotAllowed(req, res, "GET, HEAD");
    } else if (path === "/metrics") {
      if (get) {
        this.metrics(res).catch((error: unknown) => this.crashed("/metrics", res, error));
      } else this.methodNotAllowed(req, res, "GET, HEAD");
    } else {
      this.fail(
        res,
        new HttpError(
          404,
          "not_found",
          `no route ${path}: try POST /v1/ids, GET /healthz, GET /metrics`,
        ),
      );
      req.resume();
    }
  }

  private postIds(req: IncomingMessage, res: ServerResponse): void {
    const startedMs = performance.now();
    // A new request on a connection kept open while draining: not one in
    // flight that the drain waits for, so it is told at once to go elsewhere.
    const refusal = this.draining
      ? new HttpError(503, "draining", "the server is shutting down: retry, on another instance")
      : requestRefusal(req);
    if (refusal?.status === 503) res.setHeader("Retry-After", "1");
    if (refusal) {
      if (refusal.status === 415) res.setHeader("Accept-Encoding", "identity");
      this.fail(res, refusal, startedMs);
      req.resume();
      return;
    }
    // The body is read first, bounded by bodyTimeoutMs; only then does the
    // request take a slot of maxInFlight. Counted from its headers, slow
    // bodies (a client stalling, or a flood of them) held every slot for up
    // to the 10 s request timeout and ready requests got 503.
    let stage: "reading" | "in flight" | "done" = "reading";
    this.reading++;
    this.options.metrics.readingBody.inc();
    // A client that goes away stops waiting for its IDs (they are never
    // handed out); so does one answered early (timeout, drain). The reason
    // is the answer, if one is still to be given.
    const work = new AbortController();
    this.open.set(res, (reason) => work.abort(reason));
    const leave = () => {
      if (stage === "reading") {
        this.reading--;
        this.options.metrics.readingBody.dec();
      } else if (stage === "in flight") {
        this.inFlight--;
        this.options.metrics.inFlight.dec();
      }
      stage = "done";
      if (this.inFlight + this.reading === 0) this.drained?.();
    };
    const release = () => {
      if (stage === "done") return;
      forget();
      if (!res.writableFinished) work.abort();
      leave();
    };
    // A request queued behind another on a pipelined connection never sees
    // its response's "close" when the client goes: the socket's tells.
    const forget = onSocketClose(req.socket, release);
    res.once("close", release);
    const limits = {
      maxBytes: this.options.maxBodyBytes,
      timeoutMs: this.options.bodyTimeoutMs,
      signal: work.signal,
    };
    readBody(req, limits)
      .then((body) => {
        const count = countOf(body, this.options.maxCount);
        if (work.signal.aborted) throw work.signal.reason;
        if (this.inFlight >= this.options.maxInFlight) {
          throw new HttpError(
            503,
            "overloaded",
            `${this.inFlight} requests in flight, the limit is ${this.options.maxInFlight}: retry later`,
          );
        }
        this.reading--;
        this.options.metrics.readingBody.dec();
        this.inFlight++;
        this.options.metrics.inFlight.inc();
        stage = "in flight";
        return this.take(count, work);
      })
      .then(
        (ids) => {
          if (stage === "done" || res.headersSent) return; // answered or gone: the IDs are never handed out
          const body = `{"ids":[${ids.map((id) => `"${id}"`).join(",")}]}`;
          this.send(res, 200, { "Content-Type": "application/json" }, body, () =>
            this.options.metrics.request(200, startedMs, ids.length),
          );
        },
        (error: unknown) => {
          if (stage === "done" || res.headersSent) return; // nobody to answer, or answered already
          const reason: unknown = work.signal.aborted ? work.signal.reason : undefined;
          const answer = reason instanceof HttpError ? reason : this.httpErrorOf(error);
          // The rest of a refused or late body must not be read as the next
          // request; the connection is closed after the answer.
          if (answer.status === 413 || answer.status === 408) res.setHeader("Connection", "close");
          // Every 503 passes (a timeout, a majority back): say when to try again.
          if (answer.status === 503) res.setHeader("Retry-After", "1");
          this.fail(res, answer, startedMs);
        },
      );
  }

  /** `count` IDs, or a 503 "timeout" once `requestTimeoutMs` has passed. */
  private async take(count: number, work: AbortController): Promise<bigint[]> {
    const timeoutMs = this.options.requestTimeoutMs;
    const timer = setTimeout(
      () =>
        work.abort(
          new HttpError(
            503,
            "timeout",
            `no IDs within ${timeoutMs} ms, the server's request timeout: ` +
              "too few nodes answered in time; retry later",
          ),
        ),
      timeoutMs,
    );
    try {
      return await this.ids.nextBatch(count, { signal: work.signal });
    } finally {
      clearTimeout(timer);
    }
  }

  private httpErrorOf(error: unknown): HttpError {
    if (error instanceof HttpError) return error;
    if (error instanceof RedquorumError && error.code === "ERR_ID_OVERFLOW") {
      // Expected at the end of the ID space, not a bug: no stack.
      this.options.log.warn("ID space exhausted", { code: error.code, error: error.message });
      return new HttpError(idSpaceExhaustedStatus, error.code, error.message);
    }
    if (error instanceof RedquorumError && unavailableCodes.has(error.code)) {
      return new HttpError(503, error.code, error.message);
    }
    this.options.log.error("request failed", {
      error: error instanceof Error ? (error.stack ?? error.message) : String(error),
    });
    const code = error instanceof RedquorumError ? error.code : "internal";
    return new HttpError(500, code, error instanceof Error ? error.message : String(error));
  }

  private async healthz(req: IncomingMessage, res: ServerResponse): Promise<void> {
    req.resume();
    let body: Record<string, unknown>;
    let status: number;
    if (this.draining) {
      status = 503;
      body = { status: "draining" };
    } else {
      try {
        const verdict = await this.verdict();
        status = verdict.safe ? 200 : 503;
        body = {
          status: verdict.safe ? "ok" : "unavailable",
          usable: verdict.usable,
          needed: verdict.needed,
          reasons: verdict.reasons,
        };
      } catch (error) {
        status = 503;
        body = { status: "unavailable", reasons: [String(error)] };
      }
    }
    // Answered meanwhile (a parse error of this request, the drain's end,
    // the client gone): one answer per request, and a second one would
    // throw out of this unawaited call and crash the server.
    if (res.headersSent || res.destroyed) return;
    if (status !== 200) res.setHeader("Retry-After", "1");
    this.sendJson(res, status, body, () => this.options.metrics.request(status, undefined, 0));
  }

  /** A bug in a route: logged, the request ended; never an unhandled rejection that ends the server. */
  private crashed(route: string, res: ServerResponse, error: unknown): void {
    this.options.log.error("request failed", { route, error: String(error) });
    if (!res.headersSent && !res.destroyed) {
      this.fail(res, new HttpError(500, "internal", "the server failed this request"));
    } else {
      res.destroy();
    }
  }

  /** One read of every node per `healthCacheMs`, shared by the probes that arrive meanwhile. */
  private verdict(): Promise<Verdict> {
    const now = performance.now();
    if (!this.health || now - this.health.atMs >= this.options.healthCacheMs) {
      this.health = { atMs: now, verdict: this.ids.status().then((nodes) => verdictOf(nodes).ids) };
    }
    return this.health.verdict;
  }

  private async metrics(res: ServerResponse): Promise<void> {
    try {
      const text = await this.options.metrics.text();
      if (res.headersSent || res.destroyed) return; // answered by the drain meanwhile
      this.send(res, 200, { "Content-Type": this.options.metrics.contentType }, text, () =>
        this.options.metrics.request(200, undefined, 0),
      );
    } catch (error) {
      this.fail(res, this.httpErrorOf(error));
    }
  }

  private methodNotAllowed(req: IncomingMessage, res: ServerResponse, allow: string): void {
    res.setHeader("Allow", allow);
    this.fail(
      res,
      new HttpError(405, "method_not_allowed", `${req.method} is not allowed here: use ${allow}`),
    );
    req.resume();
  }

  private fail(res: ServerResponse, error: HttpError, startedMs?: number): void {
    this.sendJson(res, error.status, errorBodyOf(error), () =>
      this.options.metrics.request(error.status, startedMs, 0),
    );
  }

  private sendJson(res: ServerResponse, status: number, value: unknown, sent: () => void): void {
    const headers = { "Content-Type": "application/json" };
    this.send(res, status, headers, JSON.stringify(value), sent);
  }

  /**
   * Every response goes out here: with its Content-Length, without its body
   * for HEAD, and during a drain in its turn on its connection, the last
   * one there closing it. `sent` runs once it is written; nothing is written
   * when a response went out already or the connection is gone.
   */
  private send(
    res: ServerResponse,
    status: number,
    headers: OutgoingHttpHeaders,
    body: string,
    sent: () => void,
  ): void {
    if (res.headersSent || res.destroyed) return;
    const write = (last: boolean) => {
      if (last) res.setHeader("Connection", "close");
      res.writeHead(status, { ...headers, "Content-Length": Buffer.byteLength(body) });
      res.end(res.req.method === "HEAD" ? undefined : body);
      sent();
    };
    if (this.draining) writeInTurn(res, () => this.open.keys(), write);
    else write(false);
  }
}

/** The JSON answer to an error of node's HTTP parser, or undefined for none (the client went away). */
function clientRefusal(
  error: NodeJS.ErrnoException,
  requestTimeoutMs: number,
): HttpError | undefined {
  switch (error.code) {
    case "ECONNRESET":
    case "EPIPE":
      return undefined;
    case "HPE_HEADER_OVERFLOW":
      return new HttpError(
        431,
        "headers_too_large",
        `the request line and headers are larger than ${maxHeaderSize} bytes, the limit`,
      );
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return new HttpError(
        408,
        "request_timeout",
        `the request did not arrive whole within ${requestTimeoutMs / 1_000} s: send it at once`,
      );
    default:
      return new HttpError(
        400,
        "bad_request",
        `not a valid HTTP/1.1 request (${error.code ?? "error"}: ${error.message}): ` +
          'expected POST /v1/ids with a JSON body such as {"count": 10}',
      );
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
