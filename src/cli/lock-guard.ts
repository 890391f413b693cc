/**
 * redquorum lock's side of its guard process (guard.ts, built as
 * dist/cli-guard.js): starts it beside the command and keeps it told of the
 * lock's schedule, so that the command is stopped in time even when
 * redquorum is killed or stopped. Times are ms on CLOCK_MONOTONIC
 * (`process.hrtime`), which the guard reads too.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { diagnose } from "./common.js";

export const monotonicNowMs = () => Number(process.hrtime.bigint() / 1_000_000n);

/** Beside the CLI's bundle (dist/cli.js); run from the source, beside this file as .ts (tsx). */
function guardScript(): string[] | undefined {
  const built = fileURLToPath(new URL("./cli-guard.js", import.meta.url));
  if (existsSync(built)) return [built];
  const source = fileURLToPath(new URL("./guard.ts", import.meta.url));
  return existsSync(source) ? ["--import", "tsx", source] : undefined;
}

export class LockGuard {
  private process: ChildProcess | undefined;
  private last: string | undefined;
  private ended = false;

  /** Starts the guard of process group `pgid`; a guard that cannot start is said, and the run goes on without. */
  start(pgid: number, graceMs: number): void {
    if (process.env.NO_GUARD) return;
    const script = guardScript();
    if (!script) {
      diagnose(
        "warning: the guard (cli-guard.js) is missing: if redquorum is killed, the command is not stopped",
      );
      return;
    }
    const guard = spawn(process.execPath, [...script, String(pgid), String(graceMs)], {
      // Its own session: a signal to redquorum's group (Ctrl-C, a kill of
      // the group) leaves it to do its job.
      detached: true,
      stdio: ["pipe", "ignore", "inherit"],
    });
    guard.unref();
    guard.stdin!.on("error", () => {}); // EPIPE: it is gone; its exit says so
    guard.once("error", (error) => diagnose(`warning: the guard did not start: ${error.message}`));
    guard.once("exit", (code, signal) => {
      if (!this.ended) {
        diagnose(
          `warning: the guard exited (${signal ?? `code ${code}`}): if redquorum is killed, the command is not stopped`,
        );
      }
    });
    this.process = guard;
    if (this.last) this.write(this.last);
  }

  /** SIGTERM due at `termAtMs` unless the lock is extended first; SIGKILL at `killAtMs`. */
  schedule(termAtMs: number, killAtMs: number): void {
    this.last = `at ${Math.floor(termAtMs)} ${Math.floor(killAtMs)}`;
    this.write(this.last);
  }

  /** redquorum sent SIGTERM itself; SIGKILL at `killAtMs`. */
  term(killAtMs: number): void {
    this.write(`term ${Math.floor(killAtMs)}`);
  }

  /** The command's group is gone: the guard exits. */
  done(): void {
    this.ended = true;
    this.write("done");
    this.process?.stdin?.end();
  }

  private write(line: string): void {
    const stdin = this.process?.stdin;
    if (stdin && !stdin.destroyed && !stdin.writableEnded) stdin.write(`${line}\n`);
  }
}
