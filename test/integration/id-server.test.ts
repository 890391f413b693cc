/**
 * `redquorum serve`, end to end: server processes started from the build (dist/cli.js)
 * on free ports, real redis-server nodes, HTTP from this process.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { Agent, type Server as HttpServer, request } from "node:http";
import { createConnection } from "node:net";
import { networkInterfaces } from "node:os";
import { after, before, describe, it } from "node:test";
import { freePort, send } from "../../src/cluster/local-sockets.js";
import { changeMembers, LocalCluster, NextId } from "../../src/index.js";
import { clientTimeoutMs, IdServer } from "../../src/server/id-server.js";
import { jsonLogger } from "../../src/server/json-log.js";
import { IdServerMetrics } from "../../src/server/metrics.js";
import { cliPath } from "../helpers/built.js";
import { findIdViolations, type IdCall } from "../helpers/checkers.js";
import { connectResult, finished, startCli } from "../helpers/cli.js";
import { describeSeed, prng, testSeed } from "../helpers/seed.js";
import { sleep } from "../helpers/sleep.js";

/** The command's start (about 0.2 s here) plus first contact with the nodes, on a loaded machine. */
const startTimeoutMs = 20_000;

interface Server {
  readonly url: string;
  readonly child: ChildProcess;
  /** Every log line so far, parsed (a line that is not JSON: `{ notJson: line }`). */
  readonly logs: Record<string, unknown>[];
  /** Every line of stderr so far, as written. */
  readonly lines: string[];
  readonly exited: Promise<number | null>;
}

const servers = new Set<Server>();

async function startServer(
  nodes: readonly string[],
  args: readonly string[] = [],
  env: NodeJS.ProcessEnv = {},
): Promise<Server> {
  const child = spawn(process.execPath, [cliPath, "serve", "--port", "0", ...args], {
    env: { ...process.env, REDQUORUM_NODES: nodes.join(","), ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  const logs: Record<string, unknown>[] = [];
  const lines: string[] = [];
  let stderr = "";
  let buffered = "";
  // "close", not "exit": the last log lines are read by then.
  const exited = new Promise<number | null>((resolve) => child.once("close", resolve));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`server not listening after ${startTimeoutMs} ms; stderr: ${stderr}`));
    }, startTimeoutMs);
    child.stderr!.on("data", (chunk: Buffer) => {
      stderr += chunk;
      buffered += chunk;
      const parts = buffered.split("\n");
      buffered = parts.pop()!;
      for (const line of parts) {
        lines.push(line);
        let entry: Record<string, unknown>;
        try {
          entry = JSON.parse(line) as Record<string, unknown>;
        } catch {
          entry = { notJson: line };
        }
        logs.push(entry);
        if (entry.msg === "listening") {
          clearTimeout(timer);
          resolve(entry.url as string);
        }
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening; stderr: ${stderr}`));
    });
  });
  const server = { url, child, logs, lines, exited };
  servers.add(server);
  return server;
}

async function stopServer(
  server: Server,
  signal: NodeJS.Signals = "SIGTERM",
): Promise<number | null> {
  server.child.kill(signal);
  const code = await server.exited;
  servers.delete(server);
  return code;
}

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One HTTP request on a fresh connection (no pooling: every test sees the server as a new client would). */
function http(
  url: string,
  options: {
    method?: string;
    path?: string;
    body?: string | Buffer;
    headers?: Record<string, string>;
    /** A keep-alive agent, for tests of what a client reusing connections sees. */
    agent?: Agent;
  } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}${options.path ?? "/v1/ids"}`,
      {
        method: options.method ?? "POST",
        agent: options.agent ?? false,
        headers: options.headers,
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk) => {
          body += chunk;
        });
        res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body }));
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

async function takeIds(url: string, count?: number): Promise<bigint[]> {
  const reply = await http(url, {
    body: count === undefined ? undefined : JSON.stringify({ count }),
  });
  assert.equal(reply.status, 200, reply.body);
  return (JSON.parse(reply.body) as { ids: string[] }).ids.map(BigInt);
}

/**
 * `takeIds`, asked again while the answer is 503 "timeout" (for at most
 * 10 s): with a --request-timeout of a few hundred ms, a request that meets
 * first contact, or the reconnect to a node just resumed, can run out of it
 * on a loaded machine with nothing wrong.
 */
async function takeIdsServing(url: string, count: number): Promise<bigint[]> {
  const deadline = performance.now() + 10_000;
  for (;;) {
    const reply = await http(url, { body: JSON.stringify({ count }) });
    const timedOut = reply.status === 503 && errorOf(reply.body).code === "timeout";
    if (!timedOut || performance.now() > deadline) {
      assert.equal(reply.status, 200, reply.body);
      return (JSON.parse(reply.body) as { ids: string[] }).ids.map(BigInt);
    }
    await sleep(50);
  }
}

interface RawReply {
  /** The status line's code, or undefined when the server sent nothing. */
  status: number | undefined;
  body: string;
  /** Milliseconds from the connection to its close by the server. */
  elapsedMs: number;
}

/**
 * `head` as written, on a socket of its own, then one byte of body every
 * `trickleMs` if given (a client that stalls mid-request); what came back
 * once the server closed the connection.
 */
function rawHttp(url: string, head: string, trickleMs?: number): Promise<RawReply> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const startMs = performance.now();
    const socket = createConnection({ host: hostname, port: Number(port) });
    let reply = "";
    let timer: ReturnType<typeof setInterval> | undefined;
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      reply += chunk;
    });
    socket.on("error", () => {}); // a reset: what arrived before it is the reply
    socket.once("connect", () => {
      socket.write(head);
      if (trickleMs !== undefined) {
        timer = setInterval(() => {
          if (socket.writable) socket.write(" ");
        }, trickleMs);
      }
    });
    socket.once("close", () => {
      clearInterval(timer);
      const [status, body] = parseReply(reply);
      resolve({ status, body, elapsedMs: performance.now() - startMs });
    });
    socket.once("timeout", () => reject(new Error("no close")));
  });
}

/**
 * A raw connection kept open across requests (keep-alive, pipelining):
 * what the server wrote on it, and how it ended.
 */
class RawConnection {
  text = "";
  /** The socket's error, if it ended with one (a reset: ECONNRESET, EPIPE). */
  error: NodeJS.ErrnoException | undefined;
  readonly closed: Promise<void>;
  private readonly socket: ReturnType<typeof createConnection>;
  /** Told of every chunk and of the close. */
  private readonly listeners = new Set<() => void>();

  private constructor(socket: ReturnType<typeof createConnection>) {
    this.socket = socket;
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      this.text += chunk;
      for (const listener of this.listeners) listener();
    });
    socket.once("close", () => {
      for (const listener of this.listeners) listener();
    });
    socket.on("error", (error) => {
      this.error = error;
    });
    this.closed = new Promise((resolve) => socket.once("close", () => resolve()));
  }

  static async open(url: string): Promise<RawConnection> {
    const { hostname, port } = new URL(url);
    const socket = createConnection({ host: hostname, port: Number(port) });
    const connection = new RawConnection(socket);
    await new Promise<void>((resolve, reject) => {
      socket.once("connect", () => resolve());
      socket.once("error", reject);
    });
    return connection;
  }

  send(text: string): void {
    this.socket.write(text);
  }

  /** The complete responses so far. */
  replies(): RawResponse[] {
    return parseResponses(this.text);
  }

  /** Resolves once `n` responses are in or the connection is closed, whichever first. */
  until(n: number): Promise<void> {
    return new Promise((resolve) => {
      const check = () => {
        if (this.replies().length >= n || this.socket.closed) {
          this.listeners.delete(check);
          resolve();
        }
      };
      this.listeners.add(check);
      check();
    });
  }

  destroy(): void {
    this.socket.destroy();
  }
}

/** A connection's error code, if it ended with one. */
function connectionError(connection: RawConnection): string | undefined {
  return connection.error?.code ?? connection.error?.message;
}

