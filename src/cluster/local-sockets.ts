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
 * One probe on a fresh socket, PING and INFO server in one write: whether
 * the node is ready (+PONG; a node still loading its data answers
 * -LOADING) and the process id of the redis-server that answered (INFO
 * server's `process_id`), or neither when nothing answers within 500 ms.
 * The pid matters: two clusters started side by side can be handed the
 * same free port, and the one whose redis-server lost the bind must not
 * take the other's node for its own. Only a readiness probe, not a client.
 */
export function probe(port: number): Promise<{ ready: boolean; pid?: number }> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    let reply = "";
    const done = (ready: boolean, pid?: number) => {
      socket.destroy();
      resolve({ ready, pid });
    };
    socket.setTimeout(500, () => done(false));
    socket.once("error", () => done(false));
    socket.once("connect", () => socket.write("PING\r\nINFO server\r\n"));
    socket.on("data", (data) => {
      reply += data.toString();
      const match = /\r\nprocess_id:(\d+)\r\n/.exec(reply);
      if (match) done(reply.startsWith("+PONG"), Number(match[1]));
      else if (reply.length > 65_536) done(false);
    });
  });
}
