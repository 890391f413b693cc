/**
 * `redquorum serve`, end to end: server processes started from the source
 * on free ports, real redis-server nodes, HTTP from this process.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { request } from "node:http";
import { createConnection } from "node:net";
import { after, before, describe, it } from "node:test";
import { LocalCluster, NextId } from "../../src/index.js";
import { findIdViolations, type IdCall } from "../helpers/checkers.js";
import { describeSeed, prng, testSeed } from "../helpers/seed.js";

/** tsx's start (about 1 s here) plus first contact with the nodes. */
const startTimeoutMs = 20_000;

interface Server {
  readonly url: string;
  readonly child: ChildProcess;
  /** Every log line so far, parsed. */
  readonly logs: Record<string, unknown>[];
  readonly exited: Promise<number | null>;
}

const servers = new Set<Server>();

async function startServer(
  nodes: readonly string[],
  args: readonly string[] = [],
): Promise<Server> {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "src/cli/main.ts", "serve", "--port", "0", ...args],
    {
      env: { ...process.env, REDQUORUM_NODES: nodes.join(",") },
      stdio: ["ignore", "ignore", "pipe"],
    },
  );
  const logs: Record<string, unknown>[] = [];
  let stderr = "";
  let buffered = "";
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`server not listening after ${startTimeoutMs} ms; stderr: ${stderr}`));
    }, startTimeoutMs);
    child.stderr!.on("data", (chunk: Buffer) => {
      stderr += chunk;
      buffered += chunk;
      const lines = buffered.split("\n");
      buffered = lines.pop()!;
      for (const line of lines) {
        const entry = JSON.parse(line) as Record<string, unknown>;
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
  const server = { url, child, logs, exited };
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
  options: { method?: string; path?: string; body?: string } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}${options.path ?? "/v1/ids"}`,
      { method: options.method ?? "POST", agent: false },
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

/** A metric's value from the Prometheus text (the series with exactly these labels). */
function metric(text: string, series: string): number {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  assert.ok(line, `no series ${series} in /metrics`);
  return Number(line.slice(series.length + 1));
}

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
    for (const [args, flag] of [
      [["--port", "70000"], "--port"],
      [["--max-in-flight", "0"], "--max-in-flight"],
      [["--node-timeout", "5s"], "--node-timeout"],
      [["--drain-timeout", "10"], "--drain-timeout"],
    ] as const) {
      const run = spawnSync(
        process.execPath,
        ["--import", "tsx", "src/cli/main.ts", "serve", ...args],
        {
          env: { ...process.env, REDQUORUM_NODES: nodes.join(",") },
          encoding: "utf8",
          timeout: startTimeoutMs,
        },
      );
      assert.equal(run.status, 2, `${args.join(" ")}: ${run.stderr}`);
      assert.equal(run.stderr.trimEnd().split("\n").length, 1, run.stderr);
      assert.ok(run.stderr.includes(flag), run.stderr);
    }
    const version = spawnSync(
      process.execPath,
      ["--import", "tsx", "src/cli/main.ts", "--version"],
      {
        encoding: "utf8",
        timeout: startTimeoutMs,
      },
    );
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
    // The server still serves after all that.
    assert.equal((await takeIds(main.url)).length, 1);
  });

  it("three servers on the same nodes (one with --proposals clock), many concurrent clients: IDs unique and in real-time order", async () => {
    const seed = testSeed();
    const random = prng(seed);
    // Dense and clock proposals on one counter: the clock server's IDs jump
    // ahead, the dense servers' follow just above them.
    const clockAtStart = BigInt(Date.now() - 1_000) * 1_000n;
    const others = [await startServer(nodes), await startServer(nodes, ["--proposals", "clock"])];
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
      // No new connections once draining.
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
});
