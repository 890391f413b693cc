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
 * Plain node:http: three routes need no framework, and the hot path stays
 * one parse and one write.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { RedquorumError } from "../errors.js";
import type { NodeStatus } from "../node/status.js";
import { type Verdict, verdictOf } from "../node/verdict.js";
import type { JsonLogger } from "./json-log.js";
import type { IdServerMetrics } from "./metrics.js";

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
  /** POST /v1/ids requests answered at once; more get 503 with Retry-After. */
  maxInFlight: number;
  /** How long a shutdown waits for requests in flight, in milliseconds. */
  drainTimeoutMs: number;
  /** How long a /healthz verdict is reused, in milliseconds (it reads every node). */
  healthCacheMs: number;
  log: JsonLogger;
  metrics: IdServerMetrics;
}

/** The JSON error body: a stable code and a sentence saying what was wrong and what is allowed. */
interface ErrorBody {
  readonly code: string;
  readonly message: string;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

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
  private inFlight = 0;
  private draining = false;
  private drained: (() => void) | undefined;
  private health: { atMs: number; verdict: Promise<Verdict> } | undefined;
  private closing: Promise<{ unfinished: number }> | undefined;

  constructor(ids: IdSource, options: IdServerOptions) {
    this.ids = ids;
    this.options = options;
    this.http = createServer((req, res) => this.route(req, res));
    // A client that stalls mid-request must not hold a slot for minutes
    // (node's defaults are 300 s for a request, 60 s for headers).
    this.http.requestTimeout = 10_000;
    this.http.headersTimeout = 10_000;
  }

  listen(port: number, host: string): Promise<AddressInfo> {
    return new Promise((resolve, reject) => {
      this.http.once("error", reject);
      this.http.listen(port, host, () => {
        this.http.off("error", reject);
        resolve(this.http.address() as AddressInfo);
      });
    });
  }

  /**
   * Graceful shutdown: stop accepting connections, answer the requests in
   * flight (every response from now on closes its connection), then close
   * what is left once they are done or after `drainTimeoutMs`. /healthz
   * says 503 meanwhile, so a load balancer stops sending.
   */
  close(): Promise<{ unfinished: number }> {
    // Once: a second call (the CLI's finally after its drain) gets the first one's outcome.
    this.closing ??= this.drain();
    return this.closing;
  }

  private async drain(): Promise<{ unfinished: number }> {
    this.draining = true;
    this.http.close();
    this.http.closeIdleConnections();
    let timer: ReturnType<typeof setTimeout> | undefined;
    if (this.inFlight > 0) {
      await new Promise<void>((resolve) => {
        this.drained = resolve;
        timer = setTimeout(resolve, this.options.drainTimeoutMs);
      });
    }
    clearTimeout(timer);
    const unfinished = this.inFlight;
    this.http.closeAllConnections();
    return { unfinished };
  }

