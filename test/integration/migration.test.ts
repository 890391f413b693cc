import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { InvalidArgumentError, Redlock } from "../../src/index.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";

/**
 * The README's "Coming from node-redlock": node-redlock v5 code either works
 * as written or fails with an error that names the replacement.
 */
describe("coming from node-redlock", () => {
  let cluster: TestCluster;
  let clients: Redis[];

  before(async () => {
    cluster = await startCluster({ nodeCount: 3 });
    clients = cluster.urls.map((url) => new Redis(url));
  });
  after(async () => {
    for (const client of clients) client.disconnect();
    await cluster.stop();
  });

  it("acquire, `lock = await lock.extend(t)`, redlock.extend(lock, t), redlock.release(lock), quit() work as written", async () => {
    // nodeTimeoutMs: not about node timeouts (an extend missed the 50 ms
    // default on a loaded machine); the calls are as a port would write them.
    const redlock = new Redlock(clients, { driftFactor: 0.01, nodeTimeoutMs: 500 });
    let lock = await redlock.acquire(["a"], 5_000);
    lock = await lock.extend(5_000);
    assert.ok(lock.remainingMs() > 0);
    lock = await redlock.extend(lock, 5_000);
    assert.ok(lock.remainingMs() > 0);
    await redlock.release(lock);
    assert.equal(lock.remainingMs(), 0);
    await redlock.quit();
  });

  it("node-redlock's option names fail with the replacement named", () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ retryCount: 10 }, /retry: \{ retries \}/],
      [{ retryDelay: 200 }, /retry: \{ delayMs \}/],
      [{ retryJitter: 200 }, /retry: \{ jitterMs \}/],
      [
        { automaticExtensionThreshold: 500 },
        /using\(resources, ttlMs, routine, \{ extendThresholdMs \}\)/,
      ],
    ];
    for (const [options, hint] of cases) {
      assert.throws(
        () => new Redlock(clients, options as never),
        (error: unknown) => error instanceof InvalidArgumentError && hint.test(error.message),
        JSON.stringify(options),
      );
    }
  });

  it("redlock.release() of something that is not a Lock is a typed rejection", async () => {
    const redlock = new Redlock(clients);
    try {
      await assert.rejects(redlock.release({} as never), InvalidArgumentError);
      await assert.rejects(redlock.extend({} as never, 1_000), InvalidArgumentError);
    } finally {
      await redlock.close();
    }
  });
});
