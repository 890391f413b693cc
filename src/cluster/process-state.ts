/**
 * Reading and waiting on local processes, for LocalCluster's synchronous
 * pause and resume: a process's state from /proc, and a blocking sleep;
 * and whether a process runs at all (port-claims.ts: a claim of a process
 * gone is taken over).
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

/** Whether process `pid` exists (kill 0: EPERM means it does, as another user's). */
export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
