/**
 * redquorum lock's side of its guard process (guard.ts, built as
 * dist/cli-guard.js): started before the lock is taken, told the command's
 * group before the command is let go, and kept told of the lock's
 * schedule, so that the command is stopped in time even when redquorum is
 * killed or stopped. Times are ms on CLOCK_MONOTONIC (`process.hrtime`),
 * which the guard reads too.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { diagnose } from "./common.js";

/** Beside the CLI's bundle (dist/cli.js); run from the source, beside this file as .ts (tsx). */
function guardScript(): string[] | undefined {
  const built = fileURLToPath(new URL("./cli-guard.js", import.meta.url));
  if (existsSync(built)) return [built];
  const source = fileURLToPath(new URL("./guard.ts", import.meta.url));
  return existsSync(source) ? ["--import", "tsx", source] : undefined;
}

export class LockGuard {
  private process: ChildProcess | undefined;
  private exited = false;

  /**
   * Starts the guard, which gives the command `graceMs` between SIGTERM
   * and SIGKILL if redquorum dies. One that cannot start is said; the
   * command then runs with redquorum alone watching it.
   */
  start(graceMs: number): void {
    const script = guardScript();
    if (!script) {
      diagnose(
        "warning: the guard (cli-guard.js) is missing: if redquorum is killed, the command is not stopped",
      );
      return;
    }
    const guard = spawn(process.execPath, [...script, String(graceMs)], {
      // Its own session: a signal to redquorum's group (Ctrl-C, a kill of
      // the group) leaves it to do its job.
      detached: true,
      stdio: ["pipe", "ignore", "inherit"],
    });
    guard.unref();
    guard.stdin!.on("error", () => {}); // EPIPE: it is gone; its exit says so
    guard.once("error", (error) => {
      this.exited = true;
      diagnose(
        `warning: the guard did not start (${error.message}): if redquorum is killed, the command is not stopped`,
      );
    });
    guard.once("exit", (code, signal) => {
      this.exited = true;
      // Exit 0: it did its job (the command stopped) or was told it was done.
      if (code !== 0) {
        diagnose(
          `warning: the guard exited (${signal ?? `code ${code}`}): if redquorum is killed, the command is not stopped`,
        );
      }
    });
    this.process = guard;
  }

  /** Whether the guard runs (spawned, not exited): it then sends the SIGTERM that stops the command. */
  get live(): boolean {
    return this.process?.pid !== undefined && !this.exited;
  }

  /** The command's process group (the command is let go only after this). */
  group(pgid: number): void {
    this.write(`group ${pgid}`);
  }

  /** SIGTERM due at `termAtMs` unless the lock is extended first; SIGKILL at `killAtMs`. */
  schedule(termAtMs: number, killAtMs: number): void {
    this.write(`at ${Math.floor(termAtMs)} ${Math.floor(killAtMs)}`);
  }

  /** SIGTERM to the command now, unless the guard sent it already; SIGKILL at `killAtMs` at the latest. */
  terminate(killAtMs: number): void {
    this.write(`term ${Math.floor(killAtMs)}`);
  }

  /** The command's group is gone, or never ran: the guard exits. */
  done(): void {
    this.write("done");
    this.process?.stdin?.end();
  }

  private write(line: string): void {
    const stdin = this.process?.stdin;
    if (stdin && !stdin.destroyed && !stdin.writableEnded) stdin.write(`${line}\n`);
  }
}
