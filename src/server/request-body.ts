/**
 * Reading a POST body, bounded in size and in time. The time bound is the
 * body's own, shorter than node's bound on the whole request: a request
 * counts against --max-in-flight only once its body is in, so a client
 * that sends headers and then its body slowly (or never) holds a
 * connection for at most this long, and never a slot that ready requests
 * need.
 *
 * Callbacks, not a promise and an AbortSignal: this runs once per request
 * on the server's hot path, where an AbortController alone cost more than
 * the rest of the read.
 */
import type { IncomingMessage } from "node:http";
import { HttpError } from "./http-error.js";

export interface BodyLimits {
  /** Largest body, in bytes: 413 beyond it. */
  readonly maxBytes: number;
  /** How long the body may take to arrive whole from its headers, in milliseconds: 408 then. */
  readonly timeoutMs: number;
}

/**
 * Reads the request body as text and calls `done` once: with the body, or
 * with a 413 once it passes `maxBytes` (also when Content-Length says so
 * up front), or a 408 `body_timeout` after `timeoutMs`. What is left of
 * a refused body is read and dropped, not kept. The returned function
 * stops the read (`done` is then never called): the caller's, when the
 * client goes mid-body.
 */
export function readBody(
  req: IncomingMessage,
  limits: BodyLimits,
  done: (error: HttpError | undefined, body: string) => void,
): () => void {
  return new BodyRead(req, limits, done).stop;
}

class BodyRead {
  private readonly req: IncomingMessage;
  private readonly done: (error: HttpError | undefined, body: string) => void;
  private readonly maxBytes: number;
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private settled = false;
  private readonly timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    req: IncomingMessage,
    limits: BodyLimits,
    done: (error: HttpError | undefined, body: string) => void,
  ) {
    this.req = req;
    this.done = done;
    this.maxBytes = limits.maxBytes;
    if (Number(req.headers["content-length"]) > limits.maxBytes) {
      // Reported on the next tick, as every other outcome: the caller has
      // the stop function by then.
      this.settled = true;
      req.resume();
      process.nextTick(done, tooLarge(limits.maxBytes), "");
      return;
    }
    const { timeoutMs } = limits;
    this.timer = setTimeout(
      () =>
        this.fail(
          new HttpError(
            408,
            "body_timeout",
            `the body did not arrive whole within ${timeoutMs} ms of its headers, ` +
              "the server's body timeout: send it with them",
          ),
        ),
      timeoutMs,
    );
    // No 'error' or 'close' listener: a client gone mid-body closes the
    // response too, which stops the read (OpenResponses), and node emits
    // a request's 'error' only to a listener.
    req.on("data", this.onData);
    req.on("end", this.onEnd);
  }

  readonly stop = (): void => {
    if (this.settled) return;
    this.settle();
    this.req.resume(); // the rest is dropped as it comes
  };

  private readonly onData = (chunk: Buffer): void => {
    this.size += chunk.length;
    if (this.size > this.maxBytes) this.fail(tooLarge(this.maxBytes));
    else this.chunks.push(chunk);
  };

  private readonly onEnd = (): void => {
    if (this.settled) return;
    this.settle();
    const { chunks } = this;
    const body =
      chunks.length === 1 ? chunks[0]!.toString("utf8") : Buffer.concat(chunks).toString("utf8");
    this.done(undefined, body);
  };

  private fail(error: HttpError): void {
    if (this.settled) return;
    this.stop();
    this.done(error, "");
  }

  private settle(): void {
    this.settled = true;
    clearTimeout(this.timer);
    const { req } = this;
    req.off("data", this.onData);
    req.off("end", this.onEnd);
  }
}

function tooLarge(maxBytes: number): HttpError {
  return new HttpError(
    413,
    "body_too_large",
    `the body is larger than ${maxBytes} bytes, the limit`,
  );
}
