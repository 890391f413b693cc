import { Redis, type RedisOptions } from "ioredis";
import { othersUnderWay, writesFlushed } from "./rounds-under-way.js";
import type { NodeTransport, Subscription } from "./transport.js";

/**
 * The part of an ioredis client we use, matched structurally so a client of
 * any supported ioredis version (5.2.5 or later, 6.x) fits, whichever copy of
 * ioredis redquorum itself got: nothing here names ioredis' own types.
 */
export interface IoredisLike {
  status: string;
  options: { host?: string; port?: number; path?: string; keyPrefix?: string; db?: number };
  call(command: string, ...args: string[]): Promise<unknown>;
  connect(): Promise<void>;
  /** `reconnect`: drop the connection and open a new one (ioredis' own argument). */
  disconnect(reconnect?: boolean): void;
  once(event: string, listener: (...args: unknown[]) => void): unknown;
  removeListener(event: string, listener: (...args: unknown[]) => void): unknown;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  /** Typed loosely: each ioredis version has its own `RedisOptions`. */
  duplicate?(options?: object): unknown;
  /** The connection's socket (ioredis exposes it); corked to batch a tick's commands. */
  stream?: {
    cork(): void;
    uncork(): void;
    on?(event: "data", listener: (chunk: unknown) => void): unknown;
    removeListener?(event: "data", listener: (chunk: unknown) => void): unknown;
  };
}

/**
 * Disconnects an owned client and resolves once it has ended: its socket
 * closed and no reconnect pending, so nothing of it is open when close()
 * resolves. ioredis ends the socket (flushing what was written) and
 * destroys it after `disconnectTimeout` at the latest; the bound is a
 * backstop should a client never report "end".
 */
function disconnected(client: IoredisLike): Promise<void> {
  if (client.status === "end") return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(backstop);
      client.removeListener("end", done);
      resolve();
    };
    const backstop = setTimeout(done, ownClientOptions.disconnectTimeout! * 4);
    client.once("end", done);
    client.disconnect();
    // Between two connection attempts (a node down), ioredis only cancels
    // the next one: no socket is open, and no "end" follows. Waiting for it
    // held close() for the backstop, once per connection.
    if (client.status === "reconnecting") done();
  });
}

/**
 * How long a connection of ours may take to open its socket, and then again
 * to be ready (ioredis' ready check answered). ioredis bounds only the
 * first: a socket that connects to something that never answers (a process
 * that took the port while the node was down, a proxy holding the
 * connection) would keep the node unusable for as long as that lives.
 */
const connectTimeoutMs = 2_000;

/** What `watchUntilReady` does besides reading the socket. */
interface ReadyWatch {
  /** Drop a connection whose ready check got no answer (ours only); told why first. */
  readonly drop?: boolean;
  readonly onDrop?: (error: Error) => void;
  /** Told what the ready check's INFO said (true: loading its data set), and false once ready or closed. */
  readonly onLoading?: (loading: boolean) => void;
}

/**
 * Reads a connection's socket from its opening until it is ready. Before
 * that the server sends the handshake's replies (CLIENT SETINFO, AUTH,
 * SELECT) and the ready check's INFO, which ioredis repeats while the
 * server says it is loading its data set ("loading:1"): `onLoading` hears
 * that. With `drop`, a connection whose ready check got no answer
 * `connectTimeoutMs` after it opened is dropped (as a dropped connection
 * is: what waits for it fails, or waits on) and ioredis opens another by
 * its retry strategy. The ready check's answer ends that bound: a server
 * loading its data must not be dropped every 2 s meanwhile. The
 * handshake's replies do not: a proxy whose upstream is gone can answer
 * those and then nothing, and would keep the node unusable for good.
 * Returns what removes the watch from the client (for a caller's client).
 */
function watchUntilReady(client: IoredisLike, watch: ReadyWatch): () => void {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let watched: IoredisLike["stream"];
  const onData = (chunk: unknown) => {
    if (client.status !== "connect") return stop();
    const text = Buffer.isBuffer(chunk) ? chunk.toString("latin1") : String(chunk);
    if (!text.includes("loading:")) return;
    clearTimeout(timer);
    timer = undefined;
    watch.onLoading?.(text.includes("loading:1"));
  };
  const stop = () => {
    clearTimeout(timer);
    timer = undefined;
    watched?.removeListener?.("data", onData);
    watched = undefined;
    watch.onLoading?.(false);
  };
  const onConnect = () => {
    stop();
    watched = client.stream;
    watched?.on?.("data", onData);
    if (!watch.drop) return;
    timer = setTimeout(() => {
      timer = undefined;
      if (client.status !== "connect") return;
      watch.onDrop?.(
        new Error(
          `no answer within ${connectTimeoutMs} ms of connecting (is a Redis server listening there?)`,
        ),
      );
      client.disconnect(true);
    }, connectTimeoutMs);
    timer.unref?.();
  };
  client.on("connect", onConnect);
  client.on("ready", stop);
  client.on("close", stop);
  client.on("end", stop);
  return () => {
    for (const event of ["ready", "close", "end"]) client.removeListener(event, stop);
    client.removeListener("connect", onConnect);
    stop();
  };
}

