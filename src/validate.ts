import { InvalidArgumentError } from "./errors.js";

/** Checks shared by every public entry point; each names the argument and what is allowed. */

/**
 * Runs `check`, naming an `InvalidArgumentError` it throws about argument
 * `from` (or any argument, when `from` is undefined) `to` instead: a shared
 * check names its input by position, the caller knows it by another name.
 */
export function namedAs<T>(to: string, from: string | undefined, check: () => T): T {
  try {
    return check();
  } catch (error) {
    if (error instanceof InvalidArgumentError && (from === undefined || error.argument === from)) {
      throw new InvalidArgumentError(to, error.detail);
    }
    throw error;
  }
}

export function requireInteger(name: string, value: unknown, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidArgumentError(
      name,
      `expected an integer in [${min}, ${max}], got ${describe(value)}${asNumberHint(value)}`,
    );
  }
  return value;
}

export function requireNumber(name: string, value: unknown, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value < min || value > max) {
    throw new InvalidArgumentError(
      name,
      `expected a finite number in [${min}, ${max}], got ${describe(value)}${asNumberHint(value)}`,
    );
  }
  return value;
}

export function requireBoolean(name: string, value: unknown): boolean {
  if (typeof value !== "boolean") {
    throw new InvalidArgumentError(name, `expected true or false, got ${describe(value)}`);
  }
  return value;
}

/**
 * A lone UTF-16 surrogate has no UTF-8 form: Redis would get U+FFFD, so two
 * different strings would name one key (and a name listed twice would pass
 * the duplicate check). Names that become keys must be well-formed text.
 */
export function requireWellFormed(name: string, value: string): void {
  if (/\p{Surrogate}/u.test(value)) {
    throw new InvalidArgumentError(
      name,
      `${describe(value)} contains a lone UTF-16 surrogate, which has no UTF-8 form (Redis would see U+FFFD)`,
    );
  }
}

export function requireSignal(name: string, value: unknown): AbortSignal | undefined {
  if (value === undefined) return undefined;
  if (!(value instanceof AbortSignal)) {
    throw new InvalidArgumentError(name, `expected an AbortSignal, got ${describe(value)}`);
  }
  return value;
}

export function requireFunction<T>(name: string, value: unknown): T {
  if (typeof value !== "function") {
    throw new InvalidArgumentError(name, `expected a function, got ${describe(value)}`);
  }
  return value as T;
}

/**
 * An object with each of `methods` a function (an injected clock or random
 * source): refused at once, naming what is missing, rather than failing
 * the first time a rare path calls it.
 */
export function requireMethods<T>(name: string, value: unknown, methods: readonly string[]): T {
  if (typeof value !== "object" || value === null) {
    throw new InvalidArgumentError(
      name,
      `expected an object with ${methods.join(", ")}, got ${describe(value)}`,
    );
  }
  const missing = methods.filter(
    (method) => typeof (value as Record<string, unknown>)[method] !== "function",
  );
  if (missing.length > 0) {
    throw new InvalidArgumentError(
      name,
      `expected an object with the methods ${methods.join(", ")}; not a function here: ${missing.join(", ")}`,
    );
  }
  return value as T;
}

/**
 * Refuses option names we do not know, with a hint for names other Redlock
 * libraries use, so a misspelt or foreign option never silently does nothing.
 */
export function rejectUnknownOptions(
  name: string,
  options: object,
  known: readonly string[],
  hints: Readonly<Record<string, string>> = {},
): void {
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue;
    const hint = hints[key];
    throw new InvalidArgumentError(
      `${name}.${key}`,
      hint ? `not an option here; ${hint}` : `unknown option (known: ${known.join(", ")})`,
    );
  }
}

export function requireOptionsObject(name: string, value: unknown): Record<string, unknown> {
  if (value === undefined) return {};
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new InvalidArgumentError(name, `expected an options object, got ${describe(value)}`);
  }
  // It has no own keys, so it would pass as an empty options object, unheard.
  if (value instanceof AbortSignal) {
    throw new InvalidArgumentError(
      name,
      "expected an options object, got an AbortSignal: pass { signal }",
    );
  }
  return value as Record<string, unknown>;
}

/** Where a number is wanted, what to do with a bigint (IDs and fences are bigints, counts are not). */
function asNumberHint(value: unknown): string {
  return typeof value === "bigint" ? ": pass a number, e.g. Number(value)" : "";
}

export function describe(value: unknown): string {
  if (typeof value === "string") {
    return value.length > 40 ? `a string of length ${value.length}` : JSON.stringify(value);
  }
  // A bigint printed as its digits alone ("got 1") looks like an allowed value.
  if (typeof value === "bigint") return `${value}n (a bigint)`;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  if (value === null) return "null";
  if (Array.isArray(value)) return `an array of length ${value.length}`;
  return typeof value === "object" ? "an object" : typeof value;
}