interface RawResponse {
  status: number;
  /** Header names in lower case. */
  headers: Record<string, string>;
  body: string;
}

/** The complete HTTP/1.1 responses in `text`, in order (each with a Content-Length). */
function parseResponses(text: string): RawResponse[] {
  const responses: RawResponse[] = [];
  let rest = text;
  for (;;) {
    const end = rest.indexOf("\r\n\r\n");
    if (end < 0) return responses;
    const [statusLine, ...lines] = rest.slice(0, end).split("\r\n");
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(":");
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const length = Number(headers["content-length"] ?? 0);
    if (rest.length < end + 4 + length) return responses;
    responses.push({
      status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(statusLine!)?.[1]),
      headers,
      body: rest.slice(end + 4, end + 4 + length),
    });
    rest = rest.slice(end + 4 + length);
  }
}

function parseReply(text: string): [number | undefined, string] {
  const match = /^HTTP\/1\.1 (\d{3}) /.exec(text);
  const end = text.indexOf("\r\n\r\n");
  return [match ? Number(match[1]) : undefined, end >= 0 ? text.slice(end + 4) : ""];
}

/** The JSON error of a reply's body (fails when the body is not one). */
function errorOf(body: string): { code: string; message: string } {
  const parsed = JSON.parse(body) as { error?: { code: string; message: string } };
  assert.ok(parsed.error, `not a JSON error: ${body}`);
  return parsed.error;
}

/** `run` on every item, `width` at a time; the results in the items' order. */
async function inTurns<T, R>(
  items: readonly T[],
  width: number,
  run: (item: T) => Promise<R>,
): Promise<R[]> {
  const results: R[] = [];
  for (let i = 0; i < items.length; i += width) {
    results.push(...(await Promise.all(items.slice(i, i + width).map(run))));
  }
  return results;
}

/** `serve <args>` to its end (for runs that never listen). */
async function runServe(
  nodes: readonly string[],
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ status: number | null; stderr: string }> {
  const run = await finished(
    startCli(["serve", ...args], { REDQUORUM_NODES: nodes.join(","), ...env }),
    startTimeoutMs,
  );
  return { status: run.code, stderr: run.stderr };
}

/** A metric's value from the Prometheus text (the series with exactly these labels). */
function metric(text: string, series: string): number {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  assert.ok(line, `no series ${series} in /metrics`);
  return Number(line.slice(series.length + 1));
}

