/**
 * Reading and waiting on local processes, for LocalCluster's synchronous
 * pause and resume: a process's state from /proc, and a blocking sleep.
 */
import { existsSync, readFileSync } from "node:fs";

/**
 * The state letter of process `pid` from /proc/<pid>/stat ("R", "S", "T"...),
 * "gone" if it has no entry there, undefined where there is no /proc at all.
 */
export function processState(pid: number): string | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return existsSync("/proc/self/stat") ? "gone" : undefined;
  }
  // "pid (comm) S ...": comm may hold spaces and parentheses, the state follows the last ")".
  return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
}

const sleepCell = new Int32Array(new SharedArrayBuffer(4));

/** Blocks the thread for `ms` (pause and resume stay synchronous for their callers). */
export function sleepSync(ms: number): void {
  Atomics.wait(sleepCell, 0, 0, ms);
}
