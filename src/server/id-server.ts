/**
 * The HTTP ID server (seed 2's mediator): many clients ask one process for
 * IDs over HTTP, and the process asks the Redis majority through NextId.
 * The requests that arrive in one turn of the event loop share one NextId
 * call (id-batches.ts), and NextId's rounds serve many calls each. Several
 * servers may share the nodes: NextId keeps IDs unique and in real-time
 * order across them.
 *
 * This file puts the parts together and owns the lifecycle: listening,
 * node's parser errors, the drain. The routes are routes.ts; a POST
 * /v1/ids's life and limits, id-requests.ts; the drain, drain.ts; error
 * answers and statuses, http-error.ts.
 *
 * Every error is JSON, {"error": {"code": "…", "message": "…"}}, also the
 * ones node's HTTP parser finds (400, 408, 431: the 'clientError' handler).
 *
 * Plain node:http: three routes need no framework, and the hot path stays
 * one parse and one write.
 */
import { createServer, type Server, STATUS_CODES } from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { Answers } from "./answers.js";
import { Drain, refusalFlushMs } from "./drain.js";
import { clientRefusal, errorBodyOf } from "./http-error.js";
import { IdBatches } from "./id-batches.js";
import { IdRequests } from "./id-request-life.js";
import type { IdSource } from "./id-source.js";
import type { JsonLogger } from "./json-log.js";
import { ListenError } from "./listen-error.js";
import type { IdServerMetrics } from "./metrics.js";
import { OpenResponses } from "./open-responses.js";
import { Routes } from "./routes.js";

export type { IdSource } from "./id-source.js";

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
 * Node checks the request and headers timeouts below once per this interval
 * (default 30 s), so a stalled client held its slot up to 40 s, not 10.
 */
const connectionsCheckingIntervalMs = 1_000;

/**
 * Bound on the whole request (headers and body) and on its headers; the
 * body has a shorter bound of its own (`bodyTimeoutMs`).
 */
export const clientTimeoutMs = 10_000;

export class IdServer {
  private readonly http: Server;
  private readonly options: IdServerOptions;
  /** Every response not yet closed, with what stops its work. */
  private readonly open: OpenResponses;
  private readonly answers: Answers;
  private readonly requests: IdRequests;
  private readonly drain: Drain;
  private closing: Promise<{ unfinished: number }> | undefined;

  constructor(ids: IdSource, options: IdServerOptions) {
    this.options = options;
    const { log, metrics } = options;
    this.http = createServer({
      // A client that stalls mid-request must not hold a slot for minutes
      // (node's defaults are 300 s for a request, 60 s for headers)...
      requestTimeout: options.clientTimeoutMs ?? clientTimeoutMs,
      headersTimeout: options.clientTimeoutMs ?? clientTimeoutMs,
      // ...nor for up to 30 s more, until node's next check.
      connectionsCheckingInterval: connectionsCheckingIntervalMs,
    });
    this.open = new OpenResponses(this.http);
    const open = this.open;
    this.answers = new Answers(open, metrics);
    const answers = this.answers;
    this.requests = new IdRequests({
      limits: options,
      batches: new IdBatches(ids, { requestTimeoutMs: options.requestTimeoutMs }),
      answers,
      open,
      log,
      idle: () => this.drain.idle(),
    });
    const requests = this.requests;
    metrics.watchRequests(() => requests);
    const routes = new Routes({
      ids,
      requests,
      answers,
      open,
      metrics,
      log,
      healthCacheMs: options.healthCacheMs,
    });
    this.http.on("request", routes.route);
    this.drain = new Drain({
      http: this.http,
      open,
      answers,
      pending: () => requests.pending,
      drainTimeoutMs: options.drainTimeoutMs,
    });
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
   * Graceful shutdown (see Drain): stop accepting connections, answer the
   * requests in flight, then close. /healthz says 503 meanwhile, so a load
   * balancer stops sending.
   */
  close(): Promise<{ unfinished: number }> {
    // Once: a second call (the CLI's finally after its drain) gets the first one's outcome.
    this.closing ??= this.drain.run();
    return this.closing;
  }

  /**
   * Stops waiting for the requests in flight (the CLI's second signal): a
   * drain in progress, or one started now, answers them 503 "draining" at
   * once and closes every connection.
   */
  abort(): Promise<{ unfinished: number }> {
    this.drain.hurry();
    return this.close();
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
    const responses = this.open.on(socket);
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
      this.open.stop(head, refusal);
      head.setHeader("Connection", "close");
      this.answers.fail(head, refusal);
      head.once("finish", () => socket.destroy());
      // A client that reads nothing would keep it open otherwise.
      setTimeout(() => socket.destroy(), refusalFlushMs).unref();
      return;
    }
    socket.destroy();
  }
}
