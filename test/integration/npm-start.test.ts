/**
 * The README's main-job command, as a newcomer runs it: `npm start` builds
 * (unless dist/ is up to date, as the test runner leaves it),
 * starts `redquorum dev`, runs the demo through the CLI, keeps the cluster
 * and the ID server up, and stops everything on Ctrl-C (SIGINT to the whole
 * process group, as a terminal sends it).
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { describe, it } from "node:test";
import { connectResult } from "../helpers/cli.js";

/**
 * 5 nodes + 12 lock turns + IDs + status (about 6 s here, 50 s with the
 * machine loaded), with room for more; dist/ is up to date (the runner
 * builds it), so no build.
 */
const upTimeoutMs = 120_000;
/** After Ctrl-C: the server drains, the nodes stop. */
const stopTimeoutMs = 30_000;

describe("npm start", () => {
  // Its own bound, above the runner's 60 s default: the demo's whole run.
  const timeout = upTimeoutMs + stopTimeoutMs + 10_000;
  it("brings the cluster up, runs the demo, and stops cleanly on Ctrl-C", { timeout }, async () => {
    const child = spawn("npm", ["start"], { detached: true, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    const up = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        process.kill(-child.pid!, "SIGKILL");
        reject(new Error(`no "Press Ctrl-C" within ${upTimeoutMs} ms:\n${output}`));
      }, upTimeoutMs);
      const onData = (chunk: Buffer) => {
        output += chunk;
        if (output.includes("Press Ctrl-C to stop")) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stdout!.on("data", onData);
      child.stderr!.on("data", onData);
      child.once("close", (code) => {
        clearTimeout(timer);
        reject(new Error(`npm start exited with ${code} before it was up:\n${output}`));
      });
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once("close", (code, signal) => resolve({ code, signal })),
    );
    await up;
    // Ctrl-C once, SIGKILL if it does not stop in time; also when an
    // assertion below fails, so no dev cluster outlives the test.
    let stopping: Promise<{ code: number | null; signal: NodeJS.Signals | null }> | undefined;
    const stop = () => {
      stopping ??= (async () => {
        process.kill(-child.pid!, "SIGINT");
        const timer = setTimeout(() => process.kill(-child.pid!, "SIGKILL"), stopTimeoutMs);
        const exit = await exited;
        clearTimeout(timer);
        return exit;
      })();
      return stopping;
    };
    try {
      // What the demo showed: the lock turns without overlap, IDs, the status verdict.
      assert.match(output, /12 turns: 0 overlapping holds seen, each fence above the one before/);
      assert.match(output, /SHUTDOWN NOSAVE on node 4/);
      // (IDs may skip values after a lost round; they never repeat or go back.)
      const ids = /ids: ((?:\d+ ?){5})\n/.exec(output)![1]!.trim().split(" ").map(BigInt);
      const served = /POST \/v1\/ids \{"count": 3\} → (\S+)/.exec(output)![1]!;
      const more = (JSON.parse(served) as { ids: string[] }).ids.map(BigInt);
      const all = [...ids, ...more];
      assert.equal(all.length, 8);
      for (let i = 1; i < all.length; i++) assert.ok(all[i]! > all[i - 1]!, all.join(" "));
      assert.match(output, /locks: safe \(4 of 5 nodes usable, 3 needed\)/);
      const nodes = /export REDQUORUM_NODES=(\S+)/.exec(output)![1]!.split(",");
      const server = /redquorum serve listening on (\S+)/.exec(output)![1]!;
      const health = await fetch(`${server}/healthz`);
      assert.equal(health.status, 200, await health.text());

      const exit = await stop();
      // npm ends itself by the signal it got (as shells expect); the demo exits 0.
      assert.ok(exit.code === 0 || exit.signal === "SIGINT", `${JSON.stringify(exit)}\n${output}`);
      assert.match(output, /stopped; the cluster's data directory is removed/);
      assert.doesNotMatch(output, /demo: /, "the demo reported an error");
      for (const url of nodes) {
        assert.equal(await connectResult(Number(new URL(url).port)), "ECONNREFUSED", url);
      }
      assert.equal(await connectResult(Number(new URL(server).port)), "ECONNREFUSED", server);
      const left = existsSync(".redquorum")
        ? readdirSync(".redquorum").filter((name) => name.startsWith("redquorum-cluster-"))
        : [];
      assert.deepEqual(left, [], "the dev cluster's data directory is removed");
    } finally {
      await stop();
    }
  });
});
