/**
 * A RESP-aware TCP proxy on a free loopback port in front of one Redis
 * node: the network faults this kernel cannot make (it has no netem) made
 * in process, switchable at runtime, each one written to the fault log.
 *
 * A proxy's faults apply to every connection through it. For faults per
 * (client, node) — L10's "A sees {1,2,3}, B sees {3,4,5}" — give each
 * workload process its own proxies (`startProxies` once per process): a
 * proxy is the link between one client and one node.
 *
 * Network faults:
 * - `latency(ms, { jitterMs, direction })`: each chunk waits ms ± jitter,
 *   order kept (a later chunk never overtakes an earlier one);
 * - `blackhole()` / `heal()`: a partition. Nothing moves either way and
 *   nothing is answered; new connections are accepted and hang. Unlike
 *   Toxiproxy's `timeout` toxic, bytes are not thrown away but left
 *   unread, as a dead path leaves them in TCP buffers: on heal they flow,
 *   and the RESP stream stays whole (dropping bytes mid-stream would pair
 *   every later reply with the wrong command). `heal({ reset: true })`
 *   resets the connections instead, as when the partition outlasts TCP;
 * - `reset()`: RST every open connection now; `refuseNew()`: RST every new
 *   one at once (as close to ECONNREFUSED as a listening port gets);
 * - `slicer`, `bandwidth`, `slowClose`, `limitData`: Toxiproxy's toxics of
 *   those names;
 * - `trigger({ match, reply, onCommand, onReply })`: act on a command —
 *   swallow its reply, reset after it ran, hold its reply, or call a hook
 *   (kill the node) at that moment. See triggers.ts.
 *
 * `direction`: "down" is node → client (replies, the default), "up" is
 * client → node (commands), "both".
 */
import { once } from "node:events";
import { createServer, type Server, type Socket } from "node:net";
import type { LocalCluster } from "../../../src/index.js";
import { prng } from "../../helpers/seed.js";
import { FaultLog } from "./fault-log.js";
import { Link, type LinkContext } from "./link.js";
import type { StreamConditions } from "./pipe.js";
import { ArmedTrigger, type ProxyCommand, type Trigger, type TriggerSpec } from "./triggers.js";

export type Direction = "up" | "down" | "both";

export interface FaultProxyOptions {
  /** The node's port on 127.0.0.1. */
  readonly targetPort: number;
  /** How the fault log names this link: "node-2", "lock-1→node-2". Default "port <targetPort>". */
  readonly name?: string;
  readonly log?: FaultLog;
  /** Seeds jitter and slice sizes, so a run can be repeated. Default 1. */
  readonly seed?: number;
  /**
   * Called when a trigger's hook throws (the traffic goes on as if the
   * hook had returned). Default: the error is kept in `errors` only.
   */
  readonly onError?: (error: unknown) => void;
}

type StreamFault = "latency" | "slicer" | "bandwidth" | "limit-data";

export class FaultProxy implements AsyncDisposable {
  readonly name: string;
  readonly targetPort: number;
  private readonly server: Server;
  private readonly log: FaultLog;
  private readonly random: () => number;
  private readonly links = new Set<Link>();
  private readonly triggers = new Set<ArmedTrigger>();
  private readonly streams: Record<"up" | "down", StreamConditions> = { up: {}, down: {} };
  /** The end of each fault in force, by name (and direction). */
  private readonly active = new Map<string, () => void>();
  private partitioned = false;
  private refusing = false;
  private slowCloseMs = 0;
  private nextLinkId = 1;
  private closing = false;
  private readonly onError: ((error: unknown) => void) | undefined;
  /** Errors of hooks (and of the proxy itself), in order: a run should fail on any. */
  readonly errors: unknown[] = [];

  private constructor(server: Server, options: FaultProxyOptions) {
    this.server = server;
    this.targetPort = options.targetPort;
    this.name = options.name ?? `port ${options.targetPort}`;
    this.log = options.log ?? new FaultLog();
    this.random = prng(options.seed ?? 1);
    this.onError = options.onError;
    server.on("connection", (socket) => this.accept(socket));
  }

  static async start(options: FaultProxyOptions): Promise<FaultProxy> {
    requireFinite("targetPort", options?.targetPort, 1, 65_535);
    const server = createServer();
    const proxy = new FaultProxy(server, options);
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    return proxy;
  }

