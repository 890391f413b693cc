import { raceAbort } from "../clock.js";
import { NodeError, NodeTimeoutError } from "../errors.js";
import { limits } from "../limits.js";
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
  /** Commands sent and not settled yet (see `send`). */
  private outstandingCount = 0;
  /** When a command last settled, or the node last went from idle to busy. */
  private silentSinceMs = 0;

  constructor(transport: NodeTransport) {
    this.transport = transport;
  }

  get endpoint(): string {
    return this.transport.endpoint;
  }

  /** The transport's connection epoch (see `NodeTransport.epoch`); 0 if it has none. */
  get epoch(): number {
    return this.transport.epoch ?? 0;
  }

  /** Commands sent to this node and not answered (nor failed) yet. */
  get outstanding(): number {
    return this.outstandingCount;
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

  /**
   * `connectTimeoutMs` bounds only waiting for a connection that is being
   * opened. A call that times out leaves its command waiting on the
   * connection until the node answers it: on a stalled node, every round
   * would leave one more (FAULTS.md I15). So what is outstanding is
   * counted and bounded: a node that has answered nothing for
   * `nodeStallMs`, or has `outstandingCommandsMax` commands waiting, fails
   * new calls at once; once it answers again it is used again.
   */
  private send(args: readonly string[], connectTimeoutMs = connectWaitMs): Promise<unknown> {
    if (this.outstandingCount === 0) this.silentSinceMs = performance.now();
    else {
      const refusal = this.refusal();
      if (refusal) return Promise.reject(refusal);
    }
    this.outstandingCount++;
    let reply: Promise<unknown>;
    try {
      reply = this.transport.send(args, connectTimeoutMs);
    } catch (error) {
      this.settled();
      return Promise.reject(error);
    }
    // Settled also by a failure: the transport no longer waits on the node for it.
    return reply.then(
      (value) => {
        this.settled();
        return value;
      },
      (error: unknown) => {
        this.settled();
        throw error;
      },
    );
  }

  private settled(): void {
    this.outstandingCount--;
    this.silentSinceMs = performance.now();
  }

  private refusal(): NodeError | undefined {
    const count = this.outstandingCount;
    if (count >= limits.outstandingCommandsMax) {
      return new NodeError(
        this.endpoint,
        new Error(
          `${count} commands unanswered, at most ${limits.outstandingCommandsMax} may wait`,
        ),
      );
    }
    const silentMs = performance.now() - this.silentSinceMs;
    if (silentMs >= limits.nodeStallMs) {
      return new NodeError(
        this.endpoint,
        new Error(`stalled: ${count} commands unanswered for ${Math.round(silentMs)} ms`),
      );
    }
    return undefined;
  }
}
