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
