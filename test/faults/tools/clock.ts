/**
 * Clock faults on one node: a jump of its wall clock forward or backward,
 * and a clock that runs fast or slow.
 *
 * libfaketime does not work with this machine's redis-server, so this is
 * the fallback FAULTS.md describes. Evidence (Debian bookworm, redis-server
 * 7.0.15 linked with libjemalloc.so.2 5.3.0, package `faketime` 0.9.10-2.1):
 * started under `LD_PRELOAD=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1`
 * (or libfaketimeMT.so.1) with `FAKETIME=+0`, or `FAKETIME_TIMESTAMP_FILE`
 * and `FAKETIME_NO_CACHE=1`, with or without `FAKETIME_DONT_FAKE_MONOTONIC=1`,
 * and with jemalloc preloaded before or after it, redis-server prints
 * "libfaketime: Unexpected recursive calls to clock_gettime() without proper
 * initialization … Cannot recover" and hangs before it listens: it never
 * answers PING (jemalloc's initialisation calls clock_gettime, whose
 * libfaketime wrapper allocates). `date` under the same preload works.
 * `faketime-smoke.sh` beside this file repeats the check.
 *
 * What a node's clock decides for redquorum is expiry only: no script reads
 * TIME, and Redis keeps each key's expiry as an absolute wall-clock time.
 * A forward jump of Δ therefore means every key with a TTL has Δ less of it
 * left (those with less than Δ expire at once), a backward jump that each
 * has Δ more; keys without a TTL (markers, counters) are untouched. One Lua
 * script does that to the whole keyspace atomically, as a jump is one
 * instant. A clock running at rate r is the same applied continuously:
 * every `periodMs`, each TTL is shortened by (r − 1) × the real time since
 * the last step (lengthened when r < 1), so an expiry is off by at most
 * periodMs × |r − 1|.
 */
import { Redis } from "ioredis";
import type { LocalCluster } from "../../../src/index.js";
import { FaultLog } from "./fault-log.js";

/**
 * Shifts every TTL on the node by ARGV[1] ms: positive shortens (a forward
 * jump), negative lengthens. Keys are collected first, de-duplicated (SCAN
 * may return a key twice), then changed. Returns {shifted, expired}.
 */
export const shiftTtlsLua = `
local delta = tonumber(ARGV[1])
local seen, keys = {}, {}
local cursor = "0"
repeat
  local page = redis.call("SCAN", cursor, "COUNT", 1000)
  cursor = page[1]
  for _, key in ipairs(page[2]) do
    if not seen[key] then
      seen[key] = true
      keys[#keys + 1] = key
    end
  end
until cursor == "0"
local shifted, expired = 0, 0
for _, key in ipairs(keys) do
  local left = redis.call("PTTL", key)
  if left > 0 then
    left = left - delta
    if left <= 0 then
      redis.call("DEL", key)
      expired = expired + 1
    else
      redis.call("PEXPIRE", key, left)
      shifted = shifted + 1
    end
  end
end
return {shifted, expired}
`;

export interface ShiftResult {
  /** Keys whose TTL changed. */
  readonly shifted: number;
  /** Keys the jump expired. */
  readonly expired: number;
}

export interface NodeClockOptions {
  /** How the fault log names the node, e.g. "node-3". */
  readonly name?: string;
  readonly log?: FaultLog;
  /** Bound on each script call, in ms. Default 5000. */
  readonly timeoutMs?: number;
}

export class NodeClock {
  readonly name: string;
  private readonly client: Redis;
  private readonly log: FaultLog;
  private drift:
    | { rate: number; timer: ReturnType<typeof setTimeout>; end: () => void; stopped: boolean }
    | undefined;
  private closed = false;

  constructor(url: string, options: NodeClockOptions = {}) {
    this.name = options.name ?? url;
    this.log = options.log ?? new FaultLog();
    this.client = new Redis(url, {
      commandTimeout: options.timeoutMs ?? 5_000,
      maxRetriesPerRequest: 1,
      retryStrategy: () => 50,
      lazyConnect: true,
    });
    this.client.on("error", () => {});
  }

  /** The clock of node `index` of a LocalCluster. */
  static of(
    cluster: Pick<LocalCluster, "urls">,
    index: number,
    options: NodeClockOptions = {},
  ): NodeClock {
    const url = cluster.urls[index];
    if (url === undefined)
      throw new RangeError(`no node ${index} in a cluster of ${cluster.urls.length}`);
    return new NodeClock(url, { name: `node-${index}`, ...options });
  }

  /** Jumps the node's clock by `deltaMs`: forward if positive (TTLs shrink), backward if negative. */
  async jump(deltaMs: number): Promise<ShiftResult> {
    if (!Number.isSafeInteger(deltaMs)) {
      throw new RangeError(`jump: deltaMs must be a whole number of ms, got ${deltaMs}`);
    }
    const result = await this.shift(deltaMs);
    this.log.instant({
      fault: "clock-jump",
      target: this.name,
      detail: `${deltaMs >= 0 ? "+" : ""}${deltaMs} ms (${result.shifted} TTLs shifted, ${result.expired} keys expired)`,
    });
    return result;
  }

  /**
   * From now on the node's clock runs at `rate` × real time (1.01: 1 %
   * fast; 0.5: half speed), until `setRate(1)` or `close()`. Steps every
   * `periodMs` (default 10); a step that fails (node down or paused) is
   * made up by the next one, as the real time since the last one counts.
   */
  setRate(rate: number, options: { periodMs?: number } = {}): void {
    if (!Number.isFinite(rate) || rate <= 0)
      throw new RangeError(`setRate: rate must be > 0, got ${rate}`);
    const periodMs = options.periodMs ?? 10;
    if (!Number.isFinite(periodMs) || periodMs < 1) {
      throw new RangeError(`setRate: periodMs must be ≥ 1, got ${periodMs}`);
    }
    this.stopDrift();
    if (rate === 1 || this.closed) return;
    const end = this.log.start({ fault: "clock-rate", target: this.name, detail: `×${rate}` });
    let lastMs = performance.now();
    // TTLs are whole milliseconds: carry the fraction, or 0.1 ms a step would round to 1.
    let owedMs = 0;
    const drift = {
      rate,
      timer: undefined as unknown as ReturnType<typeof setTimeout>,
      end,
      stopped: false,
    };
    const step = async () => {
      const nowMs = performance.now();
      const dueMs = owedMs + (rate - 1) * (nowMs - lastMs);
      const wholeMs = Math.trunc(dueMs);
      try {
        if (wholeMs !== 0) await this.shift(wholeMs);
        owedMs = dueMs - wholeMs;
        lastMs = nowMs;
      } catch {
        // Node unreachable now: the next step applies the time since the last success.
      }
      if (!drift.stopped) drift.timer = setTimeout(step, periodMs);
    };
    drift.timer = setTimeout(step, periodMs);
    this.drift = drift;
  }

  /** The rate in force (1 when none). */
  get rate(): number {
    return this.drift?.rate ?? 1;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.stopDrift();
    this.client.disconnect();
  }

  private stopDrift(): void {
    if (!this.drift) return;
    this.drift.stopped = true;
    clearTimeout(this.drift.timer);
    this.drift.end();
    this.drift = undefined;
  }

  private async shift(deltaMs: number): Promise<ShiftResult> {
    if (this.closed) throw new Error(`the clock of ${this.name} is closed`);
    if (this.client.status === "wait") await this.client.connect();
    const [shifted, expired] = (await this.client.eval(shiftTtlsLua, 0, String(deltaMs))) as [
      number,
      number,
    ];
    return { shifted, expired };
  }
}
