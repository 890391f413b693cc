/**
 * Talking to a local node before any client does: a free port, whether a
 * port is taken, a PING probe, and one setup command, each on a fresh socket.
 */
import { createConnection, createServer } from "node:net";
import { RedquorumError } from "../errors.js";

/**
 * Whether something holds 127.0.0.1:`port` so that redis-server could not
 * bind it: a description of the conflict, or undefined when it is free. A
 * listening probe binds as redis-server does (SO_REUSEADDR).
 */
export function portHolder(port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.unref();
    probe.once("error", (error: NodeJS.ErrnoException) =>
      resolve(`${error.code ?? "error"}: ${error.message}`),
    );
    probe.listen({ port, host: "127.0.0.1", exclusive: true }, () =>
      probe.close(() => resolve(undefined)),
    );
  });
}

/** One command on a fresh socket, for setting up a node; rejects on an error reply. */
export function send(port: number, args: readonly string[]): Promise<void> {
  const frame = `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join("")}`;
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    socket.setTimeout(5_000, () => {
      socket.destroy();
      reject(new RedquorumError("ERR_CLUSTER", `node on port ${port} did not answer ${args[0]}`));
    });
    socket.once("error", reject);
    socket.once("connect", () => socket.write(frame));
    socket.once("data", (data) => {
      socket.destroy();
      const reply = data.toString();
      if (reply.startsWith("-"))
        reject(new RedquorumError("ERR_CLUSTER", `node on port ${port}: ${reply.trim()}`));
      else resolve();
    });
  });
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() =>
        port && port !== 6379 ? resolve(port) : freePort().then(resolve, reject),
      );
    });
  });
}

/**
 * The process id of the redis-server answering on `port` (INFO server's
 * `process_id`), or undefined when none answers within 500 ms. Two clusters
 * started side by side can be handed the same free port: the one whose
 * redis-server lost the bind must not take the other's node for its own.
 */
export function serverPid(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    let reply = "";
    const done = (pid: number | undefined) => {
      socket.destroy();
      resolve(pid);
    };
    socket.setTimeout(500, () => done(undefined));
    socket.once("error", () => done(undefined));
    socket.once("connect", () => socket.write("INFO server\r\n"));
    socket.on("data", (data) => {
      reply += data.toString();
      const match = /\r\nprocess_id:(\d+)\r\n/.exec(reply);
      if (match) done(Number(match[1]));
      else if (reply.startsWith("-") || reply.length > 65_536) done(undefined);
    });
  });
}

/** One PING on a fresh socket; true on +PONG. Only a readiness probe, not a client. */
export function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once("error", () => done(false));
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.once("data", (data) => done(data.toString().startsWith("+PONG")));
  });
}
