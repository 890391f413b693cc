/** Finding the redis-server binary LocalCluster runs, or saying how to install it. */
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";
import { RedquorumError } from "../errors.js";

/** The redis-server binary: $REDQUORUM_REDIS_SERVER, else the first on PATH (or the usual sbin dirs). */
export function findRedisServer(): string {
  const fromEnv = process.env.REDQUORUM_REDIS_SERVER;
  if (fromEnv) return fromEnv;
  const dirs = [
    ...(process.env.PATH ?? "").split(delimiter),
    "/usr/bin",
    "/usr/local/bin",
    "/usr/sbin",
  ];
  for (const dir of dirs) {
    if (!dir) continue;
    const candidate = join(dir, "redis-server");
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  throw new RedquorumError(
    "ERR_REDIS_NOT_FOUND",
    "redis-server was not found on PATH. Install it (Debian/Ubuntu: apt-get install -y redis-server, " +
      "or run `sh scripts/ensure-redis.sh` in this repository) or set REDQUORUM_REDIS_SERVER to its path.",
  );
}

/** The given redis-server path, if it is an executable file; else ERR_REDIS_NOT_FOUND. */
export function requireRedisServer(path: string): string {
  try {
    accessSync(path, constants.X_OK);
  } catch (error) {
    throw new RedquorumError(
      "ERR_REDIS_NOT_FOUND",
      `redis-server not found at ${JSON.stringify(path)} (${(error as Error).message}): pass ` +
        "redisServerPath or set REDQUORUM_REDIS_SERVER to an executable redis-server, or install it " +
        "(Debian/Ubuntu: apt-get install -y redis-server)",
    );
  }
  return path;
}
