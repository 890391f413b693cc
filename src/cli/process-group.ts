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
 * zombie counts as running. Members this user may not signal (EPERM:
 * another user's, through sudo) count as running, seen or not (/proc may
 * hide them). `kill` is injectable for that test.
 *
 * A member forked after /proc was listed, whose parent exited before its
 * own entry was read, is not seen (a chain of processes that each fork
 * and exit). So when kill(0) finds the group but /proc shows no live
 * member, the group is stopped (SIGSTOP) while /proc is read again: a
 * stopped process cannot fork, and a fork that the group signal meets is
 * restarted by the kernel, so nothing can be missed then. It goes on
 * (SIGCONT) at once after.
 */
export function groupRunning(pgid: number, kill: typeof process.kill = process.kill): boolean {
  try {
    kill(-pgid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
  if (process.platform !== "linux") return true;
  if (liveMemberSeen(pgid)) return true;
  try {
    kill(-pgid, "SIGSTOP");
  } catch {
    return false; // gone meanwhile
  }
  try {
    return liveMemberSeen(pgid);
  } finally {
    try {
      kill(-pgid, "SIGCONT");
    } catch {
      // gone meanwhile
    }
  }
}

/** Whether /proc shows a process of group `pgid` that is not a zombie or dead (true when /proc cannot be read). */
function liveMemberSeen(pgid: number): boolean {
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
    if (Number(pgrp) === pgid && state !== "Z" && state !== "X") return true;
  }
  return false;
}
