import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import {
  InvalidArgumentError,
  NextId,
  QuorumError,
  Redlock,
  RedquorumError,
} from "../../src/index.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";

/**
 * FAULTS.md L27: resource names that are redquorum's own keys are refused
 * with a typed error before anything is sent; no reply a node gives escapes
 * untyped or leaves keys behind.
 */
describe("resource names and redquorum's own keys (FAULTS.md L27)", () => {
  let cluster: TestCluster;
  let redlock: Redlock;

  before(async () => {
    cluster = await startCluster({ nodeCount: 5 });
    // Not about node timeouts: not on the 50 ms default, which a loaded machine can exceed.
    redlock = new Redlock(cluster.urls, { retry: { retries: 0 }, nodeTimeoutMs: 500 });
  });
  after(async () => {
    await redlock.close();
    await cluster.stop();
  });
  beforeEach(() => cluster.flushAll());

  /** Every key on every node, redquorum's own included. */
  const allKeys = () => cluster.onAll(async (client) => (await client.keys("*")).sort());

  for (const name of [
    "redquorum:quarantine",
    "redquorum:marker",
    "redquorum:fence:X",
    "redquorum:id",
  ]) {
    it(`locking ${JSON.stringify(name)} is refused with InvalidArgumentError and touches no node`, async () => {
      const before = await allKeys();
      await assert.rejects(redlock.acquire([name], 5_000), (error: unknown) => {
        assert.ok(error instanceof InvalidArgumentError, String(error));
        assert.equal(error.argument, "resources[0]");
        assert.match(error.message, /redquorum's own namespace/);
        return true;
      });
      await assert.rejects(redlock.acquire(["ok", name], 5_000), InvalidArgumentError);
      assert.deepEqual(await allKeys(), before, "no key was written");
      // Nothing was quarantined or broken: other locks still work, with fences.
      const lock = await redlock.acquire(["X"], 5_000);
      assert.ok(lock.fence !== undefined && lock.fence > 0n);
      await lock.release();
    });
  }

  it("a keyPrefix in redquorum's namespace is refused; one outside it may precede any name", async () => {
    assert.throws(
      () => new Redlock(cluster.urls, { keyPrefix: "redquorum:" }),
      InvalidArgumentError,
    );
    const prefixed = new Redlock(cluster.urls, { keyPrefix: "app:" });
    try {
      const lock = await prefixed.acquire(["redquorum:marker"], 5_000);
      assert.deepEqual(lock.keys, ["app:redquorum:marker"]);
      await lock.release();
    } finally {
      await prefixed.close();
    }
  });

  it("a corrupt fencing counter on a majority is a typed QuorumError, and no lock key is left", async () => {
    // Not a decimal: what a node could hold after a collision or a bad restore.
    for (const i of [0, 1, 2]) await cluster.client(i).set("redquorum:fence:corrupt", "garbage");
    await assert.rejects(redlock.acquire(["corrupt"], 5_000), (error: unknown) => {
      assert.ok(error instanceof QuorumError, String(error));
      assert.ok(error instanceof RedquorumError);
      assert.match(error.message, /not a counter value/);
      return true;
    });
    await cluster.waitForNoKeys();
  });

  it("a corrupt fencing counter on a minority is that node's failed vote; the lock is granted", async () => {
    await cluster.client(4).set("redquorum:fence:minority", "-12");
    const lock = await redlock.acquire(["minority"], 5_000);
    assert.ok(lock.fence !== undefined && lock.fence > 0n);
    await lock.release();
    await cluster.waitForNoKeys();
  });

  it("a NextId key whose own keys would be Redlock's node state is refused", () => {
    for (const key of [
      "redquorum",
      "redquorum:quarantine",
      "redquorum:fence-floor",
      "redquorum:x",
    ]) {
      assert.throws(
        () => new NextId(cluster.urls, { key }),
        (error: unknown) =>
          error instanceof InvalidArgumentError && error.argument === "options.key",
        key,
      );
    }
    // Another counter's own keys would alias it.
    assert.throws(() => new NextId(cluster.urls, { key: "orders:marker" }), InvalidArgumentError);
    for (const key of ["orders", "redquorum:id", "redquorum:id:orders"]) {
      void new NextId(cluster.urls, { key }).close();
    }
  });

  it("names with a lone UTF-16 surrogate (one key in Redis for two names) are refused", async () => {
    await assert.rejects(redlock.acquire(["\uD800", "\uD801"], 5_000), (error: unknown) => {
      assert.ok(error instanceof InvalidArgumentError, String(error));
      assert.equal(error.argument, "resources[0]");
      return true;
    });
    assert.throws(() => new Redlock(cluster.urls, { keyPrefix: "a\uDC00" }), InvalidArgumentError);
    assert.throws(() => new NextId(cluster.urls, { key: "id\uD800" }), InvalidArgumentError);
    // A well-formed pair is one code point, and fine.
    const lock = await redlock.acquire(["\uD83D\uDE00"], 5_000);
    await lock.release();
  });
});
