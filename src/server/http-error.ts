/**
 * The ID server's error answers: an HTTP status, a stable code and a
 * sentence saying what was wrong and what is allowed, sent as JSON,
 * `{"error": {"code": "…", "message": "…"}}`; and which status each kind
 * of failure gets: node's HTTP parser's errors, and the library's.
 *
 * The statuses a client must tell apart: 400/404/405/408/413/415/431 its
 * request is wrong; 503 try again later, on this or another instance
 * (overloaded, timeout, draining, or the cluster cannot serve; without
 * Retry-After when only an operator can end it: a refused node list); 507 the ID
 * space is used up, retrying will not help (see idSpaceExhaustedStatus).
 */
import { maxHeaderSize } from "node:http";
import { NodeConfigurationError, NotInitializedError, RedquorumError } from "../errors.js";
import { notInitializedMessage } from "../id/not-initialized.js";
import type { JsonLogger } from "./json-log.js";

/** The JSON error body: a stable code and a sentence saying what was wrong and what is allowed. */
export interface ErrorBody {
  readonly code: string;
  readonly message: string;
}

export class HttpError extends Error {
  /**
   * A 503 that lasts until an operator acts (a refused node list): it gets
   * no Retry-After, which would ask every client to come back within a
   * second for as long as it lasts.
   */
  readonly lasting: boolean;

  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    options: { lasting?: boolean } = {},
  ) {
    super(message);
    this.lasting = options.lasting ?? false;
  }
}

/** Every error's JSON body, `{"error": {"code", "message"}}`. */
export function errorBodyOf(error: HttpError): { error: ErrorBody } {
  return { error: { code: error.code, message: error.message } };
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

/** Library errors that mean "the cluster cannot serve now": 503, try again later. */
const unavailableCodes = new Set([
  "ERR_QUORUM",
  "ERR_NODE",
  "ERR_NODE_TIMEOUT",
  "ERR_NOT_INITIALIZED",
  "ERR_CONTENTION",
  "ERR_QUEUE_FULL",
  "ERR_CLOSED",
]);

/**
 * The answer to a failure while serving a request: an HttpError as it is,
 * a library error by its code (503 when the cluster cannot serve now, 507
 * at the end of the ID space), anything else a logged 500.
 */
export function httpErrorOf(error: unknown, log: JsonLogger): HttpError {
  if (error instanceof HttpError) return error;
  if (error instanceof RedquorumError && error.code === "ERR_ID_OVERFLOW") {
    // Expected at the end of the ID space, not a bug: no stack.
    log.warn("ID space exhausted", { code: error.code, error: error.message });
    return new HttpError(idSpaceExhaustedStatus, error.code, error.message);
  }
  if (error instanceof NodeConfigurationError) {
    // NextId rejects with one only as its refusal (the node list does not
    // fit the cluster's members, or a node failed its configuration check
    // at first contact), which stops this server's every request until it
    // is restarted with a list that fits: 503, the cluster cannot serve
    // here, another instance may; no Retry-After, nor a stack per request
    // (the refusal is logged when found).
    return new HttpError(503, error.code, error.message, { lasting: true });
  }
  if (error instanceof NotInitializedError) {
    // The library's text says "call init()": the server's operator runs a
    // command, with the server's --key. No stack: a setup step, not a bug.
    const answer = new HttpError(
      503,
      error.code,
      notInitializedMessage(error, "this server's --nodes"),
    );
    log.warn("ID counter not initialised", { code: error.code, error: answer.message });
    return answer;
  }
  if (error instanceof RedquorumError && unavailableCodes.has(error.code)) {
    return new HttpError(503, error.code, error.message);
  }
  log.error("request failed", {
    error: error instanceof Error ? (error.stack ?? error.message) : String(error),
  });
  const code = error instanceof RedquorumError ? error.code : "internal";
  return new HttpError(500, code, error instanceof Error ? error.message : String(error));
}

/**
 * The JSON answer to an error of node's HTTP parser, or undefined for none
 * (the client went away). `clientTimeoutMs`: node's bound on a whole
 * request, which its timeout error names.
 */
export function clientRefusal(
  error: NodeJS.ErrnoException,
  clientTimeoutMs: number,
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
        `the request did not arrive whole within ${clientTimeoutMs / 1_000} s: send it at once`,
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

/** A request on a connection kept open while draining: told at once to go elsewhere. */
export function drainingError(stoppedWaiting: boolean): HttpError {
  return new HttpError(
    503,
    "draining",
    stoppedWaiting
      ? "the server is shutting down and stopped waiting for this request: retry, on another instance"
      : "the server is shutting down: retry, on another instance",
  );
}
