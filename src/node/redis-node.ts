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
  /** Commands sent so far: tells whether anything was sent after a given command. */
  private sentCount = 0;

  constructor(transport: NodeTransport) {
    this.transport = transport;
  }

  get endpoint(): string {
    return this.transport.endpoint;
  }

  command(args: readonly string[], options: CallOptions): Promise<unknown> {
    return this.bounded(() => this.send(args, options.timeoutMs), options);
  }

  /** Runs a script by SHA1; if the node lost its script cache (restart, SCRIPT FLUSH), loads it with EVAL. */
  evalScript(
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
    options: CallOptions,
  ): Promise<unknown> {
    const tail = [String(keys.length), ...keys, ...args];
    return this.bounded((isSettled) => {
      const sequence = this.sentCount + 1;
      return this.send(["EVALSHA", script.sha1, ...tail], options.timeoutMs).catch(
        (error: unknown) => {
          if (!isNoScriptError(error)) throw error;
          // NOSCRIPT: the script did not run, so running it now is safe only
          // if nothing was sent to this node after it and the caller still
          // waits. Otherwise a late EVAL would overtake a later command (say,
          // the release of this very lock) and leave a key behind; the call
          // fails instead (a lost vote) and the script is loaded for the next.
          if (isSettled() || this.sentCount !== sequence) {
            this.send(["SCRIPT", "LOAD", script.source], options.timeoutMs).catch(() => {});
            throw error;
          }
          return this.send(["EVAL", script.source, ...tail], options.timeoutMs);
        },
      );
    }, options);
  }

  close(): Promise<void> {
    return this.transport.close();
  }

  private send(args: readonly string[], timeoutMs: number): Promise<unknown> {
    this.sentCount++;
    return this.transport.send(args, timeoutMs);
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
