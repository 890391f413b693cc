/**
 * Power loss, emulated. On this machine `kill -9` loses nothing from an AOF,
 * even with `appendfsync everysec`: the bytes redis-server wrote are in the
 * page cache, which outlives the process. A power cut loses the page cache
 * too — whatever was written after the last fsync. So: note the size of the
 * node's AOF now (`sampleAof`), and later kill it and cut its AOF back to
 * that size (`powerLoss`): every write acknowledged after the sample is gone.
 *
 * Layout (redis-server 7.0, multi-part AOF): `<dir>/appendonlydir/` holds
 * `appendonly.aof.manifest`, a base (`appendonly.aof.<n>.base.rdb`) and the
 * incremental `appendonly.aof.<n>.incr.aof` files the manifest lists; new
 * writes go to the last incr file. A rewrite (BGREWRITEAOF, or the
 * automatic one) replaces the files and the manifest, so a sample taken
 * before one does not describe the files after it: `powerLoss` refuses
 * then. Run such nodes with `--auto-aof-rewrite-percentage 0`.
 *
 * The cut can land inside a command (a sample is taken at any moment);
 * redis-server then drops the torn command on load (`aof-load-truncated
 * yes`, its default), as after a real power cut.
 */
import { readFileSync, statSync, truncateSync } from "node:fs";
import { join } from "node:path";
import type { LocalCluster } from "../../../src/index.js";
import { monotonicMs } from "../history.js";

/** What `sampleAof` saw: the manifest and each incr file's size. */
export interface AofSample {
  readonly node: number;
  readonly timeMs: number;
  readonly manifest: string;
  /** Incr file name → size in bytes. */
  readonly incrBytes: ReadonlyMap<string, number>;
}

/** redis-server arguments that keep a sample valid until the power loss. */
export const noAofRewriteArgs: readonly string[] = ["--auto-aof-rewrite-percentage", "0"];

function aofDir(cluster: Pick<LocalCluster, "node">, index: number): string {
  return join(cluster.node(index).dataDir, "appendonlydir");
}

function readManifest(dir: string, index: number): { text: string; incrFiles: string[] } {
  let text: string;
  try {
    text = readFileSync(join(dir, "appendonly.aof.manifest"), "utf8");
  } catch (error) {
    throw new Error(
      `node ${index} has no AOF manifest in ${dir} (${(error as Error).message}): ` +
        "power loss needs a node with AOF persistence (aof-everysec or aof-always)",
    );
  }
  // Lines like "file appendonly.aof.1.incr.aof seq 1 type i".
  const incrFiles = [...text.matchAll(/^file (\S+) seq \d+ type i$/gm)].map((m) => m[1]!);
  return { text, incrFiles };
}

/** The size of node `index`'s AOF now: what survives a power loss that comes later. */
export function sampleAof(cluster: Pick<LocalCluster, "node">, index: number): AofSample {
  const dir = aofDir(cluster, index);
  const { text, incrFiles } = readManifest(dir, index);
  return {
    node: index,
    timeMs: monotonicMs(),
    manifest: text,
    incrBytes: new Map(incrFiles.map((file) => [file, statSync(join(dir, file)).size])),
  };
}

/**
 * Cuts a stopped node's incr AOF files back to `sample`; returns how many
 * bytes were cut. The node must not be running (kill it first).
 */
export function truncateAof(
  cluster: Pick<LocalCluster, "node">,
  index: number,
  sample: AofSample,
): number {
  if (sample.node !== index) {
    throw new Error(`the AOF sample is of node ${sample.node}, not node ${index}`);
  }
  if (cluster.node(index).state !== "stopped") {
    throw new Error(
      `node ${index} is ${cluster.node(index).state}: kill it before cutting its AOF`,
    );
  }
  const dir = aofDir(cluster, index);
  const { text } = readManifest(dir, index);
  if (text !== sample.manifest) {
    throw new Error(
      `node ${index}'s AOF was rewritten since the sample (its manifest changed), so the sample ` +
        "no longer says what to cut; start the node with --auto-aof-rewrite-percentage 0 " +
        `(noAofRewriteArgs). Manifest then:\n${sample.manifest}now:\n${text}`,
    );
  }
  let cutBytes = 0;
  for (const [file, bytes] of sample.incrBytes) {
    const path = join(dir, file);
    const size = statSync(path).size;
    if (size > bytes) {
      truncateSync(path, bytes);
      cutBytes += size - bytes;
    }
  }
  return cutBytes;
}

/**
 * Samples node `index`'s AOF every `everyMs`, so a power loss at any moment
 * can cut back to what was on disk `ageMs` earlier (`before(1000)`: the
 * second `appendfsync everysec` may lose). Keeps samples for `keepMs`.
 */
export class AofSampler {
  private readonly samples: AofSample[] = [];
  private readonly timer: ReturnType<typeof setInterval>;

  constructor(
    private readonly cluster: Pick<LocalCluster, "node">,
    readonly index: number,
    options: { everyMs?: number; keepMs?: number } = {},
  ) {
    const everyMs = options.everyMs ?? 50;
    const keepMs = options.keepMs ?? 10_000;
    if (!(everyMs >= 1) || !(keepMs >= everyMs)) {
      throw new RangeError(
        `AofSampler: need everyMs ≥ 1 and keepMs ≥ everyMs, got ${everyMs}, ${keepMs}`,
      );
    }
    this.take();
    this.timer = setInterval(() => {
      this.take();
      const oldestMs = monotonicMs() - keepMs;
      while (this.samples.length > 1 && this.samples[1]!.timeMs < oldestMs) this.samples.shift();
    }, everyMs);
    this.timer.unref();
  }

  /** The newest sample at least `ageMs` old, or undefined if sampling began less than `ageMs` ago. */
  before(ageMs: number): AofSample | undefined {
    const latestMs = monotonicMs() - ageMs;
    for (let i = this.samples.length - 1; i >= 0; i--) {
      if (this.samples[i]!.timeMs <= latestMs) return this.samples[i];
    }
    return undefined;
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private take(): void {
    // A node down or restarting right now has nothing to sample: skip this one.
    if (this.cluster.node(this.index).state !== "running") return;
    try {
      this.samples.push(sampleAof(this.cluster, this.index));
    } catch {
      // Mid-rewrite or being recreated: the next sample will do.
    }
  }
}
