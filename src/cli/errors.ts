/** Errors of the command line itself (the library's own are typed in src/errors.ts). */

/** A bad argument or option: exit code 2. The message names the argument and what is allowed. */
export class UsageError extends Error {
  readonly argument: string;

  constructor(argument: string, message: string) {
    super(`invalid ${argument}: ${message}`);
    this.argument = argument;
  }

  override get name(): string {
    return "UsageError";
  }
}

/** redquorum itself got SIGINT/SIGTERM/SIGHUP before it ran the command: exit 128 + signal. */
export class InterruptedError extends Error {
  readonly signal: NodeJS.Signals;

  constructor(signal: NodeJS.Signals) {
    super(`interrupted by ${signal}`);
    this.signal = signal;
  }

  override get name(): string {
    return "InterruptedError";
  }
}

/** The lock could not be had within --wait: exit code 4, the command was not run. */
export class LockNotAcquiredError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }

  override get name(): string {
    return "LockNotAcquiredError";
  }
}

/**
 * `id init` found a counter that already handed out IDs: exit code 7. One
 * line for the command line (the library's `AlreadyInitializedError` speaks
 * of `init()`): running it again is harmless, the counter is left as it is.
 */
export class CounterInUseError extends Error {
  readonly key: string;

  constructor(key: string, endpoints: readonly string[], nodeCount: number) {
    super(
      `the ID counter ${JSON.stringify(key)} already handed out IDs (on ${endpoints.length} of ` +
        `${nodeCount} nodes: ${endpoints.join(", ")}), so it was left as it is: not an error if it ` +
        "was initialised before (`redquorum id next` takes IDs from it); for a new counter give another --key",
    );
    this.key = key;
  }

  override get name(): string {
    return "CounterInUseError";
  }
}