  private route(req: IncomingMessage, res: ServerResponse): void {
    if (this.draining) res.setHeader("Connection", "close");
    const path = (req.url ?? "/").split("?", 1)[0];
    if (path === "/v1/ids") {
      if (req.method === "POST") this.postIds(req, res);
      else this.methodNotAllowed(req, res, "POST");
    } else if (path === "/healthz") {
      if (req.method === "GET" || req.method === "HEAD") void this.healthz(req, res);
      else this.methodNotAllowed(req, res, "GET, HEAD");
    } else if (path === "/metrics") {
      if (req.method === "GET") void this.metrics(res);
      else this.methodNotAllowed(req, res, "GET");
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
    if (this.inFlight >= this.options.maxInFlight) {
      res.setHeader("Retry-After", "1");
      this.fail(
        res,
        new HttpError(
          503,
          "overloaded",
          `${this.inFlight} requests in flight, the limit is ${this.options.maxInFlight}: retry later`,
        ),
        startedMs,
      );
      req.resume();
      return;
    }
    this.inFlight++;
    this.options.metrics.inFlight.inc();
    // A client that goes away stops waiting for its IDs (they are never handed out).
    const gone = new AbortController();
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      forget();
      if (!res.writableFinished) gone.abort();
      this.inFlight--;
      this.options.metrics.inFlight.dec();
      if (this.inFlight === 0) this.drained?.();
    };
    // A request queued behind another on a pipelined connection never sees
    // its response's "close" when the client goes: the socket's tells.
    const forget = onSocketClose(req.socket, release);
    res.once("close", release);
    readBody(req, this.options.maxBodyBytes)
      .then((body) => {
        const count = this.countOf(body);
        return this.ids.nextBatch(count, { signal: gone.signal });
      })
      .then(
        (ids) => {
          const body = `{"ids":[${ids.map((id) => `"${id}"`).join(",")}]}`;
          res.writeHead(200, {
            "Content-Type": "application/json",
            "Content-Length": Buffer.byteLength(body),
          });
          res.end(body);
          this.options.metrics.request(200, startedMs, ids.length);
        },
        (error: unknown) => {
          if (gone.signal.aborted) return; // nobody to answer
          // The rest of a refused body (413) must not be read as the next request.
          if (error instanceof HttpError && error.status === 413)
            res.setHeader("Connection", "close");
          this.fail(res, this.httpErrorOf(error), startedMs);
        },
      );
  }

  /** `{"count": n}`, or an empty body for one ID. */
  private countOf(body: string): number {
    if (body.trim() === "") return 1;
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch (error) {
      throw new HttpError(400, "bad_json", `the body is not JSON (${(error as Error).message})`);
    }
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
      throw new HttpError(400, "bad_body", 'expected a JSON object such as {"count": 10}');
    }
    for (const field of Object.keys(parsed)) {
      if (field !== "count") {
        throw new HttpError(
          400,
          "bad_body",
          `unknown field ${JSON.stringify(field)}: the only field is "count"`,
        );
      }
    }
    const count = "count" in parsed ? (parsed as { count: unknown }).count : 1;
    const max = this.options.maxCount;
    if (typeof count !== "number" || !Number.isInteger(count) || count < 1 || count > max) {
      throw new HttpError(
        400,
        "bad_count",
        `"count" is ${JSON.stringify(count)}: expected an integer from 1 to ${max}`,
      );
    }
    return count;
  }

  private httpErrorOf(error: unknown): HttpError {
    if (error instanceof HttpError) return error;
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
    if (status !== 200) res.setHeader("Retry-After", "1");
    this.sendJson(res, status, body, req.method === "HEAD");
    this.options.metrics.request(status, undefined, 0);
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
      res.writeHead(200, { "Content-Type": this.options.metrics.contentType });
      res.end(text);
      this.options.metrics.request(200, undefined, 0);
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
    const body: { error: ErrorBody } = { error: { code: error.code, message: error.message } };
    this.sendJson(res, error.status, body);
    this.options.metrics.request(error.status, startedMs, 0);
  }

  private sendJson(res: ServerResponse, status: number, value: unknown, headOnly = false): void {
    if (res.headersSent || res.destroyed) return;
    const body = JSON.stringify(value);
    res.writeHead(status, {
      "Content-Type": "application/json",
      "Content-Length": Buffer.byteLength(body),
    });
    res.end(headOnly ? undefined : body);
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

/** The request body as text, refused with 413 once it passes `maxBytes` (also when Content-Length says so up front). */
function readBody(req: IncomingMessage, maxBytes: number): Promise<string> {
  const tooLarge = () =>
    new HttpError(413, "body_too_large", `the body is larger than ${maxBytes} bytes, the limit`);
  const declared = Number(req.headers["content-length"]);
  if (declared > maxBytes) {
    req.resume();
    return Promise.reject(tooLarge());
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        req.removeAllListeners("data");
        req.resume();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    });
    req.once("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.once("error", reject);
    // A client gone mid-body: settle, so nothing waits for an end that never comes.
    req.once("close", () => {
      if (!req.complete) reject(new HttpError(400, "aborted", "the request ended before its body"));
    });
  });
}
