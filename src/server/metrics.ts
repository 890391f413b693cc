/**
 * The ID server's Prometheus metrics (prom-client, on a registry of its own
 * so an embedding process's default registry is left alone). NextId's
 * events feed the round and node metrics; the HTTP layer feeds the rest.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import type { NodeState, RedquorumEvent } from "../observe.js";

/** Node states in which a node's votes do not count. */
const outOfService: ReadonlySet<NodeState> = new Set([
  "unreachable",
  "excluded",
  "quarantined",
  "needs repair",
]);

// Seconds. Rounds on local nodes take well under a millisecond without
// fsync and a few with it; the top buckets catch node timeouts and retries.
const latencyBuckets = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5];

export class IdServerMetrics {
  readonly registry = new Registry();
  /** HTTP answers by status, and IDs handed out: read by the counters' collect(). */
  private readonly answered = new Map<number, number>();
  private issued = 0;
  private readonly requestSeconds: Histogram;
  private readonly rounds: Counter<"outcome">;
  private readonly roundSeconds: Histogram;
  private readonly retries: Counter;
  private readonly nodeErrors: Counter<"node" | "state">;
  private readonly repairs: Counter<"node">;
  private readonly quarantined: Counter<"node">;
  private readonly nodeInService: Gauge<"node">;
  /** The server's request counts, read at each scrape (see `watchRequests`). */
  private requestCounts: () => { inFlight: number; reading: number } = () => ({
    inFlight: 0,
    reading: 0,
  });

  constructor(endpoints: readonly string[]) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    // The two counters every request adds to are kept as plain numbers and
    // handed to prom-client when scraped: its label hashing per request was
    // a measurable share of the hot path.
    const answered = this.answered;
    const issued = () => this.issued;
    new Counter({
      name: "redquorum_ids_issued_total",
      help: "IDs handed out in successful responses",
      registers,
      collect() {
        this.reset();
        this.inc(issued());
      },
    });
    new Counter({
      name: "redquorum_http_requests_total",
      help: "HTTP requests answered, by status code",
      labelNames: ["code"],
      registers,
      collect() {
        this.reset();
        for (const [code, n] of answered) this.inc({ code: String(code) }, n);
      },
    });
    this.requestSeconds = new Histogram({
      name: "redquorum_id_request_duration_seconds",
      help: "Time from a POST /v1/ids request's arrival to its response",
      buckets: latencyBuckets,
      registers,
    });
    this.rounds = new Counter({
      name: "redquorum_id_rounds_total",
      help: "NextId quorum rounds, by outcome (one round serves every request waiting for it)",
      labelNames: ["outcome"],
      registers,
    });
    this.roundSeconds = new Histogram({
      name: "redquorum_id_round_duration_seconds",
      help: "Duration of one NextId quorum round",
      buckets: latencyBuckets,
      registers,
    });
    this.retries = new Counter({
      name: "redquorum_id_retries_total",
      help: "Lost rounds: the requests they carried are retried in a later round",
      registers,
    });
    this.nodeErrors = new Counter({
      name: "redquorum_node_errors_total",
      help: "Times a node went out of service, by node and the state it went to",
      labelNames: ["node", "state"],
      registers,
    });
    this.quarantined = new Counter({
      name: "redquorum_node_lost_counter_total",
      help: "Times a node was found to have lost or possibly rolled back its ID counter",
      labelNames: ["node"],
      registers,
    });
    this.repairs = new Counter({
      name: "redquorum_node_repairs_total",
      help: "Times a node's lost ID counter was raised from a majority",
      labelNames: ["node"],
      registers,
    });
    this.nodeInService = new Gauge({
      name: "redquorum_node_in_service",
      help: "1 while this server counts the node's votes, 0 while it is out",
      labelNames: ["node"],
      registers,
    });
    // Read when scraped, not kept up to date per request: two gauge updates
    // per request and stage were a measurable share of the hot path.
    const counts = () => this.requestCounts();
    new Gauge({
      name: "redquorum_id_requests_in_flight",
      help: "POST /v1/ids requests whose body is in, not yet answered (bounded by --max-in-flight)",
      registers,
      collect() {
        this.set(counts().inFlight);
      },
    });
    new Gauge({
      name: "redquorum_id_requests_reading_body",
      help: "POST /v1/ids requests whose body is still arriving (bounded in time by --body-timeout)",
      registers,
      collect() {
        this.set(counts().reading);
      },
    });
    for (const node of endpoints) {
      // Until the first contact's check of the node says otherwise: `serve`
      // makes it at start (NextId.connect), so a node never reachable is 0
      // within a check timeout, not 1 until a request's rounds meet it.
      this.nodeInService.set({ node }, 1);
      // Zero series, so a rate() over them exists before the first error.
      this.nodeErrors.inc({ node, state: "unreachable" }, 0);
      this.repairs.inc({ node }, 0);
      this.quarantined.inc({ node }, 0);
    }
    this.rounds.inc({ outcome: "won" }, 0);
    this.rounds.inc({ outcome: "lost" }, 0);
  }

  /** NextId's `onEvent`. */
  readonly onEvent = (event: RedquorumEvent): void => {
    if (event.type === "id-round") {
      this.rounds.inc({ outcome: event.outcome });
      this.roundSeconds.observe(event.durationMs / 1000);
      if (event.outcome === "lost") this.retries.inc();
    } else if (event.type === "node") {
      const node = event.endpoint;
      this.nodeInService.set({ node }, outOfService.has(event.state) ? 0 : 1);
      if (outOfService.has(event.state)) this.nodeErrors.inc({ node, state: event.state });
      if (event.state === "needs repair") this.quarantined.inc({ node });
      if (event.state === "repaired") this.repairs.inc({ node });
    }
  };

  /** Where the request gauges read their values from: the server's own counts. */
  watchRequests(counts: () => { inFlight: number; reading: number }): void {
    this.requestCounts = counts;
  }

  request(code: number, startedMs: number | undefined, ids: number): void {
    this.answered.set(code, (this.answered.get(code) ?? 0) + 1);
    this.issued += ids;
    if (startedMs !== undefined) {
      this.requestSeconds.observe((performance.now() - startedMs) / 1000);
    }
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
