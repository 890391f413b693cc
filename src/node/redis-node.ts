import { NodeError, NodeTimeoutError } from "../errors.js";
import { isNoScriptError, type LuaScript } from "./lua-script.js";
import type { NodeTransport } from "./transport.js";

export interface CallOptions {
  /** Bound on the whole call, including EVALSHA → EVAL recovery. */
  timeoutMs: number;
  signal?: AbortSignal | undefined;
}

/**
 * One Redis master as the algorithms see it. Every call is bounded by a
 * timeout and an optional signal, and every failure comes out as a
 * `NodeError` naming this node (an abort comes out as the signal's reason).
 */
export class RedisNode {
  readonly transport: NodeTransport;

  constructor(transport: NodeTransport) {
    this.transport = transport;
  }

  get endpoint(): string {
    return this.transport.endpoint;
  }

  command(args: readonly string[], options: CallOptions): Promise<unknown> {
    return this.bounded(() => this.transport.send(args, options.timeoutMs), options);
  }

  /** Runs a script by SHA1; if the node lost its script cache (restart, SCRIPT FLUSH), loads it with EVAL. */
  evalScript(
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
    options: CallOptions,
  ): Promise<unknown> {
    const tail = [String(keys.length), ...keys, ...args];
    return this.bounded(
      (isSettled) =>
        this.transport
          .send(["EVALSHA", script.sha1, ...tail], options.timeoutMs)
          .catch((error: unknown) => {
            // NOSCRIPT means the script did not run, so sending it again is
            // safe - unless the caller already gave up on this call: then a
            // late EVAL could land after the caller's cleanup (a release sent
            // meanwhile) and leave a key behind.
            if (!isNoScriptError(error) || isSettled()) throw error;
            return this.transport.send(["EVAL", script.source, ...tail], options.timeoutMs);
          }),
      options,
    );
  }

  close(): Promise<void> {
    return this.transport.close();
  }

  private bounded<T>(
    work: (isSettled: () => boolean) => Promise<T>,
    { timeoutMs, signal }: CallOptions,
  ): Promise<T> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const settle = () => {
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      };
      const onAbort = () => {
        if (settled) return;
        settle();
        reject(signal?.reason);
      };
      const timer = setTimeout(() => {
        if (settled) return;
        settle();
        reject(new NodeTimeoutError(this.endpoint, timeoutMs));
      }, timeoutMs);
      signal?.addEventListener("abort", onAbort, { once: true });
      let pending: Promise<T>;
      try {
        pending = work(() => settled);
      } catch (error) {
        pending = Promise.reject(error);
      }
      // A reply that arrives after the timeout is dropped here, never left unhandled.
      pending.then(
        (value) => {
          if (settled) return;
          settle();
          resolve(value);
        },
        (error: unknown) => {
          if (settled) return;
          settle();
          reject(error instanceof NodeError ? error : new NodeError(this.endpoint, error));
        },
      );
    });
  }
}
