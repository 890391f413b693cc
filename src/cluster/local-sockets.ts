/**
 * Talking to a local node before any client does: a free port, whether a
 * port is taken, a PING probe, and one setup command, each on a fresh socket.
 */
import { createConnection, createServer } from "node:net";
import { RedquorumError } from "../errors.js";

/**
 * Whether something holds `port` on a loopback address redis-server binds
 * (127.0.0.1, and ::1 where the machine has it) so that it could not bind
 * it: a description of the conflict, or undefined when it is free. A
 * listening probe binds as redis-server does (SO_REUSEADDR). A port held
 * on ::1 alone (a dev server listening on "localhost") counts: redis-server
 * skips an address the machine lacks, not one in use, and exits.
 */
export async function portHolder(port: number): Promise<string | undefined> {
  const onV4 = await listenProbe(port, "127.0.0.1");
  if (onV4 !== undefined) return `${onV4.code}: ${onV4.message}`;
  const onV6 = await listenProbe(port, "::1");
  if (onV6 === undefined || ipv6Missing.has(onV6.code)) return undefined;
  return `${onV6.code}: ${onV6.message}`;
}

/** Errors of a ::1 probe that mean the machine has no IPv6 loopback (redis-server skips it too). */
const ipv6Missing = new Set(["EADDRNOTAVAIL", "EAFNOSUPPORT"]);

/** What a port `portHolder` found held is, in words: taken, or not ours to use (EACCES). */
export function portProblem(port: number, holder: string): string {
  return holder.startsWith("EADDRINUSE")
    ? `port ${port} is taken (${holder})`
    : `port ${port} cannot be listened on (${holder})`;
}

function listenProbe(
  port: number,
  host: string,
): Promise<{ code: string; message: string } | undefined> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.unref();
    probe.once("error", (error: NodeJS.ErrnoException) =>
      resolve({ code: error.code ?? "error", message: error.message }),
    );
    probe.listen({ port, host, exclusive: true, ipv6Only: host === "::1" }, () =>
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