/** A metric's value, or 0 when the server has no such series. */
function metricOrZero(text: string, series: string): number {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

/** `POST /v1/ids` of one ID, as written on the wire. */
const postOne = "POST /v1/ids HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";

async function waitFor(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs: number,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("redquorum serve (the HTTP ID server)", () => {
  let cluster: LocalCluster;
  let nodes: string[];
  let main: Server;

  before(async () => {
    cluster = await LocalCluster.start({ nodeCount: 5, persistence: "aof-always" });
    nodes = cluster.urls;
    const ids = new NextId(nodes);
    await ids.init();
    await ids.close();
    main = await startServer(nodes);
  });

  after(async () => {
    for (const server of servers) server.child.kill("SIGKILL");
    await cluster.stop();
  });

  it("refuses bad flags with exit 2 and one line naming the flag; --version prints the package's", async () => {
    const cases = [
      [["--port", "70000"], "--port"],
      [["--max-in-flight", "0"], "--max-in-flight"],
      [["--node-timeout", "5s"], "--node-timeout"],
      [["--drain-timeout", "10"], "--drain-timeout"],
      // Up to an hour: it took up to 2^31 - 1 ms (24 days) before.
      [["--drain-timeout", "2h"], "--drain-timeout"],
      [["--request-timeout", "0ms"], "--request-timeout"],
      [["--body-timeout", "0ms"], "--body-timeout"],
      // Node's 10 s bound on the whole request comes first.
      [["--body-timeout", "11s"], "--body-timeout"],
      // node would listen on every interface for an empty host (and, here,
      // run until the test gives up on it).
      [["--port", "0", "--host", ""], "--host"],
      [["--port", "0", "--host", " "], "--host"],
      [["--port", "0"], "REDQUORUM_HOST", { REDQUORUM_HOST: "" }],
    ] as const;
    const runs = await inTurns(cases, 3, ([args, , env]) => runServe(nodes, args, env));
    for (const [i, [args, flag]] of cases.entries()) {
      const run = runs[i]!;
      assert.equal(run.status, 2, `${args.join(" ")}: ${run.stderr}`);
      assert.equal(run.stderr.trimEnd().split("\n").length, 1, run.stderr);
      assert.ok(run.stderr.includes(flag), run.stderr);
    }
    const version = spawnSync(process.execPath, [cliPath, "--version"], {
      encoding: "utf8",
      timeout: startTimeoutMs,
    });
    const pkg = JSON.parse(readFileSync("package.json", "utf8")) as { version: string };
    assert.equal(version.stdout.trim(), pkg.version);
  });

  it("hands out IDs as strings: one for an empty body, n for {count: n}", async () => {
    const [one] = await takeIds(main.url);
    const five = await takeIds(main.url, 5);
    assert.equal(five.length, 5);
    assert.ok(one! < five[0]!);
    for (let i = 1; i < 5; i++) assert.ok(five[i - 1]! < five[i]!);
    const reply = await http(main.url, { body: '{"count": 2}' });
    assert.match(reply.body, /^\{"ids":\["\d+","\d+"\]\}$/);
    assert.equal(reply.headers["content-type"], "application/json");
  });

  it("an absolute-form request target (RFC 9112 §3.2.2) is routed by its path", async () => {
    const { host } = new URL(main.url);
    const connection = await RawConnection.open(main.url);
    try {
      connection.send(
        `POST http://${host}/v1/ids HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 12\r\n\r\n{"count": 2}` +
          `GET http://${host}/healthz HTTP/1.1\r\nHost: ${host}\r\n\r\n` +
          `GET http://${host}/nope?x=1 HTTP/1.1\r\nHost: ${host}\r\n\r\n`,
      );
      await connection.until(3);
      const [ids, health, missing] = connection.replies();
      assert.equal(ids?.status, 200, ids?.body);
      assert.equal((JSON.parse(ids.body) as { ids: string[] }).ids.length, 2);
      assert.equal(health?.status, 200, health?.body);
      assert.equal(JSON.parse(health.body).status, "ok");
      // The 404 names the path, not the whole URL.
      assert.equal(missing?.status, 404, missing?.body);
      assert.match(errorOf(missing.body).message, /^no route \/nope: /);
    } finally {
      connection.destroy();
    }
  });

  it("answers every bad request with its status and a JSON error naming what is allowed", async () => {
    const table: Array<{
      body?: string;
      method?: string;
      path?: string;
      status: number;
      code: string;
    }> = [
      { body: '{"count": 0}', status: 400, code: "bad_count" },
      { body: '{"count": -1}', status: 400, code: "bad_count" },
      { body: '{"count": 1.5}', status: 400, code: "bad_count" },
      { body: '{"count": "3"}', status: 400, code: "bad_count" },
      { body: '{"count": null}', status: 400, code: "bad_count" },
      { body: '{"count": 1001}', status: 400, code: "bad_count" }, // --max-count defaults to 1000
      { body: '{"count": 1e300}', status: 400, code: "bad_count" },
      { body: '{"cnt": 1}', status: 400, code: "bad_body" },
      { body: "[1]", status: 400, code: "bad_body" },
      { body: "null", status: 400, code: "bad_body" },
      { body: '"x"', status: 400, code: "bad_body" },
      { body: "{bad", status: 400, code: "bad_json" },
      { body: '{"count": 1', status: 400, code: "bad_json" },
      { body: `{"count": 1, "pad": "${"x".repeat(2_000)}"}`, status: 413, code: "body_too_large" },
      { method: "GET", status: 405, code: "method_not_allowed" },
      { method: "PUT", body: "{}", status: 405, code: "method_not_allowed" },
      { path: "/v2/ids", status: 404, code: "not_found" },
      { method: "POST", path: "/healthz", status: 405, code: "method_not_allowed" },
      // Only the body is read: ?count=5 gave one ID.
      { path: "/v1/ids?count=5", status: 400, code: "bad_query" },
      { path: "/v1/ids?count=2&x", body: '{"count": 2}', status: 400, code: "bad_query" },
    ];
    for (const row of table) {
      const reply = await http(main.url, row);
      const what = `${row.method ?? "POST"} ${row.path ?? "/v1/ids"} ${row.body?.slice(0, 40) ?? ""}`;
      assert.equal(reply.status, row.status, `${what}: ${reply.body}`);
      const { error } = JSON.parse(reply.body) as { error: { code: string; message: string } };
      assert.equal(error.code, row.code, what);
      assert.ok(error.message.length > 10, what);
      if (row.status === 405) assert.ok(reply.headers.allow, `${what}: no Allow header`);
    }
    const bad = await http(main.url, { body: '{"count": 0}' });
    assert.match(bad.body, /expected an integer from 1 to 1000/);
    // 1e400 is Infinity once parsed, which JSON shows as null: the value as given.
    const huge = await http(main.url, { body: '{"count": 1e400}' });
    assert.equal(huge.status, 400, huge.body);
    assert.match(errorOf(huge.body).message, /^"count" is 1e400 \(not a finite number\)/);
    // A compressed body was reported as bad JSON.
    const gzip = await http(main.url, {
      body: Buffer.from([0x1f, 0x8b, 0x08, 0x00]),
      headers: { "Content-Encoding": "gzip" },
    });
    assert.equal(gzip.status, 415, gzip.body);
    assert.equal(errorOf(gzip.body).code, "unsupported_encoding");
    assert.equal(gzip.headers["accept-encoding"], "identity");
    // What node's parser refuses was a bare 400 or 431 with no body.
    for (const [head, status, code] of [
      ["POST /v1/ids HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}", 400, "bad_request"],
      [
        `GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: ${"a".repeat(20_000)}\r\n\r\n`,
        431,
        "headers_too_large",
      ],
      [`GET /${"a".repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`, 431, "headers_too_large"],
      ["NOT HTTP\r\n\r\n", 400, "bad_request"],
    ] as const) {
      const reply = await rawHttp(main.url, head);
      assert.equal(reply.status, status, `${head.slice(0, 40)}: ${reply.body}`);
      assert.equal(errorOf(reply.body).code, code, head.slice(0, 40));
    }
    // The server still serves after all that.
    assert.equal((await takeIds(main.url)).length, 1);
  });

  it("a taken --port, a --host that does not resolve or is no address of this machine: exit 2, one line naming the option", async () => {
    const ownAddresses = Object.values(networkInterfaces())
      .flat()
      .map((i) => i?.address);
    const foreign = "10.1.2.3";
    const cases = [
      // A node's port: taken for sure.
      [["--port", String(cluster.node(0).port)], /address in use; choose another --port$/],
      [["--port", "0", "--host", "nope.invalid"], /does not resolve .*; choose another --host$/],
      ...(ownAddresses.includes(foreign)
        ? []
        : [
            [
              ["--port", "0", "--host", foreign],
              /no interface .* that address; choose another --host$/,
            ] as const,
          ]),
    ] as const;
    const runs = await inTurns(cases, 3, ([args]) => runServe(nodes, args));
    for (const [i, [args, text]] of cases.entries()) {
      const run = runs[i]!;
      assert.equal(run.status, 2, `${args.join(" ")}: ${run.stderr}`);
      assert.equal(run.stderr.trimEnd().split("\n").length, 1, run.stderr);
      assert.match(run.stderr.trimEnd(), /^redquorum: cannot listen on /);
      assert.match(run.stderr.trimEnd(), text);
    }
  });

  it("three servers on the same nodes (one with --proposals clock), many concurrent clients: IDs unique and in real-time order", async () => {
    const seed = testSeed();
    const random = prng(seed);
    // Dense and clock proposals on one counter: the clock server's IDs jump
    // ahead, the dense servers' follow just above them.
    const clockAtStart = BigInt(Date.now() - 1_000) * 1_000n;
    const others = await Promise.all([
      startServer(nodes),
      startServer(nodes, ["--proposals", "clock"]),
    ]);
    const urls = [main.url, ...others.map((s) => s.url)];
    const calls: IdCall[] = [];
    const clients = 24;
    const callsPerClient = 40;
    await Promise.all(
      Array.from({ length: clients }, async (_, c) => {
        for (let i = 0; i < callsPerClient; i++) {
          const url = urls[Math.floor(random() * urls.length)]!;
          const count = 1 + Math.floor(random() * 4);
          const startMs = performance.now();
          const ids = await takeIds(url, count);
          calls.push({ client: `client-${c}@${url}`, startMs, endMs: performance.now(), ids });
        }
      }),
    );
    assert.equal(calls.length, clients * callsPerClient);
    assert.deepEqual(findIdViolations(calls), [], describeSeed(seed));
    // The clock server took part: the counter holds microsecond timestamps now.
    // biome-ignore lint/complexity/useMathMinMax: the IDs are bigints, which Math.max refuses
    const highest = calls.flatMap((c) => c.ids).reduce((a, b) => (a > b ? a : b));
    assert.ok(highest >= clockAtStart, `highest ID ${highest} is no clock value`);
    // The servers' own counts add up to what the clients got.
    const issued = await Promise.all(
      others.map(async (s) =>
        metric(
          (await http(s.url, { method: "GET", path: "/metrics" })).body,
          "redquorum_ids_issued_total",
        ),
      ),
    );
    for (const server of others) assert.equal(await stopServer(server), 0);
    assert.ok(
      issued.every((n) => n > 0),
      `every server served some: ${issued}`,
    );
  });

  it("/metrics is Prometheus text with the ID, round and node metrics", async () => {
    const before = metric(
      (await http(main.url, { method: "GET", path: "/metrics" })).body,
      "redquorum_ids_issued_total",
    );
    await takeIds(main.url, 7);
    const reply = await http(main.url, { method: "GET", path: "/metrics" });
    assert.equal(reply.status, 200);
    assert.match(String(reply.headers["content-type"]), /^text\/plain; version=0\.0\.4/);
    // Every line: a comment, a sample `name{labels} value`, or empty (between
    // families). Values as Go's ParseFloat reads them (prom-client writes "Nan").
    const sample =
      /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"]*")*\})? (-?[0-9.e+-]+|[Nn][Aa][Nn]|[+-][Ii]nf)$/;
    for (const line of reply.body.trimEnd().split("\n")) {
      if (line !== "" && !line.startsWith("#")) assert.match(line, sample);
    }
    assert.equal(metric(reply.body, "redquorum_ids_issued_total"), before + 7);
    assert.ok(metric(reply.body, 'redquorum_id_rounds_total{outcome="won"}') > 0);
    assert.ok(metric(reply.body, "redquorum_id_round_duration_seconds_count") > 0);
    for (const node of nodes) {
      const endpoint = node.replace("redis://", "");
      assert.equal(
        metric(reply.body, `redquorum_node_in_service{node="${endpoint}"}`),
        1,
        endpoint,
      );
    }
    for (const name of [
      "redquorum_id_retries_total",
      "redquorum_id_requests_in_flight",
      'redquorum_http_requests_total{code="200"}',
    ]) {
      metric(reply.body, name);
    }
  });

  it("/metrics: nodes never reachable are out of service (0) from the start check, before any request", async () => {
    const dead = [await freePort(), await freePort(), await freePort()].map(
      (port) => `redis://127.0.0.1:${port}`,
    );
    const server = await startServer(dead);
    try {
      const series = dead.map(
        (url) => `redquorum_node_in_service{node="${url.replace("redis://", "")}"}`,
      );
      // An alert on redquorum_node_in_service == 0 must fire: it said 1
      // until a request's rounds met the nodes.
      let text = "";
      await waitFor(
        "every node out of service",
        async () => {
          text = (await http(server.url, { method: "GET", path: "/metrics" })).body;
          return series.every((name) => metric(text, name) === 0);
        },
        10_000,
      );
      for (const url of dead) {
        const node = url.replace("redis://", "");
        assert.ok(
          metric(text, `redquorum_node_errors_total{node="${node}",state="unreachable"}`) >= 1,
          node,
        );
      }
      assert.equal(metricOrZero(text, 'redquorum_http_requests_total{code="200"}'), 0);
    } finally {
      assert.equal(await stopServer(server), 0);
    }
  });

  it("/metrics: a node that was out of service and came back reads 1 again without any ID request (scrapes check it)", async () => {
    const paused = [3];
    const server = await startServer(nodes);
    const series = `redquorum_node_in_service{node="${nodes[3]!.replace("redis://", "")}"}`;
    const inService = async () =>
      metric((await http(server.url, { method: "GET", path: "/metrics" })).body, series);
    try {
      for (const i of paused) cluster.pause(i);
      await waitFor(
        "the paused node out of service",
        async () => (await inService()) === 0,
        10_000,
      );
      for (const i of paused) cluster.resume(i);
      // No request: before, it stayed 0 until one came, and an idle
      // server's alert fired on a healthy node.
      await waitFor("the node back in service", async () => (await inService()) === 1, 10_000);
    } finally {
      for (const i of paused) if (cluster.node(i).state === "paused") cluster.resume(i);
      assert.equal(await stopServer(server), 0);
    }
  });

  it("HEAD works wherever GET does: the same status and headers, no body; a 405 lists HEAD beside GET", async () => {
    for (const path of ["/metrics", "/healthz"]) {
      const get = await http(main.url, { method: "GET", path });
      const head = await http(main.url, { method: "HEAD", path });
      assert.equal(head.status, get.status, `HEAD ${path}: ${head.status}`);
      assert.equal(head.status, 200, `HEAD ${path}`);
      assert.equal(head.body, "", `HEAD ${path}`);
      assert.equal(head.headers["content-type"], get.headers["content-type"], `HEAD ${path}`);
      // The length of the body GET would send (/metrics changes between two reads).
      assert.ok(Number(head.headers["content-length"]) > 0, `HEAD ${path}: no Content-Length`);
      if (path === "/healthz") {
        assert.equal(head.headers["content-length"], get.headers["content-length"]);
      }
    }
    for (const [method, path, allow] of [
      ["POST", "/metrics", "GET, HEAD"],
      ["DELETE", "/healthz", "GET, HEAD"],
      ["GET", "/v1/ids", "POST"],
      ["HEAD", "/v1/ids", "POST"],
    ] as const) {
      const reply = await http(main.url, { method, path });
      assert.equal(reply.status, 405, `${method} ${path}`);
      assert.equal(reply.headers.allow, allow, `${method} ${path}`);
      if (method === "HEAD") assert.equal(reply.body, "");
      else assert.equal(errorOf(reply.body).code, "method_not_allowed");
    }
    const missing = await http(main.url, { method: "HEAD", path: "/nope" });
    assert.equal(missing.status, 404);
    assert.equal(missing.body, "");
  });

  it("more requests in flight than --max-in-flight get 503 with Retry-After; the rest are served", async () => {
    const small = await startServer(nodes, ["--max-in-flight", "2"]);
    const paused = [0, 1, 2];
    try {
      // With a majority stopped, requests wait in NextId's retries (up to 30 lost rounds).
      for (const i of paused) cluster.pause(i);
      const waiting = [takeIds(small.url), takeIds(small.url)];
      await waitFor(
        "two requests in flight",
        async () =>
          metric(
            (await http(small.url, { method: "GET", path: "/metrics" })).body,
            "redquorum_id_requests_in_flight",
          ) === 2,
        5_000,
      );
      const refused = await http(small.url, { body: "{}" });
      assert.equal(refused.status, 503, refused.body);
      assert.equal(refused.headers["retry-after"], "1");
      assert.equal(JSON.parse(refused.body).error.code, "overloaded");
      for (const i of paused) cluster.resume(i);
      const served = await Promise.all(waiting);
      assert.deepEqual(
        served.map((ids) => ids.length),
        [1, 1],
      );
    } finally {
      for (const i of paused) if (cluster.node(i).state === "paused") cluster.resume(i);
      assert.equal(await stopServer(small), 0);
    }
  });

  it("pipelined requests of a client that goes away free their slots", async () => {
    const paused = [0, 1, 2];
    const inFlight = async () =>
      metric(
        (await http(main.url, { method: "GET", path: "/metrics" })).body,
        "redquorum_id_requests_in_flight",
      );
    const { hostname, port } = new URL(main.url);
    const socket = createConnection({ host: hostname, port: Number(port) });
    try {
      for (const i of paused) cluster.pause(i);
      await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
      // Three requests back to back on one connection (HTTP/1.1 pipelining).
      const body = '{"count": 1}';
      const one = `POST /v1/ids HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
      socket.write(one.repeat(3));
      await waitFor("three requests in flight", async () => (await inFlight()) === 3, 5_000);
      socket.destroy();
      for (const i of paused) cluster.resume(i);
      // Before: the two queued behind the first stayed counted forever.
      await waitFor("every slot freed", async () => (await inFlight()) === 0, 10_000);
    } finally {
      socket.destroy();
      for (const i of paused) if (cluster.node(i).state === "paused") cluster.resume(i);
    }
  });

  it("pipelined requests of a client that goes away leave nothing of theirs in the server", async () => {
    // In process, to see what the server keeps: a response queued behind
    // another on its connection never gets the socket, so it never closes.
    const ids = new NextId(nodes);
    const server = new IdServer(ids, {
      maxCount: 100,
      maxBodyBytes: 1_024,
      maxInFlight: 100,
      bodyTimeoutMs: 2_000,
      drainTimeoutMs: 5_000,
      requestTimeoutMs: 5_000,
      healthCacheMs: 1_000,
      log: jsonLogger(() => {}, "error"),
      metrics: new IdServerMetrics(ids.endpoints),
    });
    const paused = [0, 1, 2];
    const sockets: ReturnType<typeof createConnection>[] = [];
    try {
      const { port } = await server.listen(0, "127.0.0.1");
      await ids.next(); // first contact over before the nodes pause
      for (const i of paused) cluster.pause(i);
      const body = '{"count": 1}';
      const one = `POST /v1/ids HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
      for (let c = 0; c < 5; c++) {
        const socket = createConnection({ host: "127.0.0.1", port });
        socket.on("error", () => {});
        sockets.push(socket);
        await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
        socket.write(one.repeat(3));
      }
      const open = (server as unknown as { open: Map<unknown, unknown> }).open;
      await waitFor("15 requests held", async () => open.size === 15, 5_000);
      for (const socket of sockets) socket.destroy();
      for (const i of paused) cluster.resume(i);
      await waitFor("nothing kept of the requests", async () => open.size === 0, 10_000);
    } finally {
      for (const socket of sockets) socket.destroy();
      for (const i of paused) if (cluster.node(i).state === "paused") cluster.resume(i);
      await server.close();
      await ids.close();
    }
  });

  it("a /healthz request the parser refuses while /healthz is 503 gets one JSON 400, and the server lives on", async () => {
    // A counter never initialised: /healthz is 503 (after a node read).
    const server = await startServer(nodes, ["--key", "redquorum:id:healthz-never"]);
    const probe = await http(server.url, { method: "GET", path: "/healthz" });
    assert.equal(probe.status, 503, probe.body);
    // The parser's error comes in the tick of the request itself, before
    // the verdict: the handler must not answer a second time.
    const bad = await rawHttp(
      server.url,
      "GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    );
    assert.equal(bad.status, 400, bad.body);
    assert.equal(errorOf(bad.body).code, "bad_request");
    await new Promise((r) => setTimeout(r, 1_500)); // the verdict (a node read) has come back
    const after = await http(server.url, { method: "GET", path: "/healthz" });
    assert.equal(after.status, 503, after.body);
    assert.equal(await stopServer(server), 0);
  });

  it("/healthz is 200 with a majority usable and 503 without, saying why", async () => {
    const healthy = await http(main.url, { method: "GET", path: "/healthz" });
    assert.equal(healthy.status, 200, healthy.body);
    assert.equal(JSON.parse(healthy.body).status, "ok");
    const paused = [2, 3, 4];
    try {
      for (const i of paused) cluster.pause(i);
      // The verdict is cached for 1 s; a stopped node costs one check timeout (2 s).
      let last: Reply | undefined;
      await waitFor(
        "healthz 503",
        async () => {
          last = await http(main.url, { method: "GET", path: "/healthz" });
          return last.status === 503;
        },
        10_000,
      );
      const body = JSON.parse(last!.body) as {
        status: string;
        usable: number;
        needed: number;
        reasons: string[];
      };
      assert.equal(body.status, "unavailable");
      assert.equal(body.needed, 3);
      assert.ok(body.usable < 3);
      assert.ok(body.reasons.length >= 3, last!.body);
    } finally {
      for (const i of paused) cluster.resume(i);
    }
    await waitFor(
      "healthz 200 again",
      async () => (await http(main.url, { method: "GET", path: "/healthz" })).status === 200,
      10_000,
    );
  });

  it("a node list the cluster refuses (3 of its 5 members): /healthz 503 naming it, requests 503 with its code, no Retry-After, no stacks", async () => {
    const server = await startServer(nodes.slice(0, 3));
    try {
      // Found by the server's start check, before any request: every node
      // listed is usable, and still no ID can be served.
      let health: Reply | undefined;
      await waitFor(
        "healthz refused",
        async () => {
          health = await http(server.url, { method: "GET", path: "/healthz" });
          return health.status === 503;
        },
        10_000,
      );
      const body = JSON.parse(health!.body) as { status: string; code: string; reasons: string[] };
      assert.equal(body.status, "refused", health!.body);
      assert.equal(body.code, "ERR_MEMBERSHIP");
      assert.match(body.reasons[0]!, /the node list has 3 nodes but cluster \S+ .*has 5 members/);
      // It lasts until the server is restarted with the cluster's list:
      // no Retry-After asking clients back every second.
      assert.equal(health!.headers["retry-after"], undefined);
      for (let i = 0; i < 3; i++) {
        const reply = await http(server.url, { body: '{"count": 2}' });
        assert.equal(reply.status, 503, reply.body);
        assert.equal(errorOf(reply.body).code, "ERR_MEMBERSHIP");
        assert.equal(reply.headers["retry-after"], undefined);
      }
      await waitFor(
        "the refusal logged",
        async () => server.logs.some((l) => String(l.msg).startsWith("the node list is refused")),
        5_000,
      );
    } finally {
      assert.equal(await stopServer(server), 0);
    }
    const refusals = server.logs.filter((l) =>
      String(l.msg).startsWith("the node list is refused"),
    );
    assert.equal(refusals.length, 1, JSON.stringify(server.logs));
    assert.equal(refusals[0]!.code, "ERR_MEMBERSHIP");
    assert.ok(!server.logs.some((l) => l.msg === "request failed"), JSON.stringify(server.logs));
    for (const line of server.lines) assert.ok(!line.includes("\\n    at "), line);
  });

  it("SIGTERM drains: requests in flight are answered, then the server exits 0", async () => {
    const server = await startServer(nodes);
    const paused = [0, 1, 2];
    try {
      for (const i of paused) cluster.pause(i);
      const waiting = [takeIds(server.url, 3), takeIds(server.url, 1)];
      await waitFor(
        "two requests in flight",
        async () =>
          metric(
            (await http(server.url, { method: "GET", path: "/metrics" })).body,
            "redquorum_id_requests_in_flight",
          ) === 2,
        5_000,
      );
      server.child.kill("SIGTERM");
      await waitFor(
        "the drain to start",
        async () => server.logs.some((l) => l.msg === "draining"),
        5_000,
      );
      // No new connections while draining (the requests are still in
      // flight: their nodes are paused). The log line comes just before the
      // listening socket is closed, which takes the server's next turn of
      // its event loop: a connection made in between is reset, not refused.
      const port = Number(new URL(server.url).port);
      await waitFor(
        "new connections refused",
        async () => {
          return (await connectResult(port)) === "ECONNREFUSED";
        },
        5_000,
      );
      await assert.rejects(http(server.url), /ECONNREFUSED/);
      for (const i of paused) cluster.resume(i);
      const served = await Promise.all(waiting);
      assert.deepEqual(
        served.map((ids) => ids.length),
        [3, 1],
      );
      assert.equal(await server.exited, 0);
      servers.delete(server);
      assert.ok(server.logs.some((l) => l.msg === "stopped"));
      assert.ok(!server.logs.some((l) => l.level === "error"), JSON.stringify(server.logs));
    } finally {
      for (const i of paused) if (cluster.node(i).state === "paused") cluster.resume(i);
    }
  });

  /** The server's requests in flight, from /metrics. */
  const inFlightOf = async (server: Server) =>
    metric(
      (await http(server.url, { method: "GET", path: "/metrics" })).body,
      "redquorum_id_requests_in_flight",
    );

  /** The server's requests whose body is still arriving, from /metrics. */
  const readingOf = async (server: Server) =>
    metric(
      (await http(server.url, { method: "GET", path: "/metrics" })).body,
      "redquorum_id_requests_reading_body",
    );

  it("a client that stalls mid-headers is cut off within the headers timeout plus node's 1 s check, with a JSON 408", async () => {
    // In process, with a 1 s bound instead of the 10 s a server gets by
    // default (asserted first): the same timers, a tenth of the wait. A
    // new server: node's checks run every connectionsCheckingInterval from
    // the listen, so with node's default (30 s) the first check after the
    // timeout would come 30 s after it. (A stalled body is cut off sooner,
    // by --body-timeout: the next tests.)
    const requestTimeoutMs = 1_000;
    const checkIntervalMs = 1_000;
    const ids = new NextId(nodes);
    const options = {
      maxCount: 100,
      maxBodyBytes: 1_024,
      maxInFlight: 100,
      bodyTimeoutMs: 500,
      drainTimeoutMs: 5_000,
      requestTimeoutMs: 5_000,
      healthCacheMs: 1_000,
      log: jsonLogger(() => {}, "error"),
      metrics: new IdServerMetrics(ids.endpoints),
    };
    const byDefault = new IdServer(ids, options);
    const bounds = (server: IdServer) => {
      const { requestTimeout, headersTimeout } = (server as unknown as { http: HttpServer }).http;
      return [requestTimeout, headersTimeout];
    };
    assert.deepEqual(bounds(byDefault), [clientTimeoutMs, clientTimeoutMs]);
    assert.equal(clientTimeoutMs, 10_000);
    const server = new IdServer(ids, { ...options, clientTimeoutMs: requestTimeoutMs });
    assert.deepEqual(bounds(server), [requestTimeoutMs, requestTimeoutMs]);
    try {
      const { port } = await server.listen(0, "127.0.0.1");
      const url = `http://127.0.0.1:${port}`;
      // One byte of a header value at a time, the headers never ended.
      const reply = await rawHttp(url, "POST /v1/ids HTTP/1.1\r\nHost: x\r\nX-Slow: ", 100);
      assert.equal(reply.status, 408, reply.body);
      assert.equal(errorOf(reply.body).code, "request_timeout");
      assert.match(errorOf(reply.body).message, /did not arrive whole within 1 s/);
      assert.ok(reply.elapsedMs >= requestTimeoutMs - 50, `cut off early: ${reply.elapsedMs} ms`);
      // One check interval late at most, and one more for a loaded machine.
      assert.ok(
        reply.elapsedMs < requestTimeoutMs + 2 * checkIntervalMs,
        `cut off after ${Math.round(reply.elapsedMs)} ms`,
      );
      assert.equal(await inFlightOf({ url } as Server), 0);
    } finally {
      await server.close();
      await ids.close();
    }
  });

  it("bodies still arriving do not count against --max-in-flight: slow-body clients cannot crowd out ready requests", async () => {
    const maxInFlight = 2;
    const slowClients = 4 * maxInFlight;
    // The environment, not a flag: the server must start either way. The
    // body bound at its most, so the slow clients are still held when the
    // ready request comes.
    const server = await startServer(nodes, ["--max-in-flight", String(maxInFlight)], {
      REDQUORUM_BODY_TIMEOUT: "10s",
    });
    const slow: RawConnection[] = [];
    try {
      for (let i = 0; i < slowClients; i++) {
        const connection = await RawConnection.open(server.url);
        slow.push(connection);
        // Full headers and one byte of a 20-byte body, then nothing.
        connection.send("POST /v1/ids HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n{");
      }
      // Received: waiting for its body, in flight, or answered already (a
      // server that counted them against --max-in-flight refused the rest).
      await waitFor(
        "every slow request received",
        async () => {
          const text = (await http(server.url, { method: "GET", path: "/metrics" })).body;
          const answered = slow.filter((c) => c.replies().length > 0).length;
          return (
            metricOrZero(text, "redquorum_id_requests_reading_body") +
              metric(text, "redquorum_id_requests_in_flight") +
              answered ===
            slowClients
          );
        },
        5_000,
      );
      const reply = await http(server.url, { body: '{"count": 2}' });
      assert.equal(reply.status, 200, reply.body);
      assert.equal((JSON.parse(reply.body) as { ids: string[] }).ids.length, 2);
      // The slow ones were still there, waiting for their bodies, not in flight.
      const text = (await http(server.url, { method: "GET", path: "/metrics" })).body;
      assert.equal(metric(text, "redquorum_id_requests_reading_body"), slowClients);
      assert.equal(metric(text, "redquorum_id_requests_in_flight"), 0);
      for (const connection of slow) connection.destroy();
      await waitFor(
        "the slow bodies forgotten",
        async () => (await readingOf(server)) === 0,
        5_000,
      );
    } finally {
      for (const connection of slow) connection.destroy();
      assert.equal(await stopServer(server), 0);
    }
  });

  it("a client whose body stalls gets a JSON 408 body_timeout after --body-timeout, not after the 10 s request timeout", async () => {
    const bodyTimeoutMs = 500;
    const requestTimeoutMs = 10_000;
    const server = await startServer(nodes, [], { REDQUORUM_BODY_TIMEOUT: `${bodyTimeoutMs}ms` });
    try {
      // The body keeps coming, a byte at a time: the bound is on the whole
      // body, not on a pause in it.
      const reply = await rawHttp(
        server.url,
        "POST /v1/ids HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{",
        bodyTimeoutMs / 5,
      );
      assert.equal(reply.status, 408, reply.body);
      const error = errorOf(reply.body);
      assert.equal(error.code, "body_timeout");
      assert.match(error.message, /within 500 ms of its headers, the server's body timeout/);
      assert.ok(reply.elapsedMs >= bodyTimeoutMs, `cut off early: ${reply.elapsedMs} ms`);
      assert.ok(
        reply.elapsedMs < requestTimeoutMs,
        `cut off after ${Math.round(reply.elapsedMs)} ms`,
      );
      assert.equal(await readingOf(server), 0);
      assert.equal(await inFlightOf(server), 0);
      // The server serves on.
      assert.equal((await takeIds(server.url)).length, 1);
    } finally {
      assert.equal(await stopServer(server), 0);
    }
  });

  it("SIGTERM: a request whose body is still arriving when --drain-timeout ends gets a JSON 503 draining, not a reset", async () => {
    const drainTimeoutMs = 300;
    // The body's own bound far beyond the drain's: the drain ends first.
    const server = await startServer(nodes, [
      "--drain-timeout",
      `${drainTimeoutMs}ms`,
      "--body-timeout",
      "10s",
    ]);
    const slow = rawHttp(
      server.url,
      "POST /v1/ids HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{",
      drainTimeoutMs / 4,
    );
    await waitFor("the slow body being read", async () => (await readingOf(server)) === 1, 5_000);
    server.child.kill("SIGTERM");
    const reply = await slow;
    assert.equal(reply.status, 503, reply.body);
    assert.equal(errorOf(reply.body).code, "draining");
    assert.equal(await server.exited, 0);
    servers.delete(server);
    const timedOut = server.logs.find((l) => l.msg === "drain timed out");
    assert.equal(timedOut?.unfinished, 1, JSON.stringify(server.logs));
  });

  it("a second SIGTERM during the drain stops waiting: requests in flight get 503 draining, exit 128 + 15", async () => {
    // The drain would wait up to a minute, and so would the requests: the
    // second signal must not.
    const server = await startServer(nodes, ["--drain-timeout", "1m"], {
      REDQUORUM_REQUEST_TIMEOUT: "1m",
    });
    const paused = [0, 1, 2];
    try {
      for (const i of paused) cluster.pause(i);
      const waiting = [http(server.url, { body: "{}" }), http(server.url, { body: "{}" })];
      await waitFor("two requests in flight", async () => (await inFlightOf(server)) === 2, 5_000);
      server.child.kill("SIGTERM");
      await waitFor(
        "the drain to start",
        async () => server.logs.some((l) => l.msg === "draining"),
        5_000,
      );
      server.child.kill("SIGTERM");
      const replies = await Promise.all(waiting);
      for (const reply of replies) {
        assert.equal(reply.status, 503, reply.body);
        assert.equal(errorOf(reply.body).code, "draining");
      }
      assert.equal(await server.exited, 128 + 15);
      servers.delete(server);
      const second = server.logs.find(
        (l) => l.msg === "second signal: stopped waiting for requests in flight",
      );
      assert.equal(second?.unfinished, 2, JSON.stringify(server.logs));
      assert.ok(server.logs.some((l) => l.msg === "stopped"));
    } finally {
      for (const i of paused) if (cluster.node(i).state === "paused") cluster.resume(i);
    }
  });

  it("SIGTERM: responses in flight close their keep-alive connections; the clients' next requests are refused, never reset", async () => {
    const server = await startServer(nodes, ["--drain-timeout", "1m"]);
    const clients = 8;
    const agent = new Agent({ keepAlive: true, maxSockets: clients });
    const paused = [0, 1, 2];
    try {
      for (const i of paused) cluster.pause(i);
      // One keep-alive connection per client, each with a request in flight.
      const first = Array.from({ length: clients }, () => http(server.url, { body: "{}", agent }));
      await waitFor(
        "every client's request in flight",
        async () => (await inFlightOf(server)) === clients,
        5_000,
      );
      server.child.kill("SIGTERM");
      await waitFor(
        "the drain to start",
        async () => server.logs.some((l) => l.msg === "draining"),
        5_000,
      );
      for (const i of paused) cluster.resume(i);
      // Each client asks again as soon as it has its answer, as a client
      // in a loop does.
      const outcomes = await Promise.all(
        first.map(async (reply) => {
          const answer = await reply;
          const next = await http(server.url, { body: "{}", agent }).then(
            (r) => `${r.status} ${r.status === 503 ? errorOf(r.body).code : ""}`,
            (error: NodeJS.ErrnoException) => `${error.code}: ${error.message}`,
          );
          return { answer, next };
        }),
      );
      for (const { answer, next } of outcomes) {
        assert.equal(answer.status, 200, answer.body);
        assert.equal(answer.headers.connection, "close", JSON.stringify(answer.headers));
        // A new connection (refused: the server no longer accepts) or, on
        // one still open, 503 draining; a reset would leave the client
        // unsure whether its request was served.
        assert.match(next, /^(ECONNREFUSED|503 draining)/);
      }
      assert.equal(await server.exited, 0);
      servers.delete(server);
    } finally {
      agent.destroy();
      for (const i of paused) if (cluster.node(i).state === "paused") cluster.resume(i);
    }
  });

  it("SIGTERM: keep-alive clients asking in a loop get every request answered, 200 or 503 draining, the last closing the connection; never a reset", async () => {
    const server = await startServer(nodes);
    const clients = 4;
    const connections = await Promise.all(
      Array.from({ length: clients }, () => RawConnection.open(server.url)),
    );
    let answered = 0;
    // One request at a time on each connection, the next sent as soon as
    // the answer is in, until the server closes it: at the signal some are
    // in flight, some idle with their next request on its way.
    // A client stops sending on a connection once an answer says
    // Connection: close, or the connection is gone.
    const loops = connections.map(async (connection) => {
      let sent = 0;
      for (;;) {
        connection.send(postOne);
        sent++;
        await connection.until(sent);
        const last = connection.replies().at(-1);
        if (connection.replies().length < sent || last?.headers.connection === "close") break;
        answered++;
      }
      return sent;
    });
    await waitFor("a few answers each", async () => answered >= 5 * clients, 10_000);
    server.child.kill("SIGTERM");
    const sent = await Promise.all(loops);
    for (const [c, connection] of connections.entries()) {
      const replies = connection.replies();
      const what = `client ${c}: ${connection.text.slice(-400)}`;
      assert.equal(connection.error, undefined, `${what}: ${connection.error?.code}`);
      // Every request sent was answered (the last one sent was the close's).
      assert.equal(replies.length, sent[c], what);
      for (const reply of replies) {
        if (reply.status !== 200) {
          assert.equal(reply.status, 503, what);
          assert.equal(errorOf(reply.body).code, "draining", what);
        }
      }
      assert.equal(replies.at(-1)!.headers.connection, "close", what);
      for (const reply of replies.slice(0, -1)) {
        assert.equal(reply.headers.connection, "keep-alive", what);
      }
    }
    assert.equal(await server.exited, 0);
    servers.delete(server);
  });

  it("SIGTERM: requests arriving during the drain on open connections, idle or pipelined, get 503 draining in order; the last one closes the connection", async () => {
    const server = await startServer(nodes, ["--drain-timeout", "1m"]);
    const paused = [0, 1, 2];
    let idle: RawConnection | undefined;
    let busy: RawConnection | undefined;
    try {
      // A keep-alive connection that has been answered and is idle at SIGTERM.
      idle = await RawConnection.open(server.url);
      idle.send(postOne);
      const connection = idle;
      await waitFor("the first answer", async () => connection.replies().length === 1, 5_000);
      assert.equal(idle.replies()[0]!.status, 200, idle.text);
      // Another with a request in flight: the drain waits for it.
      for (const i of paused) cluster.pause(i);
      busy = await RawConnection.open(server.url);
      busy.send(postOne);
      await waitFor("a request in flight", async () => (await inFlightOf(server)) === 1, 5_000);
      server.child.kill("SIGTERM");
      await waitFor(
        "the drain to start",
        async () => server.logs.some((l) => l.msg === "draining"),
        5_000,
      );
      // Two requests on each, sent at once (pipelined).
      idle.send(postOne + postOne);
      busy.send(postOne + postOne);
      await idle.closed;
      for (const i of paused) cluster.resume(i);
      await busy.closed;
      const expect = (connection: RawConnection, statuses: number[]) => {
        const replies = connection.replies();
        assert.deepEqual(
          replies.map((r) => r.status),
          statuses,
          connection.text,
        );
        for (const [n, reply] of replies.entries()) {
          if (reply.status === 503) assert.equal(errorOf(reply.body).code, "draining");
          const last = n === replies.length - 1;
          // Close on the last only: one before would leave those after it unanswered.
          assert.equal(reply.headers.connection, last ? "close" : "keep-alive", connection.text);
        }
        assert.equal(connection.error, undefined, `${connection.error?.code}`);
      };
      expect(idle, [200, 503, 503]);
      expect(busy, [200, 503, 503]);
      assert.equal(await server.exited, 0);
      servers.delete(server);
    } finally {
      idle?.destroy();
      busy?.destroy();
      for (const i of paused) if (cluster.node(i).state === "paused") cluster.resume(i);
    }
  });

  it("SIGTERM: a keep-alive connection idle when the drain's last request is answered stays open a moment: a request its client sends then gets 503 draining", async () => {
    const server = await startServer(nodes, ["--drain-timeout", "1m"]);
    const paused = [0, 1, 2];
    let idle: RawConnection | undefined;
    let busy: RawConnection | undefined;
    try {
      idle = await RawConnection.open(server.url);
      idle.send(postOne);
      await idle.until(1);
      for (const i of paused) cluster.pause(i);
      busy = await RawConnection.open(server.url);
      busy.send(postOne);
      await waitFor("a request in flight", async () => (await inFlightOf(server)) === 1, 5_000);
      server.child.kill("SIGTERM");
      await waitFor(
        "the drain to start",
        async () => server.logs.some((l) => l.msg === "draining"),
        5_000,
      );
      for (const i of paused) cluster.resume(i);
      // The drain's last request answered: the drain ends now, and the idle
      // connection's client, told nothing, sends its next request a moment
      // later (well within the server's 1 s linger for idle connections;
      // closing them at once took the server a few milliseconds).
      await busy.until(1);
      await sleep(100);
      idle.send(postOne);
      await idle.closed;
      const replies = idle.replies();
      assert.equal(connectionError(idle), undefined);
      assert.deepEqual(
        replies.map((r) => r.status),
        [200, 503],
        idle.text,
      );
      assert.equal(errorOf(replies[1]!.body).code, "draining");
      assert.equal(replies[1]!.headers.connection, "close");
      assert.equal(await server.exited, 0);
      servers.delete(server);
    } finally {
      idle?.destroy();
      busy?.destroy();
      for (const i of paused) if (cluster.node(i).state === "paused") cluster.resume(i);
    }
  });

  it("with a majority stalled, a request gets 503 timeout after --request-timeout, not after NextId's retries", async () => {
    const requestTimeoutMs = 300;
    const server = await startServer(nodes, [], {
      REDQUORUM_REQUEST_TIMEOUT: `${requestTimeoutMs}ms`,
    });
    const paused = [0, 1, 2];
    try {
      // First contact made: what follows waits only for rounds.
      await takeIdsServing(server.url, 1);
      for (const i of paused) cluster.pause(i);
      const startMs = performance.now();
      const reply = await http(server.url, { body: '{"count": 2}' });
      const elapsedMs = performance.now() - startMs;
      assert.equal(reply.status, 503, reply.body);
      assert.equal(errorOf(reply.body).code, "timeout");
      assert.equal(reply.headers["retry-after"], "1");
      assert.ok(elapsedMs >= requestTimeoutMs - 5, `answered after ${elapsedMs} ms`);
      for (const i of paused) cluster.resume(i);
      // The slot was freed and the server serves again.
      assert.equal(await inFlightOf(server), 0);
      assert.equal((await takeIdsServing(server.url, 2)).length, 2);
    } finally {
      for (const i of paused) if (cluster.node(i).state === "paused") cluster.resume(i);
      assert.equal(await stopServer(server), 0);
    }
  });

  it("at the end of the ID space: 507 with ERR_ID_OVERFLOW and a warning without stack; `id next` exits 6", async () => {
    const key = "id-server-test:overflow";
    const ids = new NextId(nodes, { key });
    await ids.init();
    await ids.close();
    // 7 IDs left below 2^63 - 1.
    for (const node of cluster.nodes) await send(node.port, ["SET", key, "9223372036854775800"]);
    const server = await startServer(nodes, ["--key", key]);
    try {
      assert.deepEqual(
        await takeIds(server.url, 5),
        [1n, 2n, 3n, 4n, 5n].map((i) => 9223372036854775800n + i),
      );
      const reply = await http(server.url, { body: '{"count": 5}' });
      assert.equal(reply.status, 507, reply.body);
      assert.equal(errorOf(reply.body).code, "ERR_ID_OVERFLOW");
      assert.equal(reply.headers["retry-after"], undefined);
      // The log line may come after the answer (another pipe).
      await waitFor(
        "the warning logged",
        async () => server.logs.some((l) => l.msg === "ID space exhausted"),
        5_000,
      );
      const warning = server.logs.find((l) => l.msg === "ID space exhausted");
      assert.equal(warning?.level, "warn", JSON.stringify(server.logs));
      assert.ok(!String(warning.error).includes("\n    at "), String(warning.error));
      assert.ok(!server.logs.some((l) => l.level === "error"), JSON.stringify(server.logs));
    } finally {
      assert.equal(await stopServer(server), 0);
    }
    const run = spawnSync(process.execPath, [cliPath, "id", "next", "--key", key, "--count", "5"], {
      env: { ...process.env, REDQUORUM_NODES: nodes.join(",") },
      encoding: "utf8",
      timeout: startTimeoutMs,
    });
    assert.equal(run.status, 6, run.stderr);
    assert.equal(run.stderr.trimEnd().split("\n").length, 1, run.stderr);
    assert.match(run.stderr, /the largest ID is 9223372036854775807/);
  });

  it("near the end of the ID space, a large request does not fail the smaller ones that fit beside it", async () => {
    const key = "id-server-test:overflow-mixed";
    const ids = new NextId(nodes, { key });
    await ids.init();
    await ids.close();
    // 17 IDs left below 2^63 - 1.
    for (const node of cluster.nodes) await send(node.port, ["SET", key, "9223372036854775790"]);
    const server = await startServer(nodes, ["--key", key]);
    const connection = await RawConnection.open(server.url);
    try {
      const post = (count: number) => {
        const body = JSON.stringify({ count });
        return `POST /v1/ids HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
      };
      // One write: the requests arrive together and share a call.
      connection.send(post(2) + post(100) + post(15));
      await connection.until(3);
      const [small, large, rest] = connection.replies();
      assert.equal(small?.status, 200, small?.body);
      assert.deepEqual(JSON.parse(small.body), {
        ids: ["9223372036854775791", "9223372036854775792"],
      });
      assert.equal(large?.status, 507, large?.body);
      assert.equal(errorOf(large.body).code, "ERR_ID_OVERFLOW");
      assert.equal(rest?.status, 200, rest?.body);
      assert.deepEqual(
        (JSON.parse(rest.body) as { ids: string[] }).ids,
        Array.from({ length: 15 }, (_, i) => String(9223372036854775793n + BigInt(i))),
      );
    } finally {
      connection.destroy();
      assert.equal(await stopServer(server), 0);
    }
  });

  it("a counter never initialised: 503 ERR_NOT_INITIALIZED naming the command to run, a warning without stack", async () => {
    const key = "id-server-test:never-initialised";
    const server = await startServer(nodes, ["--key", key]);
    try {
      const reply = await http(server.url, { body: '{"count": 2}' });
      assert.equal(reply.status, 503, reply.body);
      const { code, message } = errorOf(reply.body);
      assert.equal(code, "ERR_NOT_INITIALIZED");
      // The command, with this server's key; not the library's init().
      assert.match(
        message,
        /run `redquorum id init --key "id-server-test:never-initialised"` once/,
      );
      assert.ok(!message.includes("init()"), message);
      await waitFor(
        "the warning logged",
        async () => server.logs.some((l) => l.msg === "ID counter not initialised"),
        5_000,
      );
      const warning = server.logs.find((l) => l.msg === "ID counter not initialised");
      assert.equal(warning?.level, "warn", JSON.stringify(server.logs));
      assert.match(String(warning.error), /redquorum id init/);
      assert.ok(!server.logs.some((l) => l.level === "error"), JSON.stringify(server.logs));
    } finally {
      assert.equal(await stopServer(server), 0);
    }
  });

  it("a node list refused while the server runs (a member added) is logged as refused, once", async () => {
    const own = await LocalCluster.start({ nodeCount: 4, persistence: "aof-always", init: false });
    try {
      const members = own.urls.slice(0, 3);
      const ids = new NextId(members);
      await ids.init();
      await ids.close();
      const server = await startServer(members);
      try {
        await takeIds(server.url, 2);
        await changeMembers(members, { add: own.urls[3]! });
        // The server's next rounds meet the new record: its list is refused.
        await waitFor(
          "requests refused with ERR_MEMBERSHIP",
          async () => {
            const reply = await http(server.url, { body: '{"count": 1}' });
            return reply.status === 503 && errorOf(reply.body).code === "ERR_MEMBERSHIP";
          },
          10_000,
        );
        // Before, only the node events said it ("<node> excluded: …").
        await waitFor(
          "the refusal logged",
          async () => server.logs.some((l) => String(l.msg).startsWith("the node list is refused")),
          5_000,
        );
        await http(server.url, { body: '{"count": 1}' });
      } finally {
        assert.equal(await stopServer(server), 0);
      }
      const refusals = server.logs.filter((l) =>
        String(l.msg).startsWith("the node list is refused"),
      );
      assert.equal(refusals.length, 1, JSON.stringify(server.logs));
      assert.equal(refusals[0]!.level, "error");
      assert.equal(refusals[0]!.code, "ERR_MEMBERSHIP");
    } finally {
      await own.stop();
    }
  });

  it("passwords in --nodes never reach the log: nodes are named host:port", async () => {
    const secured = await LocalCluster.start({ nodeCount: 3, persistence: "aof-always" });
    const password = "s3cret-pw-in-url";
    const wrong = "wr0ng-pw-in-url";
    try {
      for (const node of secured.nodes) {
        await send(node.port, ["CONFIG", "SET", "requirepass", password]);
      }
      const url = (port: number, pw: string) => `redis://:${pw}@127.0.0.1:${port}`;
      const urls = secured.nodes.map((n) => url(n.port, password));
      const ids = new NextId(urls);
      await ids.init();
      await ids.close();
      // The third with a wrong password: its refusals are logged too.
      const given = [urls[0]!, urls[1]!, url(secured.node(2).port, wrong)];
      const server = await startServer(given);
      await takeIds(server.url, 3);
      await http(server.url, { method: "GET", path: "/healthz" });
      await waitFor(
        "the wrong password logged",
        async () => server.logs.some((l) => JSON.stringify(l).includes("WRONGPASS")),
        5_000,
      );
      assert.equal(await stopServer(server), 0);
      const listening = server.logs.find((l) => l.msg === "listening");
      assert.deepEqual(
        listening?.nodes,
        secured.nodes.map((n) => `127.0.0.1:${n.port}`),
      );
      for (const line of server.lines) {
        assert.ok(!line.includes(password) && !line.includes(wrong), line);
      }
    } finally {
      await secured.stop();
    }
  });

  it("a node restarted empty is repaired: a JSON warning, no process warning in the log", async () => {
    const server = await startServer(nodes);
    try {
      await takeIds(server.url);
      await cluster.restart(4, { keepData: false });
      // Rounds meet the lost counter; it is repaired after NextId's repair delay (2 s).
      await waitFor(
        "the repair logged",
        async () => {
          await takeIds(server.url);
          return server.logs.some((l) => l.state === "repaired");
        },
        15_000,
      );
      // Everything the server wrote, including a process warning on its way.
      assert.equal(await stopServer(server), 0);
      assert.deepEqual(
        server.logs.filter((l) => "notJson" in l),
        [],
      );
      const repaired = server.logs.find((l) => l.msg === "repaired a node's lost ID counter");
      assert.equal(repaired?.level, "warn", JSON.stringify(server.logs));
      assert.equal(repaired.node, `127.0.0.1:${cluster.node(4).port}`);
      assert.match(String(repaired.value), /^\d+$/);
    } finally {
      if (servers.has(server)) await stopServer(server);
    }
  });
});
