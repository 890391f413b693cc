/**
 * Where every response goes out: with its Content-Length, without its body
 * for HEAD, counted in the metrics once written, and during a drain in its
 * turn on its connection, the last one there closing it.
 */
import type { OutgoingHttpHeaders, ServerResponse } from "node:http";
import { writeInTurn } from "./drain.js";
import { errorBodyOf, type HttpError } from "./http-error.js";
import type { IdServerMetrics } from "./metrics.js";
import type { OpenResponses } from "./open-responses.js";

const jsonHeaders = { "Content-Type": "application/json" } as const;

export class Answers {
  /** Set once the drain begins: answers then go out in their turn (writeInTurn). */
  draining = false;
  private readonly open: OpenResponses;
  private readonly metrics: IdServerMetrics;

  constructor(open: OpenResponses, metrics: IdServerMetrics) {
    this.open = open;
    this.metrics = metrics;
  }

  /** 200 with the IDs, as strings (JSON numbers stop at 2^53). */
  ids(res: ServerResponse, ids: readonly bigint[], startedMs: number): void {
    let body = '{"ids":[';
    for (let i = 0; i < ids.length; i++) body += i === 0 ? `"${ids[i]}"` : `,"${ids[i]}"`;
    body += "]}";
    if (this.draining || res.headersSent || res.destroyed) {
      this.send(res, 200, jsonHeaders, body, () =>
        this.metrics.request(200, startedMs, ids.length),
      );
      return;
    }
    // The hot path, as send() but without its closures; the body is ASCII.
    res.writeHead(200, { "Content-Type": "application/json", "Content-Length": body.length });
    res.end(res.req.method === "HEAD" ? undefined : body);
    this.metrics.request(200, startedMs, ids.length);
  }

  /** The JSON error answer; `startedMs` for a POST /v1/ids, whose duration is measured. */
  fail(res: ServerResponse, error: HttpError, startedMs?: number): void {
    this.json(res, error.status, errorBodyOf(error), () =>
      this.metrics.request(error.status, startedMs, 0),
    );
  }

  json(res: ServerResponse, status: number, value: unknown, sent: () => void): void {
    this.send(res, status, jsonHeaders, JSON.stringify(value), sent);
  }

  /**
   * `sent` runs once it is written; nothing is written when a response went
   * out already or the connection is gone.
   */
  send(
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
