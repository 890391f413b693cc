/**
 * Reading a POST body, bounded in size and in time. The time bound is the
 * body's own, shorter than node's bound on the whole request: a request
 * counts against --max-in-flight only once its body is in, so a client
 * that sends headers and then its body slowly (or never) holds a
 * connection for at most this long, and never a slot that ready requests
 * need.
 */
import type { IncomingMessage } from "node:http";
import { HttpError } from "./http-error.js";

export interface BodyLimits {
  /** Largest body, in bytes: 413 beyond it. */
  readonly maxBytes: number;
  /** How long the body may take to arrive whole from its headers, in milliseconds: 408 then. */
  readonly timeoutMs: number;
  /** Stops the read (the client answered another way, or gone): rejects with its reason. */
  readonly signal: AbortSignal;
}

/**
 * The request body as text. Rejects with a 413 once it passes `maxBytes`
 * (also when Content-Length says so up front), a 408 `body_timeout` after
 * `timeoutMs`, the signal's reason when it aborts, a 400 `aborted` when
 * the client goes mid-body. What is left of a refused body is read and
 * dropped, not kept.
 */
export function readBody(req: IncomingMessage, limits: BodyLimits): Promise<string> {
  const { maxBytes, timeoutMs, signal } = limits;
  const declared = Number(req.headers["content-length"]);
  if (declared > maxBytes) {
    req.resume();
    return Promise.reject(tooLarge(maxBytes));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) fail(tooLarge(maxBytes));
      else chunks.push(chunk);
    };
    const onEnd = () => {
      settle();
      resolve(Buffer.concat(chunks).toString("utf8"));
    };
    // A client gone mid-body: settle, so nothing waits for an end that never comes.
    const onClose = () => {
      if (!req.complete) fail(new HttpError(400, "aborted", "the request ended before its body"));
    };
    const onAbort = () => fail(signal.reason);
    const timer = setTimeout(
      () =>
        fail(
          new HttpError(
            408,
            "body_timeout",
            `the body did not arrive whole within ${timeoutMs} ms of its headers, ` +
              "the server's body timeout: send it with them",
          ),
        ),
      timeoutMs,
    );
    const settle = () => {
      clearTimeout(timer);
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", fail);
      req.off("close", onClose);
      signal.removeEventListener("abort", onAbort);
    };
    function fail(error: unknown): void {
      settle();
      req.resume(); // the rest is dropped as it comes
      reject(error);
    }
    if (signal.aborted) {
      fail(signal.reason);
      return;
    }
    req.on("data", onData);
    req.once("end", onEnd);
    req.once("error", fail);
    req.once("close", onClose);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

function tooLarge(maxBytes: number): HttpError {
  return new HttpError(
    413,
    "body_too_large",
    `the body is larger than ${maxBytes} bytes, the limit`,
  );
}
