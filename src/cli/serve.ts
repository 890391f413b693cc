/**
 * `redquorum serve`: the HTTP ID server (src/server/id-server.ts) with its
 * configuration from flags and environment, JSON-line logs on stderr, and
 * a drain on SIGTERM/SIGINT/SIGHUP: no new connections, the requests in
 * flight answered (those still unanswered after --drain-timeout get 503
 * "draining"), then NextId closed and exit 0. A second signal during the
 * drain stops waiting: what is unanswered gets 503 "draining" at once,
 * NextId is closed, and the exit code is 128 + the signal's number, as if
 * killed by it (the requests in flight were not all answered).
 */
import { Command, Option } from "commander";
import { NextId } from "../id/next-id.js";
import type { IdProposals } from "../id/options.js";
import { idDefaults, idLimits } from "../limits.js";
import { clientTimeoutMs, IdServer } from "../server/id-server.js";
import { jsonLogger, type LogLevel, logLevels } from "../server/json-log.js";
import { IdServerMetrics } from "../server/metrics.js";
import {
  type NodesOptions,
  nodesFrom,
  nodesOption,
  nodeTimeoutOption,
  proposalsOption,
} from "./common.js";
import { durationOption, formatDuration } from "./duration.js";
import { UsageError } from "./errors.js";
import { signalExitCode } from "./exit-codes.js";
import { parseInteger } from "./integer.js";

interface ServeOptions extends NodesOptions {
  port: number;
  host: string;
  key: string;
  maxCount: number;
  maxBodyBytes: number;
  maxInFlight: number;
  bodyTimeout: number;
  drainTimeout: number;
  requestTimeout: number;
  nodeTimeout: number;
  pipelineDepth: number;
  proposals: IdProposals;
  logLevel: LogLevel;
}

const stopSignals: readonly NodeJS.Signals[] = ["SIGTERM", "SIGINT", "SIGHUP"];

const integerOption = (
  flags: string,
  help: string,
  env: string,
  min: number,
  max: number,
  value: number,
) => {
  const name = flags.split(" ", 1)[0]!;
  return new Option(flags, `${help} (${min} to ${max})`)
    .env(env)
    .default(value)
    .argParser((text) => parseInteger(text, name, min, max));
};

/**
 * `--host`, or `REDQUORUM_HOST`: not empty. node listens on every
 * interface for an empty host, and the server has no authentication: an
 * unset-looking `REDQUORUM_HOST=` must not expose it where the default
 * (127.0.0.1) would not. Every interface is `0.0.0.0` or `::`, said so.
 */
function parseHost(text: string): string {
  if (text.trim() === "") {
    throw new UsageError(
      "--host (REDQUORUM_HOST)",
      "empty: expected an address or host name to listen on, such as 127.0.0.1 (the default), " +
        "or 0.0.0.0 or :: for every interface",
    );
  }
  return text.trim();
}

export function serveCommand(): Command {
  return new Command("serve")
    .description(
      'the HTTP ID server: POST /v1/ids {"count": n} → {"ids": ["…"]}, GET /healthz, ' +
        "GET /metrics (Prometheus); logs one JSON line per event on stderr; SIGTERM drains " +
        "(a second signal stops waiting and exits 128 + its number)",
    )
    .addOption(nodesOption())
    .addOption(
      integerOption(
        "--port <n>",
        "TCP port; 0 picks a free one",
        "REDQUORUM_PORT",
        0,
        65_535,
        8080,
      ),
    )
    .addOption(
      new Option("--host <address>", "address to listen on (0.0.0.0 for every interface)")
        .env("REDQUORUM_HOST")
        .default("127.0.0.1")
        .argParser(parseHost),
    )
    .addOption(
      new Option("--key <key>", "the counter's Redis key (run `redquorum id init` once first)")
        .env("REDQUORUM_ID_KEY")
        .default("redquorum:id"),
    )
    .addOption(
      integerOption(
        "--max-count <n>",
        "most IDs one request may ask for",
        "REDQUORUM_MAX_COUNT",
        1,
        idLimits.batchCountMax,
        1_000,
      ),
    )
    .addOption(
      integerOption(
        "--max-body-bytes <n>",
        "largest request body",
        "REDQUORUM_MAX_BODY_BYTES",
        16,
        1_048_576,
        1_024,
      ),
    )
    .addOption(
      integerOption(
        "--max-in-flight <n>",
        "ID requests waiting for IDs at once (counted once their body is in); more get 503 with Retry-After",
        "REDQUORUM_MAX_IN_FLIGHT",
        1,
        100_000,
        1_024,
      ),
    )
    .addOption(
      durationOption(
        "--body-timeout <duration>",
        `how long a POST /v1/ids body may take after its headers, at most ${clientTimeoutMs / 1_000}s (node's bound on the whole request); then 408 "body_timeout"`,
        "2s",
        { minMs: 1, maxMs: clientTimeoutMs },
      ).env("REDQUORUM_BODY_TIMEOUT"),
    )
    .addOption(
      durationOption(
        "--drain-timeout <duration>",
        'how long SIGTERM waits for requests in flight (then they get 503 "draining"; a second signal stops waiting at once)',
        "10s",
        // Up to an hour: longer is a typo (a shutdown nobody waits for), and
        // orchestrators kill long before (Kubernetes' default grace is 30 s).
        { minMs: 0, maxMs: 3_600_000 },
      ).env("REDQUORUM_DRAIN_TIMEOUT"),
    )
    .addOption(
      durationOption(
        "--request-timeout <duration>",
        'how long a POST /v1/ids waits for its IDs; then 503 "timeout" (NextId alone retries a stalled majority for ~10 s)',
        "5s",
        { minMs: 1, maxMs: 60_000 },
      ).env("REDQUORUM_REQUEST_TIMEOUT"),
    )
    .addOption(nodeTimeoutOption(idDefaults.nodeTimeoutMs, ""))
    .addOption(
      integerOption(
        "--pipeline-depth <n>",
        "NextId rounds in flight at once (each serves every request waiting for it)",
        "REDQUORUM_PIPELINE_DEPTH",
        1,
        idLimits.pipelineDepthMax,
        idDefaults.pipelineDepth,
      ),
    )
    .addOption(proposalsOption().env("REDQUORUM_PROPOSALS"))
    .addOption(
      new Option("--log-level <level>", "least severe log level written")
        .choices(logLevels)
        .env("REDQUORUM_LOG_LEVEL")
        .default("info"),
    )
    .action(async (options: ServeOptions) => {
      await serve(options);
    });
}

