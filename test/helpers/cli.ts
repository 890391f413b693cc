/** Running the `redquorum` command (the built bundle, dist/cli.js) in a test, and probing what it leaves behind. */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { closeSync, constants, mkdtempSync, openSync, rmSync } from "node:fs";
import { createConnection, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cliPath } from "./built.js";

export interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * `redquorum <args>` as a user runs it (dist/cli.js), no shell in between.
 * `output`: a file descriptor for stdout or stderr instead of a pipe to the
 * test (`> /dev/full`); `finished` then reads only the other one.
 */
export function startCli(
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
  output: { stdout?: number; stderr?: number } = {},
): ChildProcess {
  return spawn(process.execPath, [cliPath, ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", output.stdout ?? "pipe", output.stderr ?? "pipe"],
  });
}

/** The run's exit and output; fails (with the CLI's stderr) if it runs longer than `timeoutMs`. */
export function finished(child: ChildProcess, timeoutMs: number): Promise<Run> {
  let stdout = "";
  let stderr = "";
  // Null when stdout or stderr is not a pipe to the test (`startCliIntoPipe`, `output`).
  child.stdout?.on("data", (chunk) => {
    stdout += chunk;
  });
  child.stderr?.on("data", (chunk) => {
    stderr += chunk;
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      const command = ["redquorum", ...child.spawnargs.slice(2)].join(" ");
      reject(new Error(`${command}: still running after ${timeoutMs} ms; stderr: ${stderr}`));
    }, timeoutMs);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/**
 * `redquorum <args>` with stdout a real pipe, as in a shell pipeline (a FIFO:
 * 64 KiB of buffer; Node's own stdio pipes are socket pairs holding about
 * 200 KiB, which would swallow a whole `id next --count 10000`), whose read
 * end the test closes, as `| head -1` does: at once (`readFirst: false`,
 * before the CLI can have written anything) or after reading the first
 * chunk. Then at most 64 KiB + that chunk (at most 64 KiB) can have been
 * written; any write after that fails with EPIPE. `firstChunk` is what was
 * read; `run` the run as `finished` gives it (its stdout is empty).
 */
export function startCliIntoPipe(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  options: { readFirst: boolean; timeoutMs: number },
): { firstChunk: Promise<string>; run: Promise<Run> } {
  const dir = mkdtempSync(join(tmpdir(), "redquorum-pipe-"));
  const fifo = join(dir, "stdout");
  const made = spawnSync("mkfifo", [fifo]);
  if (made.status !== 0) throw new Error(`mkfifo failed: ${made.stderr}`);
  // The read end first, non-blocking (a FIFO's open waits for the other end otherwise).
  const readFd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  const writeFd = openSync(fifo, constants.O_WRONLY);
  rmSync(dir, { recursive: true, force: true }); // the open ends stay
  const child = spawn(process.execPath, [cliPath, ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", writeFd, "pipe"],
  });
  closeSync(writeFd); // only the CLI writes
  const run = finished(child, options.timeoutMs);
  if (!options.readFirst) {
    closeSync(readFd);
    return { firstChunk: Promise.resolve(""), run };
  }
  const reader = new Socket({ fd: readFd, readable: true, writable: false });
  reader.on("error", () => {}); // the test only wants the first chunk
  const firstChunk = new Promise<string>((resolve) => {
    reader.once("data", (chunk: Buffer) => {
      reader.destroy(); // closes the read end
      resolve(chunk.toString());
    });
    reader.once("end", () => resolve(""));
  });
  // Never left open: a run that wrote nothing ends the reader here.
  run.finally(() => reader.destroy()).catch(() => {});
  return { firstChunk, run };
}

/** The error code of a TCP connect to 127.0.0.1:`port` (ECONNREFUSED once a process is gone), or "connected". */
export function connectResult(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve("connected");
    });
    socket.once("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
  });
}
