/**
 * What redquorum needs from one Redis master: send a command, get the reply.
 * Everything else (timeouts, abort, EVALSHA fallback, error wrapping) is done
 * once in `RedisNode` on top of this, so adapters stay a few lines each and
 * a test or simulator can supply its own transport.
 */
export interface NodeTransport {
  /** How the node is named in errors and status: host:port, never credentials. */
  readonly endpoint: string;
  /**
   * Sends one command. `timeoutMs` bounds only the wait for a connection to
   * become usable; the caller bounds the whole call.
   */
  send(args: readonly string[], timeoutMs: number): Promise<unknown>;
  /** Ends the connection if this transport owns it; a caller's own client is left open. */
  close(): Promise<void>;
  /**
   * Optional: why a command sent now would wait for the connection, if it
   * would ("the connection is being opened"; a server loading its data
   * set answers, but takes no command until it has loaded): told in the
   * timeout of a call that waited, where "no reply" alone would send an
   * operator to look at the network.
   */
  readonly notReady?: string | undefined;
  /**
   * Optional: a count that grows every time the connection closes, so a
   * reply read with a higher epoch than an earlier one came over a newer
   * connection (the node may have restarted in between, and be another
   * server now). Without it the node is taken to keep one connection.
   */
  readonly epoch?: number;
  /**
   * Optional: a second connection for pub/sub, delivering each message of
   * the channels added to it to `onMessage`, and calling `onResubscribed`
   * (when given) each time the connection came back after a drop with its
   * channels subscribed again: what was published meanwhile was lost.
   * Without it, waiters for a lock released by another process fall back
   * to polling.
   */
  subscribe?(
    onMessage: (channel: string, message: string) => void,
    onResubscribed?: () => void,
  ): Subscription;
}

/** A pub/sub connection. Messages are hints only: none may be relied on to arrive. */
export interface Subscription {
  add(channel: string): Promise<void>;
  remove(channel: string): Promise<void>;
  close(): Promise<void>;
}

export function isNodeTransport(value: unknown): value is NodeTransport {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as NodeTransport).send === "function" &&
    typeof (value as NodeTransport).endpoint === "string" &&
    typeof (value as NodeTransport).close === "function"
  );
}