export function isIoredisLike(value: unknown): value is IoredisLike {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as IoredisLike).status === "string" &&
    typeof (value as IoredisLike).call === "function" &&
    typeof (value as IoredisLike).connect === "function" &&
    // Listened to from the start (and let go on close): an object without
    // them would fail deep inside the transport, untyped.
    typeof (value as IoredisLike).on === "function" &&
    typeof (value as IoredisLike).removeListener === "function"
  );
}

/**
 * Options for the connections redquorum opens itself. Two matter for safety:
 * no offline queue and no automatic resend, so a command that timed out is
 * never replayed later on a new connection (a late `SET NX` would recreate a
 * lock key after we gave up on it); pending commands fail when the connection
 * drops instead of waiting for a reconnect.
 */
const ownClientOptions: RedisOptions = {
  lazyConnect: true,
  enableOfflineQueue: false,
  autoResendUnfulfilledCommands: false,
  maxRetriesPerRequest: 0,
  connectTimeout: connectTimeoutMs,
  retryStrategy: (attempt: number) => Math.min(attempt * 50, 1_000),
  // close() ends the socket and destroys it if it is not closed after this
  // long. ioredis's 2 s default kept a process alive 2 s after close()
  // whenever a node was down (the refused socket never closes again). What
  // was written before close() is flushed first; a write still stuck after
  // this long was to a stalled node, whose keys expire by their TTL.
  disconnectTimeout: 250,
};

/**
 * The pub/sub connection: unlike the command connection it may queue while
 * connecting and resubscribes after a reconnect (SUBSCRIBE is idempotent;
 * the messages lost meanwhile are made up for by `onResubscribed`).
 */
const subscriberOptions: RedisOptions = {
  ...ownClientOptions,
  lazyConnect: false,
  enableOfflineQueue: true,
  autoResubscribe: true,
  maxRetriesPerRequest: null,
};

/** A command waiting for the connection being opened (see `park`). */
interface Parked {
  readonly command: string;
  readonly rest: readonly string[];
  readonly resolve: (reply: unknown) => void;
  readonly reject: (error: unknown) => void;
  readonly timer: ReturnType<typeof setTimeout>;
}

/** The transports written in this tick: `endTick` ends it for all of them (see `beforeWrite`). */
let writtenThisTick: IoredisTransport[] = [];
/** The other of the two lists `endTick` alternates between (no new array per tick). */
let endedLastTick: IoredisTransport[] = [];

function endTick(): void {
  // Swapped out first: a transport written while these end starts a new tick.
  const ending = writtenThisTick;
  writtenThisTick = endedLastTick;
  for (const transport of ending) transport.tickEnded();
  ending.length = 0;
  endedLastTick = ending;
  writesFlushed();
}

/** Statuses in which the connection is down and not being opened yet. */
function isDown(status: string): boolean {
  return status === "reconnecting" || status === "end" || status === "close";
}

export class IoredisTransport implements NodeTransport {
  readonly endpoint: string;
  private readonly client: IoredisLike;
  private readonly openSubscriber: (() => Redis) | undefined;
  private readonly owned: boolean;
  private lastError: unknown;
  /** Commands written on this connection in this tick (see `beforeWrite`). */
  private tickWrites = 0;
  /** The socket corked until the end of this tick, if one is. */
  private corkedStream: { uncork(): void } | undefined;
  /** Commands issued while the owned connection was being opened, in issue order. */
  private readonly parked: Parked[] = [];
  private closes = 0;
  /** The ready check's INFO said the server is loading its data set (ioredis asks again later). */
  private loading = false;
  /** Removes the watch of the connection until ready (`watchUntilReady`). */
  private readonly unwatch: () => void;
  private readonly onReady = () => this.releaseParked();
  // "end" alone when the connection could not even be attempted.
  private readonly onDown = () => this.failParked(this.downError("closed before it was ready"));
  private readonly onClose = () => {
    this.closes++;
    this.onDown();
  };

