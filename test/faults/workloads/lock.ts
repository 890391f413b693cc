/**
 * Workload `lock`: acquire one of the resources (fencing on or off), hold
 * it, `use` it, release it; again until the duration ends. Every operation
 * goes to this process's history. Also serves the runner's IPC commands.
 *
 *   node --import tsx test/faults/workloads/lock.ts '<WorkloadOptions JSON>'
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
        await pause(Math.floor(random() * options.holdMs));
        if (client.stillValid(resource)) await client.use(resource);
        await client.release(resource);
      } catch {
        // Recorded as fail/info; a lock still held is released (or expires).
        await client.release(resource).catch(() => {});
      }
      await pause(Math.floor(random() * options.pacingMs));
    }
  },
});
