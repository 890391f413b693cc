import { raceAbort } from "../clock.js";
import { NodeError, NodeTimeoutError } from "../errors.js";
import { defaults, limits } from "../limits.js";
import { batchCall, isNoScriptError, type LuaScript } from "./lua-script.js";
import type { NodeTransport } from "./transport.js";

/** How long a script call may wait for a connection that is still being opened. */
const connectWaitMs = 1_000;

export interface CallOptions {
  /** Bound on the whole call. */
  timeoutMs: number;
  signal?: AbortSignal | undefined;
}

/** One call waiting in a batch: its arguments and its caller's promise. */
interface BatchEntry {
  readonly keys: readonly string[];
  readonly args: readonly string[];
  readonly resolve: (reply: unknown) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * One Redis master as the algorithms see it: commands bounded by a timeout
 * and an optional signal, with failures as `NodeError`s naming this node (an
 * abort comes out as the signal's reason), and scripts by SHA1.
 */
export class RedisNode {
  readonly transport: NodeTransport;
  /** Calls of one batchable script made in this tick, not sent yet (see `evalScript`). */
  private batch: { readonly script: LuaScript; readonly entries: BatchEntry[] } | undefined;
  /**
   * Scripts sent so far: tells whether another script (which may write) was
   * sent after a given one. Reads such as INFO or SCRIPT LOAD do not count.
   */
  private scriptsSent = 0;
  /** Commands sent and not settled yet, a batch counting each call it carries (see `send`). */
  private outstandingCount = 0;
  /** When a command last settled, or the node last went from idle to busy. */
  private silentSinceMs = 0;
  /** How long the node may answer nothing before new calls fail at once (the owner's `nodeStallMs`). */
  private readonly stallMs: number;
  /**
   * The membership stamp this node's votes carry ("<cluster id>:<epoch>",
   * "" where the client found no record): set by the group's checks
   * (membership/view.ts), sent as the last argument of every script that
   * checks membership (membership/check.ts).
   */
  membershipStamp = "";

  /**
   * The database the node's URL or ioredis client names, when above 0:
   * each check confirms the server has it (node/inspect.ts, `selectDatabase`).
   */
  readonly database: number | undefined;

  constructor(transport: NodeTransport, stallMs: number = defaults.nodeStallMs, database?: number) {
    this.transport = transport;
    this.stallMs = stallMs;
    this.database = database;
  }

  get endpoint(): string {
    return this.transport.endpoint;
  }

  /** The transport's connection epoch (see `NodeTransport.epoch`); 0 if it has none. */
  get epoch(): number {
    return this.transport.epoch ?? 0;
  }

  /** Commands sent to this node and not answered (nor failed) yet; a batch counts each call it carries. */
  get outstanding(): number {
    return this.outstandingCount;
  }

  command(args: readonly string[], { timeoutMs, signal }: CallOptions): Promise<unknown> {
    this.flushBatch();
    // A reply after the timeout is dropped by raceAbort, never left unhandled.
    const reply = this.send(args, timeoutMs).catch((error: unknown) => {
      throw error instanceof NodeError ? error : new NodeError(this.endpoint, error);
    });
    return raceAbort(reply, signal, timeoutMs, () => this.timeoutError(timeoutMs));
  }

  /** The error of a call that got no reply within `timeoutMs`: with why, if the connection was not ready. */
  timeoutError(timeoutMs: number): NodeTimeoutError {
    // Read in a timer: a caller's transport whose getter throws must not
    // turn a timeout into an uncaught exception.
    let notReady: string | undefined;
    try {
      notReady = this.transport.notReady;
    } catch {
      notReady = undefined;
    }
    return new NodeTimeoutError(this.endpoint, timeoutMs, notReady);
  }

  /**
   * Runs a script by SHA1; if the node lost its script cache (restart, SCRIPT
   * FLUSH), loads it with EVAL. Not bounded here: the round that sends it
   * bounds all its calls with one timer (see `runRound`).
   *
   * Calls of a batchable script (the lock's acquire and release) made in
   * the same tick while the node has several calls in flight
   * (`limits.scriptBatchFromOutstanding`) go out as one call
   * (`LuaScript.batchable`), at the end of the tick or before any other
   * command to this node, whichever comes first: commands still reach the
   * node in the order they were made, and many concurrent locks cost Redis
   * and the client about one command per node and tick instead of one per
   * lock. Otherwise a call goes out at once, as itself.
   */
  evalScript(
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
  ): Promise<unknown> {
    if (this.batch && this.batch.script !== script) this.flushBatch();
    if (!script.batches) return this.sendScript(script, keys, args);
    if (!this.batch) {
      // With few calls in flight a call goes out at once, as itself (one
      // worker's rounds; a late reply of its last round): a batch goes out
      // in a write of its own at the end of the tick, which costs that case
      // more than a batch saves. With more, the tick's calls gather.
      if (this.outstandingCount < limits.scriptBatchFromOutstanding) {
        return this.sendScript(script, keys, args);
      }
      this.batch = { script, entries: [] };
      process.nextTick(() => this.flushBatch());
    }
    const { entries } = this.batch;
    const reply = new Promise((resolve, reject) => entries.push({ keys, args, resolve, reject }));
    if (entries.length >= limits.scriptBatchMax) this.flushBatch();
    return reply;
  }

  /** Sends the calls batched so far (see `evalScript`), and gives each its own reply. */
  private flushBatch(): void {
    const batch = this.batch;
    if (!batch) return;
    this.batch = undefined;
    const { script, entries } = batch;
    if (entries.length === 1) {
      const [entry] = entries as [BatchEntry];
      this.sendScript(script, entry.keys, entry.args).then(entry.resolve, entry.reject);
      return;
    }
    const call = batchCall(entries);
    this.sendScript(script, call.keys, call.args, entries.length).then(
      (replies) => {
        if (!Array.isArray(replies) || replies.length !== entries.length) {
          const error = new Error(
            `a batch of ${entries.length} ${script.name} calls got a reply that is not one per call`,
          );
          for (const entry of entries) entry.reject(error);
          return;
        }
        entries.forEach((entry, i) => {
          const reply: unknown = replies[i];
          if (reply instanceof Error) entry.reject(reply);
          else entry.resolve(reply);
        });
      },
      (error: unknown) => {
        for (const entry of entries) entry.reject(error);
      },
    );
  }

  /** `calls`: how many calls it carries (a batch's entries), each counted against the node's bound. */
  private sendScript(
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
    calls = 1,
  ): Promise<unknown> {
    // One array, built in place (it is made for every call): EVALSHA, the
    // SHA1, the key count, the keys, the arguments[, the stamp]. The EVAL
    // below copies it with the source in the SHA1's place.
    const command: string[] = ["EVALSHA", script.sha1, String(keys.length)];
    for (const key of keys) command.push(key);
    for (const arg of args) command.push(arg);
    if (script.checksMembership) command.push(this.membershipStamp);
    const sequence = ++this.scriptsSent;
    return this.send(command, connectWaitMs, calls).catch((error: unknown) => {
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
      const evalCommand = command.slice();
      evalCommand[0] = "EVAL";
      evalCommand[1] = script.source;
      return this.send(evalCommand, connectWaitMs, calls);
    });
  }

  /** SCRIPT LOAD: done on first contact so the first EVALSHA finds the script. */
  loadScript(script: LuaScript, timeoutMs = connectWaitMs): Promise<unknown> {
    return this.command(["SCRIPT", "LOAD", script.source], { timeoutMs });
  }

  close(): Promise<void> {
    this.flushBatch();
    return this.transport.close();
  }

  /**
   * `connectTimeoutMs` bounds only waiting for a connection that is being
   * opened. A call that times out leaves its command waiting on the
   * connection until the node answers it: on a stalled node, every round
   * would leave one more (FAULTS.md I15). So what is outstanding is
   * counted and bounded: a node that has answered nothing for
   * `stallMs` (the owner's `nodeStallMs`), or has `outstandingCommandsMax` commands waiting, fails
   * new calls at once; once it answers again it is used again.
   */
  private send(
    args: readonly string[],
    connectTimeoutMs = connectWaitMs,
    calls = 1,
  ): Promise<unknown> {
    if (this.outstandingCount === 0) this.silentSinceMs = performance.now();
    else {
      const refusal = this.refusal(calls);
      if (refusal) return Promise.reject(refusal);
    }
    this.outstandingCount += calls;
    let reply: Promise<unknown>;
    try {
      // Promise.resolve: a transport (a public interface) that broke its
      // contract and returned a plain value must not leave this count raised.
      reply = Promise.resolve(this.transport.send(args, connectTimeoutMs));
    } catch (error) {
      this.settled(calls);
      return Promise.reject(error);
    }
    // Settled also by a failure: the transport no longer waits on the node for it.
    return reply.then(
      (value) => {
        this.settled(calls);
        return value;
      },
      (error: unknown) => {
        this.settled(calls);
        throw error;
      },
    );
  }

  private settled(calls: number): void {
    this.outstandingCount -= calls;
    this.silentSinceMs = performance.now();
  }

  private refusal(calls: number): NodeError | undefined {
    const count = this.outstandingCount;
    if (count + calls > limits.outstandingCommandsMax) {
      return new NodeError(
        this.endpoint,
        new Error(
          `${count} commands unanswered, at most ${limits.outstandingCommandsMax} may wait` +
            (calls > 1 ? ` (this one carries ${calls} batched calls)` : ""),
        ),
      );
    }
    const silentMs = performance.now() - this.silentSinceMs;
    if (silentMs >= this.stallMs) {
      return new NodeError(
        this.endpoint,
        new Error(`stalled: ${count} commands unanswered for ${Math.round(silentMs)} ms`),
      );
    }
    return undefined;
  }
}