  private constructor(
    client: IoredisLike,
    owned: boolean,
    endpoint: string,
    openSubscriber: (() => Redis) | undefined,
  ) {
    this.client = client;
    this.openSubscriber = openSubscriber;
    this.owned = owned;
    this.endpoint = endpoint;
    // Commands parked while the connection opens go out when it is ready,
    // or fail when it closes; each close is a new epoch.
    client.on("ready", this.onReady);
    client.on("close", this.onClose);
    client.on("end", this.onDown);
    // Why a command would wait for the connection (notReady); a connection
    // of ours that never becomes ready is dropped and opened again.
    this.unwatch = watchUntilReady(client, {
      drop: owned,
      onDrop: (error) => {
        this.lastError = error;
      },
      onLoading: (loading) => {
        this.loading = loading;
      },
    });
    if (owned) {
      // Without a listener ioredis prints every connection error; we keep the
      // last one to explain why a node is unusable.
      client.on("error", (error) => {
        this.lastError = error;
      });
    }
  }

  static fromUrl(url: string, endpoint: string): IoredisTransport {
    return new IoredisTransport(new Redis(url, ownClientOptions), true, endpoint, () => {
      return new Redis(url, subscriberOptions);
    });
  }

  /** How a caller's client is named in errors: host:port, or its socket path. */
  static endpointOf(client: IoredisLike): string {
    const { host = "127.0.0.1", port = 6379, path } = client.options ?? {};
    return path ?? `${host}:${port}`;
  }

  static fromClient(client: IoredisLike): IoredisTransport {
    const duplicate = client.duplicate?.bind(client);
    return new IoredisTransport(
      client,
      false,
      IoredisTransport.endpointOf(client),
      duplicate && (() => duplicate(subscriberOptions) as Redis),
    );
  }

  /** Grows with every "close" of the client: ioredis reconnects on the same object. */
  get epoch(): number {
    return this.closes;
  }

  get notReady(): string | undefined {
    const status = this.client.status;
    if (status === "ready") return undefined;
    if (this.loading) return "connected, but the server is not ready: it is loading its data set";
    return isDown(status) ? undefined : "the connection is being opened";
  }

  send(args: readonly string[], timeoutMs: number): Promise<unknown> {
    const status = this.client.status;
    if (status === "ready") {
      // The "ready" event that sends the parked commands comes a tick after
      // the status changes: until then they still go first.
      if (this.parked.length > 0) this.releaseParked();
      // The array spread as it is (the command's name first): no copy of it
      // per call on the path every call takes.
      const command = args as readonly [string, ...string[]];
      if (this.owned) this.beforeWrite();
      return this.client.call(...command);
    }
    const [command, ...rest] = args as [string, ...string[]];
    // Still opening the connection: wait for it within the call's bounds (a
    // caller's client with its offline queue off, as the README advises,
    // would refuse the command: "Stream isn't writeable").
    if (!isDown(status)) return this.park(command, rest, timeoutMs);
    // Down: a caller's client queues or fails by its own options. Ours fails
    // at once (waiting for a reconnect would only spend the caller's time),
    // with the commands parked before (they would otherwise go out after
    // this one, out of order, once reconnected).
    if (!this.owned) return this.client.call(command, ...rest);
    const error = this.downError(status);
    this.failParked(error);
    return Promise.reject(error);
  }

  /** Sends a parked command, once the connection is ready (see `beforeWrite`). */
  private sendParked(command: string, rest: readonly string[]): Promise<unknown> {
    this.beforeWrite();
    return this.client.call(command, ...rest);
  }

  /**
   * Before a command is written on a connection of ours. Where other
   * rounds were under way since the connections last wrote
   * (rounds-under-way.ts), the socket is corked until the end of the
   * tick: the tick's commands leave in one write instead of one system
   * call each, which is what many concurrent locks or IDs on one
   * connection cost most (unlike an ioredis pipeline it allocates nothing
   * per batch). A lone caller's command goes out at once, and a second one
   * in the same tick corks the socket for the rest of it. Order on the
   * connection is kept either way: corked commands follow the ones written
   * before them in the socket's buffer.
   */
  private beforeWrite(): void {
    const writes = ++this.tickWrites;
    if (writes === 1) {
      // One callback at the end of the tick for every connection written.
      if (writtenThisTick.push(this) === 1) process.nextTick(endTick);
      if (!othersUnderWay()) return;
    } else if (this.corkedStream) return;
    const stream = this.client.stream;
    if (stream && typeof stream.cork === "function") {
      stream.cork();
      this.corkedStream = stream;
    }
  }

  /** The end of a tick in which this connection was written (see `beforeWrite`). */
  tickEnded(): void {
    this.tickWrites = 0;
    const stream = this.corkedStream;
    if (stream) {
      this.corkedStream = undefined;
      stream.uncork();
    }
  }

