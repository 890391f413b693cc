import { raceAbort } from "../clock.js";
import { NodeError, NodeTimeoutError } from "../errors.js";
import { isNoScriptError, type LuaScript } from "./lua-script.js";
import type { NodeTransport } from "./transport.js";

/** How long a script call may wait for a connection that is still being opened. */
const connectWaitMs = 1_000;

export interface CallOptions {
  /** Bound on the whole call. */
  timeoutMs: number;
  signal?: AbortSignal | undefined;
}

/**
 * One Redis master as the algorithms see it: commands bounded by a timeout
 * and an optional signal, with failures as `NodeError`s naming this node (an
 * abort comes out as the signal's reason), and scripts by SHA1.
 */
export class RedisNode {
  readonly transport: NodeTransport;
  /**
   * Scripts sent so far: tells whether another script (which may write) was
   * sent after a given one. Reads such as INFO or SCRIPT LOAD do not count.
   */
  private scriptsSent = 0;

  constructor(transport: NodeTransport) {
    this.transport = transport;
  }

  get endpoint(): string {
    return this.transport.endpoint;
  }

  command(args: readonly string[], { timeoutMs, signal }: CallOptions): Promise<unknown> {
    // A reply after the timeout is dropped by raceAbort, never left unhandled.
    const reply = this.send(args, timeoutMs).catch((error: unknown) => {
      throw error instanceof NodeError ? error : new NodeError(this.endpoint, error);
    });
    return raceAbort(
      reply,
      signal,
      timeoutMs,
      () => new NodeTimeoutError(this.endpoint, timeoutMs),
    );
  }

  /**
   * Runs a script by SHA1; if the node lost its script cache (restart, SCRIPT
   * FLUSH), loads it with EVAL. Not bounded here: the round that sends it
   * bounds all its calls with one timer (see `runRound`).
   */
  evalScript(
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
  ): Promise<unknown> {
    const tail = [String(keys.length), ...keys, ...args];
    const sequence = ++this.scriptsSent;
    return this.send(["EVALSHA", script.sha1, ...tail]).catch((error: unknown) => {
      if (!isNoScriptError(error)) throw error;
      // NOSCRIPT: the script did not run, so running it now is safe only if
      // nothing was sent to this node after it: one connection keeps order,
      // and a late EVAL must not overtake a later command (say, the release
      // of this very lock) and leave a key behind. Otherwise the call fails
      // (a lost vote) and the script is loaded for the calls that follow.
      if (this.scriptsSent !== sequence) {
        this.loadScript(script).catch(() => {});
        throw error;
      }
      return this.send(["EVAL", script.source, ...tail]);
    });
  }

  /** SCRIPT LOAD: done on first contact so the first EVALSHA finds the script. */
  loadScript(script: LuaScript, timeoutMs = connectWaitMs): Promise<unknown> {
    return this.command(["SCRIPT", "LOAD", script.source], { timeoutMs });
  }

  close(): Promise<void> {
    return this.transport.close();
  }

  /** `connectTimeoutMs` bounds only waiting for a connection that is being opened. */
  private send(args: readonly string[], connectTimeoutMs = connectWaitMs): Promise<unknown> {
    return this.transport.send(args, connectTimeoutMs);
  }
}
