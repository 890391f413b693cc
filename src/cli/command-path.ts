/**
 * Whether a command can be run, as execvp(3) would find it: `redquorum
 * lock` starts the command through a shell that waits for the guard to be
 * told its group (lock.ts), so a command that cannot run must be caught
 * here, before the lock's time is spent on it, with the exit code a shell
 * gives (127 not found, 126 found but not runnable).
 */
import { accessSync, constants, statSync } from "node:fs";
import { delimiter, join } from "node:path";

export interface CommandProblem {
  readonly exitCode: 126 | 127;
  /** What is wrong, with the errno name (ENOENT, EACCES). */
  readonly message: string;
}

function runnable(path: string): "yes" | "ENOENT" | "EACCES" {
  try {
    if (statSync(path).isDirectory()) return "EACCES";
    accessSync(path, constants.X_OK);
    return "yes";
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === "ENOENT" || code === "ENOTDIR" ? "ENOENT" : "EACCES";
  }
}

/** Why `command` cannot run with `pathVariable` as PATH, or undefined when it can. */
export function commandProblem(
  command: string,
  pathVariable: string | undefined,
): CommandProblem | undefined {
  const notFound = { exitCode: 127, message: "not found (ENOENT)" } as const;
  const denied = { exitCode: 126, message: "not executable (EACCES)" } as const;
  if (command === "") return notFound;
  if (command.includes("/")) {
    const found = runnable(command);
    return found === "yes" ? undefined : found === "ENOENT" ? notFound : denied;
  }
  // As execvp: each PATH entry in turn (an empty one is the working
  // directory); one that exists but cannot run is remembered, the search
  // goes on.
  let sawDenied = false;
  for (const dir of (pathVariable ?? "/usr/local/bin:/usr/bin:/bin").split(delimiter)) {
    const found = runnable(join(dir || ".", command));
    if (found === "yes") return undefined;
    if (found === "EACCES") sawDenied = true;
  }
  return sawDenied ? denied : notFound;
}
