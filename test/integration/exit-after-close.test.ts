/**
 * A process that closed its clients ends by itself, promptly, also while a
 * node is down: nothing of redquorum's keeps the event loop alive (the CLI
 * and short scripts depend on it). Before, a refused connection kept
 * ioredis's 2 s disconnect timer running after close().
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { NextId, Redlock } from "../../src/index.js";
import { libraryUrl } from "../helpers/built.js";
import { startCluster, type TestCluster } from "../helpers/cluster.js";
import { notAboutTimeouts } from "../helpers/timeouts.js";

/** ioredis's default disconnect timer, which close() must not wait out. */
const lingerBeforeMs = 2_000;
/** How long close() waits at most for an owned connection to report its end (4 × disconnectTimeout). */
const endBackstopMs = 1_000;

/** Runs `body` in a child; resolves with the ms from its close() to its exit. */
function lingerAfterClose(body: string, env: NodeJS.ProcessEnv): Promise<number> {
  const script = `
    import { Redlock, NextId } from "${libraryUrl}";
    const urls = process.env.URLS.split(",");
    ${body}
    const closedAt = performance.now();
    process.on("exit", () => process.stdout.write(String(performance.now() - closedAt)));
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (chunk) => {
    out += chunk;
  });
  child.stderr.on("data", (chunk) => {
    err += chunk;
  });
  return new Promise((resolve, reject) => {
    child.once("close", (code) => {
      if (code !== 0) reject(new Error(`child exited with ${code}: ${err}`));
      else resolve(Number(out));
    });
  });
}

describe("after close(), with a node down, the process exits by itself", () => {
  let cluster: TestCluster;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    cluster = await startCluster({ nodeCount: 3, persistence: "aof-always" });
    const ids = new NextId(cluster.urls, { ...notAboutTimeouts, key: "exit-after-close" });
    await ids.init(); // needs every node
    await ids.close();
    // Node 2's address refuses connections from the start.
    await cluster.cluster.kill(2);
    env = { URLS: cluster.urls.join(",") };
  });
  after(() => cluster.stop());

  it("Redlock: acquire, release, close", async () => {
    const ms = await lingerAfterClose(
      `const redlock = new Redlock(urls);
       const lock = await redlock.acquire(["exit-after-close:lock"], 5000);
       await lock.release();
       await redlock.close();`,
      env,
    );
    assert.ok(ms < lingerBeforeMs * 0.75, `exited ${ms.toFixed(0)} ms after close()`);
  });

  it("close() itself resolves without waiting for a down node's connection to report an end it never reports", async () => {
    // Between reconnect attempts ioredis's disconnect() only cancels the
    // next one and emits no "end": close() waited out its backstop.
    const redlock = new Redlock(cluster.urls);
    const lock = await redlock.acquire(["exit-after-close:prompt"], 5_000);
    await lock.release();
    const ids = new NextId(cluster.urls, { key: "exit-after-close" });
    await ids.next();
    for (const [name, client] of [
      ["Redlock", redlock],
      ["NextId", ids],
    ] as const) {
      const startedAt = performance.now();
      await client.close();
      const ms = performance.now() - startedAt;
      assert.ok(ms < endBackstopMs * 0.75, `${name}.close() took ${ms.toFixed(0)} ms`);
    }
  });

  it("NextId: next, close", async () => {
    const ms = await lingerAfterClose(
      `const ids = new NextId(urls, { key: "exit-after-close" });
       await ids.next();
       await ids.close();`,
      env,
    );
    assert.ok(ms < lingerBeforeMs * 0.75, `exited ${ms.toFixed(0)} ms after close()`);
  });
});
