/**
 * Workload `lock-set`: a lock-protected read-modify-write of a shared value
 * kept in a separate Redis (the store, not one of the lock nodes): acquire,
 * read, hold, write value + 1 (through the fenced store with fencing on),
 * release. A lost update or an accepted stale write shows in the history.
 *
 *   node --import tsx test/faults/workloads/lock-set.ts '<WorkloadOptions JSON>'
 */
import { pause, Recorder, readOptions, runWorkload } from "./common.js";
import { LockClient } from "./lock-client.js";

const options = readOptions();
const recorder = new Recorder(options.name, options.historyPath);
const client = new LockClient(options, recorder);

await runWorkload(options, recorder, {
  commands: client.commands(),
  close: () => client.close(),
  async loop(random, stopping) {
    while (!stopping()) {
      const resource = options.resources[Math.floor(random() * options.resources.length)]!;
      try {
        await client.acquire(resource, options.ttlMs, { waitMs: options.acquireWaitMs ?? 2_000 });
        const value = await client.read(resource);
        await pause(Math.floor(random() * options.holdMs));
        if (client.stillValid(resource)) {
          await client.use(resource);
          await client.write(resource, value + 1);
        }
        await client.release(resource);
      } catch {
        await client.release(resource).catch(() => {});
      }
      await pause(Math.floor(random() * options.pacingMs));
    }
  },
});
