/** Running the `redquorum` command from the source in a test, and probing what it leaves behind. */
import { type ChildProcess, spawn } from "node:child_process";
import { createConnection } from "node:net";

export interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** `redquorum <args>` from the source (no build needed), no shell in between. */
export function startCli(args: readonly string[], env: NodeJS.ProcessEnv = {}): ChildProcess {
  return spawn(process.execPath, ["--import", "tsx", "src/cli/main.ts", ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
}

/** The run's exit and output; fails (with the CLI's stderr) if it runs longer than `timeoutMs`. */
export function finished(child: ChildProcess, timeoutMs: number): Promise<Run> {
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (chunk) => {
    stdout += chunk;
  });
  child.stderr!.on("data", (chunk) => {
    stderr += chunk;
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`CLI still running after ${timeoutMs} ms; stderr: ${stderr}`));
    }, timeoutMs);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
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