  get port(): number {
    const address = this.server.address();
    return typeof address === "object" && address ? address.port : 0;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Open client connections. */
  get connectionCount(): number {
    return this.links.size;
  }

  /** Each chunk waits `ms` ± `jitterMs` (uniform), order kept. `latency(0)` ends it. */
  latency(ms: number, options: { jitterMs?: number; direction?: Direction } = {}): void {
    requireFinite("latency ms", ms, 0, 3_600_000);
    const jitterMs = requireFinite("jitterMs", options.jitterMs ?? 0, 0, ms);
    const on = ms > 0;
    this.setStream(
      "latency",
      options.direction,
      on ? { latency: { ms, jitterMs } } : undefined,
      `${ms}±${jitterMs} ms`,
    );
  }

  /** Delivers in slices of `sizeBytes` ± `sizeVariationBytes`, `delayMs` apart. */
  slicer(options: {
    sizeBytes: number;
    sizeVariationBytes?: number;
    delayMs: number;
    direction?: Direction;
  }): void {
    const sizeBytes = requireFinite("sizeBytes", options?.sizeBytes, 1, 1 << 30);
    const sizeVariationBytes = requireFinite(
      "sizeVariationBytes",
      options.sizeVariationBytes ?? 0,
      0,
      sizeBytes - 1,
    );
    const delayMs = requireFinite("delayMs", options.delayMs, 0, 60_000);
    this.setStream(
      "slicer",
      options.direction,
      { slicer: { sizeBytes, sizeVariationBytes, delayMs } },
      `${sizeBytes}±${sizeVariationBytes} bytes every ${delayMs} ms`,
    );
  }

  /** At most `bytesPerSecond`, paced in 10 ms steps. */
  bandwidth(bytesPerSecond: number, options: { direction?: Direction } = {}): void {
    requireFinite("bytesPerSecond", bytesPerSecond, 1, 1e12);
    this.setStream(
      "bandwidth",
      options.direction,
      { bandwidth: { bytesPerSecond } },
      `${bytesPerSecond} B/s`,
    );
  }

  /** Closes a connection once `bytes` went that way on it (counted since it opened). */
  limitData(bytes: number, options: { direction?: Direction } = {}): void {
    requireFinite("limitData bytes", bytes, 0, 1e15);
    this.setStream("limit-data", options.direction, { limitBytes: bytes }, `${bytes} bytes`);
  }

  /** When one side closes, close the other only `delayMs` later. `slowClose(0)` ends it. */
  slowClose(delayMs: number): void {
    this.slowCloseMs = requireFinite("slowClose delayMs", delayMs, 0, 600_000);
    this.setFault("slow-close", delayMs > 0, `${delayMs} ms`);
  }

  /** A partition: nothing moves either way until `heal()`. */
  blackhole(): void {
    if (this.partitioned) return;
    this.partitioned = true;
    this.setFault("blackhole", true);
    for (const link of this.links) link.hold();
  }

  /** RST every new connection as soon as it is accepted, until `heal()`. */
  refuseNew(): void {
    this.refusing = true;
    this.setFault("refuse", true);
  }

  /** Ends blackhole and refuseNew; with `reset`, the connections the partition held are reset. */
  heal(options: { reset?: boolean } = {}): void {
    const wasPartitioned = this.partitioned;
    this.partitioned = false;
    this.refusing = false;
    this.setFault("blackhole", false);
    this.setFault("refuse", false);
    if (!wasPartitioned) return;
    if (options.reset) this.reset();
    else for (const link of this.links) link.release();
  }

  /** RST every open connection, both ways; returns how many. */
  reset(): number {
    const count = this.links.size;
    if (count > 0)
      this.log.instant({ fault: "reset", target: this.name, detail: `${count} connections` });
    for (const link of [...this.links]) link.reset();
    return count;
  }

  /** Ends one stream fault (in every direction), or with no argument every fault and trigger. */
  clear(fault?: StreamFault | "slow-close"): void {
    if (fault === "slow-close") {
      this.slowClose(0);
      return;
    }
    if (fault) {
      for (const direction of ["up", "down"] as const)
        this.setStream(fault, direction, undefined, "");
      return;
    }
    for (const name of ["latency", "slicer", "bandwidth", "limit-data"] as const) this.clear(name);
    this.slowClose(0);
    this.heal();
    for (const trigger of [...this.triggers]) trigger.remove();
  }

  /** Arms a trigger on the commands of every connection through this proxy (see triggers.ts). */
  trigger(spec: TriggerSpec): Trigger {
    const trigger = new ArmedTrigger(spec, (t) => this.triggers.delete(t));
    this.triggers.add(trigger);
    return trigger;
  }

  /** Stops listening, drops every connection, ends every fault in force. */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    const closed = new Promise((resolve) => this.server.close(resolve));
    for (const link of [...this.links]) link.destroy();
    for (const end of this.active.values()) end();
    this.active.clear();
    await closed;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  private accept(socket: Socket): void {
    socket.on("error", () => {});
    if (this.refusing || this.closing) {
      socket.resetAndDestroy();
      return;
    }
    const link = new Link(this.nextLinkId++, socket, this.context);
    this.links.add(link);
  }

  private readonly context: LinkContext = {
    targetPort: () => this.targetPort,
    conditions: (direction) => this.streams[direction],
    partitioned: () => this.partitioned,
    slowCloseMs: () => this.slowCloseMs,
    random: () => this.random(),
    takeTrigger: (command: ProxyCommand) => {
      for (const trigger of this.triggers) if (trigger.take(command)) return trigger;
      return undefined;
    },
    noteReply: (fault, command, reply, holdMs) => {
      const note = {
        fault,
        target: this.name,
        detail: `${command.script ?? command.name} (connection ${command.connectionId}) → ${reply}${holdMs ? `, held ${holdMs} ms` : ""}`,
      };
      if (holdMs) return this.log.start(note);
      this.log.instant(note);
      return () => {};
    },
    closed: (link) => this.links.delete(link),
    failed: (error) => this.fail(error),
    runHook: async (name, command, hook) => {
      try {
        await hook();
      } catch (error) {
        this.fail(
          new Error(
            `${this.name}: the ${name} hook of a trigger on ${command.script ?? command.name} threw`,
            {
              cause: error,
            },
          ),
        );
      }
    },
  };

  private fail(error: unknown): void {
    this.errors.push(error);
    this.onError?.(error);
  }

  private setStream(
    fault: StreamFault,
    direction: Direction | undefined,
    conditions: StreamConditions | undefined,
    detail: string,
  ): void {
    const directions = direction === "both" ? (["up", "down"] as const) : [direction ?? "down"];
    for (const d of directions) {
      if (d !== "up" && d !== "down")
        throw new TypeError(`direction must be "up", "down" or "both", got ${String(direction)}`);
      const key = {
        latency: "latency",
        slicer: "slicer",
        bandwidth: "bandwidth",
        "limit-data": "limitBytes",
      }[fault] as keyof StreamConditions;
      const stream = this.streams[d];
      if (conditions) Object.assign(stream, conditions);
      else delete stream[key];
      this.setFault(`${fault} ${d}`, conditions !== undefined, detail);
    }
    for (const link of this.links) link.wake();
  }

  /** Logs a fault's start (ending the previous setting of it first) or its end. */
  private setFault(key: string, on: boolean, detail?: string): void {
    this.active.get(key)?.();
    this.active.delete(key);
    if (!on) return;
    const [fault, direction] = key.split(" ");
    this.active.set(
      key,
      this.log.start({
        fault: fault!,
        target: this.name,
        ...(detail || direction ? { detail: [detail, direction].filter(Boolean).join(" ") } : {}),
      }),
    );
  }
}

/**
 * One proxy per node of `cluster`, for one client (a workload process):
 * pass `proxies.map((p) => p.url)` to its Redlock / NextId. Call it once
 * per client for per-(client, node) faults.
 */
export async function startProxies(
  cluster: Pick<LocalCluster, "nodes">,
  options: { client?: string; log?: FaultLog; seed?: number } = {},
): Promise<FaultProxy[]> {
  const prefix = options.client ? `${options.client}→` : "";
  const started: FaultProxy[] = [];
  try {
    for (const node of cluster.nodes) {
      started.push(
        await FaultProxy.start({
          targetPort: node.port,
          name: `${prefix}node-${node.index}`,
          ...(options.log && { log: options.log }),
          seed: (options.seed ?? 1) + node.index,
        }),
      );
    }
    return started;
  } catch (error) {
    await Promise.all(started.map((proxy) => proxy.close()));
    throw error;
  }
}

function requireFinite(name: string, value: unknown, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value < min || value > max) {
    throw new RangeError(`${name}: expected a number in [${min}, ${max}], got ${String(value)}`);
  }
  return value;
}
