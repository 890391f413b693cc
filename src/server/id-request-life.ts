/**
 * A POST /v1/ids request's life and its limits: refused before its body
 * (a query string, a compressed body, the drain), its body read within
 * --max-body-bytes and --body-timeout, a slot of --max-in-flight taken
 * once the body is in, its IDs won in this turn's batch (id-batches.ts)
 * within --request-timeout, the answer, and the slot given back when the
 * response closes or the client goes.
 *
 * Each request is one object with plain callbacks: no promise chain, no
 * AbortController and no timer of its own beyond the body's (see
 * request-body.ts and id-batches.ts for why).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Answers } from "./answers.js";
import { drainingError, HttpError, httpErrorOf } from "./http-error.js";
import type { IdBatches, IdWaiter } from "./id-batches.js";
import { countOf, requestRefusal } from "./id-request.js";
import type { JsonLogger } from "./json-log.js";
import type { OpenResponses, OpenWork } from "./open-responses.js";
import { readBody } from "./request-body.js";

export interface IdRequestLimits {
  /** Largest `count` one request may ask for. */
  readonly maxCount: number;
  /** Largest request body, in bytes. */
  readonly maxBodyBytes: number;
  /** Requests whose body is in and that wait for their IDs, at once; more get 503 "overloaded". */
  readonly maxInFlight: number;
  /** How long a body may take to arrive whole after its headers, in milliseconds. */
  readonly bodyTimeoutMs: number;
}

export interface IdRequestParts {
  readonly limits: IdRequestLimits;
  readonly batches: IdBatches;
  readonly answers: Answers;
  readonly open: OpenResponses;
  readonly log: JsonLogger;
  /** Called whenever no request is left reading its body or waiting for IDs (the drain waits for it). */
  readonly idle: () => void;
}

/** The POST /v1/ids requests under way, counted by stage. */
export class IdRequests {
  /** Requests waiting for their IDs (counted against `maxInFlight`). */
  inFlight = 0;
  /** Requests whose body is still arriving. */
  reading = 0;
  readonly parts: IdRequestParts;

  constructor(parts: IdRequestParts) {
    this.parts = parts;
  }

  /** Requests the drain waits for: those reading their body and those waiting for IDs. */
  get pending(): number {
    return this.inFlight + this.reading;
  }

  post(req: IncomingMessage, res: ServerResponse): void {
    const startedMs = performance.now();
    const { answers } = this.parts;
    // A new request on a connection kept open while draining: not one in
    // flight that the drain waits for, so it is told at once to go elsewhere.
    const refusal = answers.draining ? drainingError(false) : requestRefusal(req);
    if (refusal) {
      if (refusal.status === 503) res.setHeader("Retry-After", "1");
      if (refusal.status === 415) res.setHeader("Accept-Encoding", "identity");
      answers.fail(res, refusal, startedMs);
      req.resume();
      return;
    }
    new IdRequest(this, req, res, startedMs);
  }
}

/**
 * One POST /v1/ids from its headers on. The body is read first, bounded by
 * bodyTimeoutMs; only then does the request take a slot of maxInFlight.
 * Counted from its headers, slow bodies (a client stalling, or a flood of
 * them) held every slot for up to the 10 s request timeout and ready
 * requests got 503.
 */
class IdRequest implements OpenWork, IdWaiter {
  private stage: "reading" | "in flight" | "done" = "reading";
  count = 0;
  private readonly requests: IdRequests;
  private readonly res: ServerResponse;
  private readonly startedMs: number;
  private readonly stopRead: () => void;
  /** Set by IdBatches. */
  batch: unknown;
  waiting = false;

  constructor(requests: IdRequests, req: IncomingMessage, res: ServerResponse, startedMs: number) {
    this.requests = requests;
    this.res = res;
    this.startedMs = startedMs;
    const { limits, open } = requests.parts;
    requests.reading++;
    // A client that goes away stops waiting for its IDs (they are never
    // handed out); so does one answered early (the drain, a parse error).
    open.watch(res, this);
    const bodyLimits = { maxBytes: limits.maxBodyBytes, timeoutMs: limits.bodyTimeoutMs };
    this.stopRead = readBody(req, bodyLimits, (error, body) => this.bodyRead(error, body));
  }

  private bodyRead(error: HttpError | undefined, body: string): void {
    if (this.stage !== "reading") return;
    if (error) {
      this.answerError(error);
      return;
    }
    const { requests } = this;
    const { limits, batches } = requests.parts;
    try {
      this.count = countOf(body, limits.maxCount);
    } catch (refusal) {
      this.answerError(refusal);
      return;
    }
    if (requests.inFlight >= limits.maxInFlight) {
      this.answerError(
        new HttpError(
          503,
          "overloaded",
          `${requests.inFlight} request${requests.inFlight === 1 ? "" : "s"} in flight, the limit is ${limits.maxInFlight}: retry later`,
        ),
      );
      return;
    }
    requests.reading--;
    requests.inFlight++;
    this.stage = "in flight";
    batches.add(this);
  }

  served(ids: bigint[]): void {
    // Answered or gone: the IDs are never handed out.
    if (this.stage === "done" || this.res.headersSent) return;
    this.requests.parts.answers.ids(this.res, ids, this.startedMs);
  }

  failed(error: unknown): void {
    this.answerError(error);
  }

  stop(): void {
    this.stopRead();
    this.requests.parts.batches.cancel(this);
  }

  closed(): void {
    if (this.stage === "done") return;
    if (!this.res.writableFinished) this.stop();
    const { requests } = this;
    if (this.stage === "reading") requests.reading--;
    else requests.inFlight--;
    this.stage = "done";
    if (requests.pending === 0) requests.parts.idle();
  }

  private answerError(error: unknown): void {
    const { res } = this;
    if (this.stage === "done" || res.headersSent) return; // nobody to answer, or answered already
    const { answers, log } = this.requests.parts;
    const answer = httpErrorOf(error, log);
    // The rest of a refused or late body must not be read as the next
    // request; the connection is closed after the answer.
    if (answer.status === 413 || answer.status === 408) res.setHeader("Connection", "close");
    // A 503 passes (a timeout, a majority back): say when to try again.
    // Not one that lasts until an operator acts (see HttpError.lasting).
    if (answer.status === 503 && !answer.lasting) res.setHeader("Retry-After", "1");
    answers.fail(res, answer, this.startedMs);
  }
}