async function serve(options: ServeOptions): Promise<void> {
  const nodes = nodesFrom(options);
  // The metrics are named by NextId's endpoints, so they are made after it.
  let metrics: IdServerMetrics | undefined;
  const log = jsonLogger((line) => process.stderr.write(line), options.logLevel);
  // A refused node list lasts: said once, whether first contact finds it
  // or a later check (a change of members while the server runs).
  let refusalLogged = false;
  let refusalWatch: NodeJS.Timeout | undefined;
  const logRefusal = () => {
    const refused = ids.refused;
    if (!refused || refusalLogged) return;
    refusalLogged = true;
    clearInterval(refusalWatch);
    log.error(
      "the node list is refused: every ID request gets 503 until the server is restarted with one that fits",
      { code: refused.code, error: refused.message },
    );
  };
  const ids = new NextId(nodes, {
    key: options.key,
    nodeTimeoutMs: options.nodeTimeout,
    pipelineDepth: options.pipelineDepth,
    proposals: options.proposals,
    logger: log,
    onWarning: (warning) =>
      log.warn(warning.message, { node: warning.endpoint, code: warning.code }),
    // NextId's default is process.emitWarning: a non-JSON line in the log.
    // The logger has an info line for it too; this one is a warning, since
    // the node had lost acknowledged data.
    onRepair: (event) =>
      log.warn("repaired a node's lost ID counter", { node: event.endpoint, value: event.value }),
    onEvent: (event) => metrics?.onEvent(event),
  });
  metrics = new IdServerMetrics(ids.endpoints);
  const server = new IdServer(ids, {
    maxCount: options.maxCount,
    maxBodyBytes: options.maxBodyBytes,
    maxInFlight: options.maxInFlight,
    bodyTimeoutMs: options.bodyTimeout,
    drainTimeoutMs: options.drainTimeout,
    requestTimeoutMs: options.requestTimeout,
    healthCacheMs: 1_000,
    log,
    metrics,
  });

  // The first signal drains, a second one stops the drain's wait.
  let stop!: (signal: NodeJS.Signals) => void;
  const stopped = new Promise<NodeJS.Signals>((resolve) => {
    stop = resolve;
  });
  let hurry!: (signal: NodeJS.Signals) => void;
  const hurried = new Promise<NodeJS.Signals>((resolve) => {
    hurry = resolve;
  });
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (signals === 1) stop(signal);
    else hurry(signal);
  };
  for (const signal of stopSignals) process.on(signal, onSignal);
  try {
    const address = await server.listen(options.port, options.host);
    const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
    log.info("listening", {
      url: `http://${host}:${address.port}`,
      // host:port, never the URLs: they may carry passwords.
      nodes: ids.endpoints,
      key: options.key,
      maxCount: options.maxCount,
      maxInFlight: options.maxInFlight,
    });
    // What the cluster looks like now; the server listens either way
    // (nodes may come up later: /healthz tells).
    void ids.status().then(
      (statuses) => {
        const down = statuses.filter((s) => !s.reachable).map((s) => s.endpoint);
        if (down.length > 0) log.warn("nodes unreachable at start", { nodes: down });
      },
      () => {},
    );
    // First contact now, not at the first request: its checks put each node
    // in or out of service (redquorum_node_in_service follows), and a node
    // list that does not fit the cluster is found before a load balancer
    // sends traffic (/healthz says so). A refusal lasts: said once, here,
    // not as a stack per request.
    // Anything but a refusal (closed by a signal meanwhile): the requests say it.
    ids.connect().then(() => {}, logRefusal);
    // A later refusal is looked for each second: no node event need say it
    // (a node already excluded for another reason reports no new state).
    refusalWatch = setInterval(logRefusal, 1_000);
    refusalWatch.unref();
    const signal = await stopped;
    log.info("draining", { signal, drainTimeout: formatDuration(options.drainTimeout) });
    const drained = server.close();
    // A second signal while draining: stop waiting for the requests in flight.
    const second = await Promise.race([drained.then(() => undefined), hurried]);
    if (second === undefined) {
      const { unfinished } = await drained;
      if (unfinished > 0) log.warn("drain timed out", { unfinished });
    } else {
      const { unfinished } = await server.abort();
      log.warn("second signal: stopped waiting for requests in flight", {
        signal: second,
        unfinished,
      });
      process.exitCode = signalExitCode(second);
    }
  } finally {
    clearInterval(refusalWatch);
    for (const signal of stopSignals) process.off(signal, onSignal);
    await server.close();
    await ids.close();
  }
  log.info("stopped");
}
