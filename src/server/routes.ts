/**
 * The server's three routes, and the answers to everything else:
 *
 *   POST /v1/ids  {"count": n}  → 200 {"ids": ["…", …]}   (strings: JSON numbers stop at 2^53)
 *   GET  /healthz               → 200 when a majority of nodes is usable for IDs and the
 *                                 node list is not refused, else 503
 *   GET  /metrics               → Prometheus text format
 *
 * HEAD is answered wherever GET is (RFC 9110 §9.1), with GET's status and
 * headers and no body (Answers.send leaves it out). Any other path is a
 * JSON 404, any other method a JSON 405 with Allow.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { type Verdict, verdictOf } from "../node/verdict.js";
import type { Answers } from "./answers.js";
import { HttpError, httpErrorOf } from "./http-error.js";
import type { IdRequests } from "./id-request-life.js";
import type { IdSource } from "./id-source.js";
import type { JsonLogger } from "./json-log.js";
import type { IdServerMetrics } from "./metrics.js";
import type { OpenResponses } from "./open-responses.js";

export interface RouteParts {
  readonly ids: IdSource;
  readonly requests: IdRequests;
  readonly answers: Answers;
  readonly open: OpenResponses;
  readonly metrics: IdServerMetrics;
  readonly log: JsonLogger;
  /** How long a /healthz verdict is reused, in milliseconds (it reads every node). */
  readonly healthCacheMs: number;
}

export class Routes {
  private readonly parts: RouteParts;
  private health: { atMs: number; verdict: Promise<Verdict> } | undefined;

  constructor(parts: RouteParts) {
    this.parts = parts;
  }

  /** node:http's request listener. */
  readonly route = (req: IncomingMessage, res: ServerResponse): void => {
    this.parts.open.add(res);
    const path = pathOf(req.url ?? "/");
    const get = req.method === "GET" || req.method === "HEAD";
    if (path === "/v1/ids") {
      if (req.method === "POST") this.parts.requests.post(req, res);
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
      this.parts.answers.fail(
        res,
        new HttpError(
          404,
          "not_found",
          `no route ${path}: try POST /v1/ids, GET /healthz, GET /metrics`,
        ),
      );
      req.resume();
    }
  };

  private async healthz(req: IncomingMessage, res: ServerResponse): Promise<void> {
    req.resume();
    const { answers, metrics } = this.parts;
    let body: Record<string, unknown>;
    let status: number;
    const refused = this.parts.ids.refused;
    if (answers.draining) {
      status = 503;
      body = { status: "draining" };
    } else if (refused) {
      // Every node may be usable, and still no request is served: the
      // list does not fit the cluster (ERR_MEMBERSHIP), say. It lasts
      // until the server is restarted with a list that fits.
      status = 503;
      body = { status: "refused", code: refused.code, reasons: [refused.message] };
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
    // No Retry-After for a refusal: it lasts until an operator acts.
    if (status !== 200 && !(refused && !answers.draining)) res.setHeader("Retry-After", "1");
    answers.json(res, status, body, () => metrics.request(status, undefined, 0));
  }

  /** One read of every node per `healthCacheMs`, shared by the probes that arrive meanwhile. */
  private verdict(): Promise<Verdict> {
    const now = performance.now();
    if (!this.health || now - this.health.atMs >= this.parts.healthCacheMs) {
      this.parts.ids.refreshNodes?.();
      const verdict = this.parts.ids.status().then((nodes) => verdictOf(nodes).ids);
      this.health = { atMs: now, verdict };
    }
    return this.health.verdict;
  }

  private async metrics(res: ServerResponse): Promise<void> {
    const { answers, metrics, log } = this.parts;
    // The node gauges as the next scrape reads them: checked now, not only
    // when a request's rounds meet the nodes.
    this.parts.ids.refreshNodes?.();
    try {
      const text = await metrics.text();
      if (res.headersSent || res.destroyed) return; // answered by the drain meanwhile
      answers.send(res, 200, { "Content-Type": metrics.contentType }, text, () =>
        metrics.request(200, undefined, 0),
      );
    } catch (error) {
      answers.fail(res, httpErrorOf(error, log));
    }
  }

  /** A bug in a route: logged, the request ended; never an unhandled rejection that ends the server. */
  private crashed(route: string, res: ServerResponse, error: unknown): void {
    this.parts.log.error("request failed", { route, error: String(error) });
    if (!res.headersSent && !res.destroyed) {
      this.parts.answers.fail(
        res,
        new HttpError(500, "internal", "the server failed this request"),
      );
    } else {
      res.destroy();
    }
  }

  private methodNotAllowed(req: IncomingMessage, res: ServerResponse, allow: string): void {
    res.setHeader("Allow", allow);
    this.parts.answers.fail(
      res,
      new HttpError(405, "method_not_allowed", `${req.method} is not allowed here: use ${allow}`),
    );
    req.resume();
  }
}

/**
 * The path of a request target, without its query: origin-form
 * (`/v1/ids?x`) as written, absolute-form (`http://host:port/v1/ids`, which
 * RFC 9112 §3.2.2 says a server must accept, and which some proxies send)
 * by its URL's path. Origin-form is not run through URL: that would resolve
 * `..` and percent-escapes, and a path the client wrote oddly should get
 * the 404 that names it.
 */
export function pathOf(target: string): string {
  if (!target.startsWith("/")) {
    try {
      return new URL(target).pathname;
    } catch {
      // Not a URL either (asterisk-form, junk): its 404 names it as written.
    }
  }
  const query = target.indexOf("?");
  return query < 0 ? target : target.slice(0, query);
}
