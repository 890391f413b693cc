/**
 * The ports a local cluster's nodes keep for as long as the cluster lives,
 * also while a node is down. A node restarted after a kill must come back
 * at its own address (clients hold its URL), and meanwhile nothing else
 * should answer there: another cluster's redis-server, a proxy, anything
 * listening on a port the system handed out. So a node's port is
 *
 * - below the system's ephemeral range, which the system hands out to
 *   `listen(0)` and outgoing connections but never picks below; and
 * - claimed among local clusters, in every process on this machine, by a
 *   file named for the port that holds the claiming process's pid. A claim
 *   whose process is gone is taken over; `release` removes it.
 *
 * Claims live in the temp directory: where it is per user (macOS,
 * Windows, or TMPDIR set), they keep apart that user's clusters only.
 * Where the system's range leaves too little room below it, ports come
 * from `listen(0)` as before, unclaimed.
 */
import { randomBytes } from "node:crypto";
import { chmodSync, linkSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, portHolder } from "./local-sockets.js";
import { isRunning } from "./process-state.js";

/** The lowest port claimed: above the well-known services' usual ports. */
const lowestPort = 20_000;
/** Fewer ports than this below the ephemeral range: not worth claiming from. */
const roomMin = 2_000;

/** Where the claims are: one file per port, holding the claiming process's pid. */
export const claimsDir = join(tmpdir(), "redquorum-ports");

/** The first port of the system's ephemeral range. */
function ephemeralStart(): number {
  try {
    const [low] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8")
      .trim()
      .split(/\s+/);
    const value = Number(low);
    if (Number.isInteger(value) && value > 0) return value;
  } catch {
    // Not Linux: the IANA range, which macOS and Windows use.
  }
  return process.platform === "linux" ? 32_768 : 49_152;
}

/** A claim file's pid; undefined when there is no such file, NaN when it holds no pid. */
function ownerOf(file: string): number | undefined {
  try {
    return Number(readFileSync(file, "utf8"));
  } catch {
    return undefined;
  }
}

/**
 * Creates the claim `file` holding this process's pid, written whole before
 * it appears (a link to a file written first): false when it exists.
 */
function createClaim(file: string): boolean {
  const written = `${file}.${process.pid}.${randomBytes(4).toString("hex")}`;
  try {
    writeFileSync(written, String(process.pid), { flag: "wx" });
    linkSync(written, file);
    return true;
  } catch {
    return false;
  } finally {
    rmSync(written, { force: true });
  }
}

/**
 * Claims `port` for this process: false when a running process holds it.
 * A claim whose process is gone is taken over by one process at a time (a
 * `.takeover` file created first), so two that both found it stale cannot
 * both remove it and the second take the first's new claim away.
 */
function claim(port: number): boolean {
  const file = join(claimsDir, String(port));
  if (createClaim(file)) return true;
  const takeover = `${file}.takeover`;
  try {
    writeFileSync(takeover, String(process.pid), { flag: "wx" });
  } catch {
    return false;
  }
  try {
    const owner = ownerOf(file);
    if (owner !== undefined) {
      if (owner === process.pid || (Number.isInteger(owner) && owner > 0 && isRunning(owner))) {
        return false;
      }
      rmSync(file, { force: true });
    }
    return createClaim(file);
  } finally {
    rmSync(takeover, { force: true });
  }
}

/** The ports claimed from: below the system's ephemeral range, undefined where too few are. */
export function claimRange(): { low: number; high: number } | undefined {
  const high = Math.min(ephemeralStart(), 65_536) - 1;
  return high - lowestPort + 1 < roomMin ? undefined : { low: lowestPort, high };
}

/**
 * A port of `range` no one else listens on and no other local cluster
 * claims, claimed for this process; without a range (or when 100 tries
 * found none), one `listen(0)` gives, unclaimed.
 */
export async function claimPort(range = claimRange()): Promise<number> {
  if (!range) return freePort();
  const { low, high } = range;
  try {
    mkdirSync(claimsDir, { recursive: true });
  } catch {
    return freePort();
  }
  try {
    // Shared by every user of the machine, as /tmp is; each claim stays its owner's.
    chmodSync(claimsDir, 0o1777);
  } catch {
    // Another user's directory: its mode is theirs to set.
  }
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = low + Math.floor(Math.random() * (high - low + 1));
    if (port === 6379 || !claim(port)) continue;
    if ((await portHolder(port)) === undefined) return port;
    release(port);
  }
  return freePort();
}

/** Gives up this process's claim of `port` (a port not claimed is left alone). */
export function release(port: number): void {
  const file = join(claimsDir, String(port));
  if (ownerOf(file) === process.pid) rmSync(file, { force: true });
}
