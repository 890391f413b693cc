/**
 * Workload `ids`: NextId `next()` and `nextBatch(k)` from `callers`
 * concurrent callers over one NextId instance (run several processes for
 * several instances). IDs are recorded as decimal strings.
 *
 *   node --import tsx test/faults/workloads/ids.ts '<WorkloadOptions JSON>'
 */
import { NextId } from "../../../src/index.js";
import { pause, Recorder, readOptions, runWorkload } from "./common.js";

const options = readOptions();
const recorder = new Recorder(options.name, options.historyPath);
const ids = new NextId(options.urls as string[], {
  onRepair: () => {},
  onWarning: () => {},
  ...options.library,
});

/** I9's buggy build: IDs of an earlier round, kept for requests that arrive later. */
const stash: bigint[] = [];

async function fetch(count: number): Promise<bigint[]> {
  if (!options.buggyGroupCommit) return count === 1 ? [await ids.next()] : ids.nextBatch(count);
  if (stash.length < count) stash.push(...(await ids.nextBatch(count + 9)));
  return stash.splice(0, count);
}

/** The counter's key as the op's resource when the row names one (the checkers keep keys apart). */
const key = typeof options.library.key === "string" ? options.library.key : undefined;

async function take(count: number): Promise<bigint[]> {
  return recorder.op(
    "ids",
    key,
    { count },
    () => fetch(count),
    (got) => ({ ids: got.map(String) }),
  );
}

await runWorkload(options, recorder, {
  commands: {
    next: async (args) => (await take(Number(args.count ?? 1))).map(String),
    init: () => ids.init(),
  },
  close: () => ids.close(),
  async loop(random, stopping) {
    const callers = options.callers ?? 2;
    await Promise.all(
      Array.from({ length: callers }, async () => {
        while (!stopping()) {
          const count = random() < 0.6 ? 1 : 1 + Math.floor(random() * 10);
          await take(count).catch(() => {});
          await pause(Math.floor(random() * options.pacingMs));
        }
      }),
    );
  },
});
