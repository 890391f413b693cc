/**
 * The command's process group, as `redquorum lock` and its guard see it:
 * a signal to the whole group, and whether any process of it still runs.
 * Shared by both (the guard's bundle takes nothing else from the CLI).
 */
import { readdirSync, readFileSync } from "node:fs";

/** Sends `signal` to every process of group `pgid` (0: only looks); false when no process is left in it. */
export function signalGroup(pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false; // ESRCH
  }
}

/**
 * Whether a process of group `pgid` still runs. kill(0) also finds
 * zombies: processes killed whose parent has not reaped them yet (a
 * stopped redquorum, or an init that reaps orphans slowly). On Linux the
 * group's members are read from /proc and zombies left out; elsewhere a
 * zombie counts as running. Members this user may not signal count too
 * (`kill` is injectable for that test). A member forked after /proc was listed whose
 * parent exited before its own entry was read is not seen: a false here
 * is no proof, and both callers send the group SIGKILL before they act on
 * it (a group signal reaches a member being forked too).
 */
export function groupRunning(pgid: number, kill: typeof process.kill = process.kill): boolean {
  try {
    kill(-pgid, 0);
  } catch (error) {
    // EPERM: members are there that this user may not signal (a command
    // run through sudo): running, not gone.
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  if (process.platform !== "linux") return true;
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return true;
  }
  for (const entry of entries) {
    if (entry.charCodeAt(0) < 48 || entry.charCodeAt(0) > 57) continue; // not a pid
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "utf8");
    } catch {
      continue; // gone meanwhile
    }
    // "<pid> (<name>) <state> <ppid> <pgrp> …": the name may hold spaces and parentheses.
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(pgrp) === pgid && state !== "Z") return true;
  }
  return false;
}
