/**
 * How a LocalCluster node keeps its data, as redis-server arguments, and
 * the checks on what callers pass for it.
 */
import { InvalidArgumentError } from "../errors.js";

/** How a node keeps its data: nothing, AOF fsynced every second, AOF fsynced on every write. */
export type Persistence = "none" | "aof-everysec" | "aof-always";

export const persistenceArgs: Record<Persistence, readonly string[]> = {
  none: ["--appendonly", "no"],
  "aof-everysec": ["--appendonly", "yes", "--appendfsync", "everysec"],
  "aof-always": ["--appendonly", "yes", "--appendfsync", "always"],
};

export function requirePersistence(value: unknown): Persistence {
  if (typeof value !== "string" || !Object.hasOwn(persistenceArgs, value)) {
    throw new InvalidArgumentError(
      "persistence",
      `expected one of ${Object.keys(persistenceArgs).join(", ")}, got ${String(value)}`,
    );
  }
  return value as Persistence;
}

export function requireArgs(value: unknown): readonly string[] {
  if (!Array.isArray(value) || !value.every((arg) => typeof arg === "string")) {
    throw new InvalidArgumentError("extraArgs", "expected an array of strings");
  }
  return [...value];
}