  /**
   * Waits, at most `timeoutMs`, for the connection being opened. Commands on
   * one node go out in the order they were issued, or never: a late write
   * must not land after a later delete (an acquire's SET parked here, then
   * its release failing while the connection flaps, then the SET sent on
   * the reconnect would leave a lock key behind the release). So parked
   * commands wait in one queue that a later command joins (never
   * overtakes); once the connection is ready they are sent in one go, in
   * order; if it closes first, all of them fail. One that gives up waiting
   * fails with every command parked before it: what is never sent is
   * always a prefix of the queue, so no command goes out after a later one
   * failed.
   */
  private park(command: string, rest: readonly string[], timeoutMs: number): Promise<unknown> {
    if (this.client.status === "wait") this.client.connect().catch(() => {});
    return new Promise((resolve, reject) => {
      const entry: Parked = {
        command,
        rest,
        resolve,
        reject,
        timer: setTimeout(() => {
          const why = this.notReady;
          const error = new Error(`not connected within ${timeoutMs} ms${why ? ` (${why})` : ""}`);
          for (const given of this.parked.splice(0, this.parked.indexOf(entry) + 1)) {
            clearTimeout(given.timer);
            given.reject(error);
          }
        }, timeoutMs),
      };
      this.parked.push(entry);
    });
  }

  /** Sends the parked commands, in order, if the connection is ready; fails them if it is down. */
  private releaseParked(): void {
    if (this.parked.length === 0) return;
    const status = this.client.status;
    if (isDown(status)) {
      this.failParked(this.downError(status));
      return;
    }
    if (status !== "ready") return;
    for (const entry of this.parked.splice(0)) {
      clearTimeout(entry.timer);
      this.sendParked(entry.command, entry.rest).then(entry.resolve, entry.reject);
    }
  }

  private failParked(error: Error): void {
    if (this.parked.length === 0) return;
    for (const entry of this.parked.splice(0)) {
      clearTimeout(entry.timer);
      entry.reject(error);
    }
  }

  private downError(state: string): Error {
    const cause = this.lastError instanceof Error ? `: ${this.lastError.message}` : "";
    return new Error(`connection ${state}${cause}`);
  }

  async close(): Promise<void> {
    if (!this.owned) {
      // A caller's client lives on: leave no listener of ours on it.
      this.client.removeListener("ready", this.onReady);
      this.client.removeListener("close", this.onClose);
      this.client.removeListener("end", this.onDown);
      this.unwatch();
      this.failParked(new Error("transport closed by close()"));
      return;
    }
    this.failParked(new Error("connection closed by close()"));
    await disconnected(this.client);
  }

  get subscribe() {
    const open = this.openSubscriber;
    if (!open) return undefined;
    return (
      onMessage: (channel: string, message: string) => void,
      onResubscribed?: () => void,
    ): Subscription => {
      const subscriber = open();
      subscriber.on("error", () => {}); // the command connection reports node trouble
      // Stuck there, it would miss every notice until the stranger went away.
      watchUntilReady(subscriber as unknown as IoredisLike, { drop: true });
      subscriber.on("message", onMessage);
      let closed = false; // no command after close(): it could open the connection again
      const channels = new Set<string>();
      let connectedBefore = false;
      subscriber.on("ready", () => {
        if (!connectedBefore) {
          connectedBefore = true;
          return;
        }
        if (closed || channels.size === 0 || !onResubscribed) return;
        // Back after a drop. ioredis has just sent SUBSCRIBE for the
        // channels again (autoResubscribe, before this event): the reply to
        // this one comes after those, once they hold.
        subscriber.subscribe(...channels).then(
          () => {
            if (!closed) onResubscribed();
          },
          () => {},
        );
      });
      /**
       * A command written on the connection (ready, or still opening: ioredis
       * writes SUBSCRIBE at once then) that the connection drops before its
       * answer is never settled by ioredis (no resend of unanswered commands
       * on a new connection, and no retry limit on this one): it fails here
       * instead, so the caller can ask again. One queued while the connection
       * is down goes out once it is back.
       */
      const settled = (send: () => Promise<unknown>): Promise<void> => {
        const status = subscriber.status;
        if (status !== "ready" && status !== "connect") return send().then(() => {});
        return new Promise<void>((resolve, reject) => {
          const dropped = () =>
            reject(new Error("the pub/sub connection closed before the node answered"));
          subscriber.once("close", dropped);
          send()
            .then(() => resolve(), reject)
            .finally(() => subscriber.removeListener("close", dropped));
        });
      };
      return {
        add: async (channel) => {
          channels.add(channel);
          if (!closed) await settled(() => subscriber.subscribe(channel));
        },
        remove: async (channel) => {
          channels.delete(channel);
          if (!closed) await settled(() => subscriber.unsubscribe(channel));
        },
        close: async () => {
          closed = true;
          await disconnected(subscriber as unknown as IoredisLike);
        },
      };
    };
  }
}
