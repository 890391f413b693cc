/**
 * FAULTS.md's lock rows (L1–L27) as scripted schedules. Node indexes are
 * 0-based: FAULTS.md's "nodes {1,2,3}" are 0, 1, 2 here. Scripted steps
 * drive the workloads over IPC, so each negative control meets its
 * violation on every run, not by luck.
 */

import { mkdirSync, rmSync } from "node:fs";
import { Redis } from "ioredis";
import { monotonicMs } from "../history.js";
import type { Row } from "../runner/types.js";
import { noAofRewriteArgs } from "../tools/power-loss.js";
import { scriptIs } from "../tools/triggers.js";
import { calls, faultWindows, ok, validityViolations } from "./history-queries.js";
import {
  all,
  contenders,
  finished,
  holders,
  holdOn,
  holdOnFirstThree,
  minorityRefused,
  splitRival,
  stopped,
  warm,
} from "./scripts.js";

const noQuarantine = { quarantine: false };
const retryFor = (ms: number) => ({
  waitMs: ms,
  retry: { retries: 200, delayMs: 20, jitterMs: 10 },
});

const urlsOf = (proxies: readonly { url: string }[]) => proxies.map((p) => p.url);

export const lockRows: Row[] = [
  {
    id: "L1",
    title:
      "no faults, 8 clients contending on 2 resources (lock + lock-set, fenced store); and votes that split: a client without fencing finds a held resource free on 2 of 5 nodes",
    expected: "safe",
    setup: { store: true },
    checks: { MX: "clean", RS: "clean", LV: "clean", HY: "clean" },
    async run(ctx) {
      const [loops, holder, rival] = await all(
        contenders(ctx, 8),
        ctx.spawn("lock", "holder"),
        ctx.spawn("lock", "rival", splitRival),
      );
      await warm(holder, rival);
      const held = await holdOnFirstThree(ctx, holder, "split", 5_000);
      await minorityRefused(ctx, held, rival, "split");
      await holder.attempt("use", { resource: "split" });
      await holder.attempt("release", { resource: "split" });
      await finished(loops);
    },
    verify(events, ctx) {
      ctx.expect(
        validityViolations(events).length === 0,
        `validity: ${validityViolations(events).join("; ")}`,
      );
    },
  },
  {
    id: "L2",
    title:
      "kill -9 one node the moment an acquire's script reaches it (proxy trigger), while others contend",
    expected: "safe",
    checks: { MX: "clean", LV: "clean", HY: "clean" },
    async run(ctx) {
      const proxies = await ctx.proxies("A");
      const [a, others] = await all(
        ctx.spawn("lock", "A", { urls: urlsOf(proxies) }),
        contenders(ctx, 3),
      );
      await warm(a);
      // The acquire reached nodes 0-3, and node 4 dies as it arrives there.
      proxies[4]!.trigger({ match: scriptIs("acquire"), onCommand: () => ctx.kill(4) });
      const got = await a.attempt("acquire", { resource: "r1", ttlMs: 1_000 });
      ctx.expect(
        got.ok,
        `acquire with one node killed mid-flight failed: ${got.ok ? "" : got.message}`,
      );
      await a.attempt("use", { resource: "r1" });
      await a.attempt("release", { resource: "r1" });
      await ctx.restart(4, true);
      await finished(others);
    },
  },
  {
    id: "L3",
    title: "kill -9 2 of 5 mid-acquire (live), then 3 of 5 (unavailable: QuorumError)",
    expected: "unavailable",
    checks: { MX: "clean", HY: "clean" },
    async run(ctx) {
      const a = await ctx.spawn("lock", "A");
      await warm(a);
      ctx.pause(3, 4);
      const acquiring = a.attempt("acquire", { resource: "r", ttlMs: 1_000 });
      await ctx.sleep(5);
      await ctx.kill(3);
      await ctx.kill(4);
      const two = await acquiring;
      ctx.expect(two.ok, `2 of 5 down: acquire failed: ${two.ok ? "" : two.message}`);
      await a.attempt("release");
      await ctx.kill(2);
      const three = await a.attempt("acquire", {
        resource: "r",
        acquireOptions: { retry: { retries: 2 } },
      });
      ctx.expect(
        !three.ok && three.code === "ERR_QUORUM",
        `3 of 5 down: expected ERR_QUORUM, got ${three.ok ? "a lock" : three.code}`,
      );
      // The error names each node that failed it, with its cause.
      if (!three.ok) {
        const named = [2, 3, 4].filter((i) =>
          three.message.includes(`${new URL(ctx.urls[i]!).host}: `),
        );
        ctx.expect(
          named.length === 3,
          `3 of 5 down: the error names ${named.length} of the 3 down nodes: ${three.message}`,
        );
      }
    },
  },
  {
    id: "L4",
    title:
      "node restarted empty while A holds {0,1,2}, quarantine off: B takes {2,3,4} (negative control)",
    expected: "documented-unsafe",
    setup: { store: true },
    checks: { MX: "flagged", RS: "flagged" },
    async run(ctx) {
      const spec = { library: noQuarantine, fencing: false };
      const [a, b] = await all(ctx.spawn("lock-set", "A", spec), ctx.spawn("lock-set", "B", spec));
      await warm(a, b);
      await holdOn(ctx, a, "r", [3, 4], 4_000);
      await ctx.restart(2, false);
      const got = await b.attempt("acquire", { resource: "r", acquireOptions: retryFor(3_000) });
      ctx.expect(
        got.ok,
        `B did not acquire r over the amnesiac node: ${got.ok ? "" : got.message}`,
      );
      // Both read 0, both write 1: the lost update the lock was meant to prevent.
      await a.call("read");
      await b.call("increment");
      await a.call("use");
      await a.call("write", { value: 1 });
      await a.attempt("release");
      await b.attempt("release");
    },
  },
  {
    id: "L5",
    title:
      "as L4 with the quarantine: B gets at most 2 votes until A's lock expired, then the node serves again",
    expected: "safe",
    setup: { store: true },
    checks: { MX: "clean", RS: "clean", LV: "clean" },
    async run(ctx) {
      // A's lock outlasts what the row does while it is held (a restart, two
      // attempts, a flush) with room for a loaded machine: at 1.5 s, a slow
      // restart let it expire first, and B's grant then was no violation.
      const maxTtlMs = 4_000;
      const spec = { library: { maxTtlMs }, fencing: false };
      const [a, b] = await all(ctx.spawn("lock-set", "A", spec), ctx.spawn("lock-set", "B", spec));
      await warm(a, b);
      const held = await holdOn(ctx, a, "r", [3, 4], maxTtlMs);
      /**
       * B's attempts while A holds r, each refused (a grant after A's
       * validity ran out says so, not "violation"), until one is refused
       * with node `node`'s quarantine as its cause there (B's client may
       * first meet the restarted node still reconnecting), or A's validity
       * is near its end.
       */
      const refusedWhileHeld = async (what: string, node: number) => {
        const host = new URL(ctx.urls[node]!).host;
        let last = "";
        while (monotonicMs() < held.validUntilMs - 500) {
          const got = await b.attempt("acquire", {
            resource: "r",
            acquireOptions: { retry: { retries: 0 } },
          });
          if (monotonicMs() >= held.validUntilMs) {
            ctx.expect(false, `premise broke: A's lock ran out before B's attempt (${what}) ended`);
            return;
          }
          ctx.expect(!got.ok, `B acquired r while A held it and ${what}`);
          if (got.ok) return;
          last = `${got.code} ${got.message}`;
          if (new RegExp(`${host}: quarantined`).test(got.message)) return;
          await ctx.sleep(50);
        }
        ctx.expect(
          false,
          `B was refused while ${what}, but never for node ${node}'s quarantine: ${last}`,
        );
      };
      await ctx.restart(2, false);
      await refusedWhileHeld("node 2 was quarantined", 2);
      await a.call("increment");
      // FLUSHALL is the same loss without a restart.
      ctx.faultNow("flushall", "node-1");
      await ctx.admin(1).flushall();
      await refusedWhileHeld("nodes 1, 2 were quarantined", 1);
      await a.attempt("release");
      // B's own lock outlasts its increment and release on a loaded machine.
      const later = await b.attempt("acquire", {
        resource: "r",
        ttlMs: 2_000,
        acquireOptions: retryFor(maxTtlMs * 3),
      });
      ctx.expect(
        later.ok,
        `B could not acquire r after the quarantine: ${later.ok ? "" : later.message}`,
      );
      if (later.ok) {
        await b.call("increment");
        await b.call("release");
      }
    },
  },
  {
    id: "L5-delayed",
    title:
      "as L4 (quarantine off) with an operator delayed restart (> maxTtl): the node comes back empty after A's lock expired, B takes r: safe",
    expected: "safe",
    setup: { store: true },
    checks: { MX: "clean", RS: "clean" },
    async run(ctx) {
      // The seed's other way to restart a node safely: keep it down longer
      // than any lock's TTL. Without the quarantine, the delay alone keeps
      // B from a lock A still holds (L4 without it: B took it).
      const maxTtlMs = 800;
      const spec = { library: { ...noQuarantine, maxTtlMs }, fencing: false };
      const [a, b] = await all(ctx.spawn("lock-set", "A", spec), ctx.spawn("lock-set", "B", spec));
      await warm(a, b);
      const held = await holdOn(ctx, a, "r", [3, 4], maxTtlMs);
      await a.call("increment");
      await ctx.kill(2);
      // Down until A's lock expired, measured on the monotonic clock A's
      // validity was counted on, plus what the nodes' clocks may lag.
      await ctx.sleep(Math.max(0, held.validUntilMs - monotonicMs()) + 100);
      await ctx.restart(2, false);
      const got = await b.attempt("acquire", { resource: "r", acquireOptions: retryFor(3_000) });
      ctx.expect(
        got.ok,
        `B could not acquire r after the delayed restart: ${got.ok ? "" : got.message}`,
      );
      if (got.ok) {
        await b.call("increment");
        await b.attempt("release");
      }
      await a.attempt("release");
    },
  },
  {
    id: "L5-mixed-max-ttl",
    title:
      "as L5 with clients on a shorter maxTtlMs: B (0.5 s) meets the restart first, C (0.5 s) still cannot take A's lock (6 s) after 0.5 s",
    expected: "safe",
    setup: { store: true },
    checks: { MX: "clean", RS: "clean" },
    async run(ctx) {
      // The quarantine lasts the cluster's longest maxTtlMs (lock/horizon.ts),
      // not that of the client that met the loss: before 2026-12-02, C
      // took r over node 2 once B's 0.5 s were up.
      // A's lock outlasts what the row does while it is held (a restart, B's
      // first contact, the 0.5 s, C's attempt) with room for a loaded
      // machine; C's process starts before it is taken, so that a slow
      // start (2.5 s was seen) cannot let A's lock expire first.
      const longMs = 6_000;
      const shortMs = 500;
      const long = { library: { maxTtlMs: longMs }, fencing: false };
      const short = { library: { maxTtlMs: shortMs }, fencing: false, ttlMs: shortMs };
      const [a, b, c] = await all(
        ctx.spawn("lock-set", "A", long),
        ctx.spawn("lock-set", "B", short),
        ctx.spawn("lock-set", "C", short),
      );
      await warm(a);
      await holdOn(ctx, a, "r", [3, 4], longMs);
      await ctx.restart(2, false);
      await warm(b); // B's first contact: it meets node 2's loss
      await new Promise((resolve) => setTimeout(resolve, shortMs + 200));
      const refused = await c.attempt("acquire", {
        resource: "r",
        acquireOptions: { retry: { retries: 0 } },
      });
      ctx.expect(!refused.ok, "C acquired r while A held it: node 2's quarantine ended early");
      await a.call("read");
      await a.call("use");
      await a.call("write", { value: 1 });
      await a.attempt("release");
      if (refused.ok) await c.attempt("release");
    },
  },
  {
    id: "L6",
    title: "crash + immediate restart with AOF appendfsync always: key restored, TTL kept elapsing",
    expected: "safe",
    setup: { persistence: "aof-always", store: true },
    checks: { MX: "clean", RS: "clean" },
    async run(ctx) {
      const spec = { library: noQuarantine };
      const [a, b] = await all(ctx.spawn("lock-set", "A", spec), ctx.spawn("lock-set", "B", spec));
      await warm(a, b);
      // Long enough to outlast the restart on a loaded machine: the row is about the key surviving it.
      const ttlMs = 5_000;
      await holdOn(ctx, a, "r", [3, 4], ttlMs);
      await ctx.restart(2, true);
      const pttl = await ctx.admin(2).pttl("r");
      ctx.expect(
        pttl > 0 && pttl < ttlMs,
        `node 2 after restart: PTTL ${pttl} (expected restored and elapsing)`,
      );
      const refused = await b.attempt("acquire", {
        resource: "r",
        acquireOptions: { retry: { retries: 0 } },
      });
      ctx.expect(!refused.ok, "B acquired r while A held it (node 2 restored from AOF)");
      await a.call("increment");
      // May fail with QuorumError while A reconnects to node 2: the key then expires.
      await a.attempt("release");
      // B's own lock outlasts its increment and release on a loaded machine
      // (at the matrix's 300 ms, its release once found the validity gone).
      await b.call("acquire", { resource: "r", ttlMs: 2_000, acquireOptions: retryFor(ttlMs * 2) });
      await b.call("increment");
      await b.call("release");
    },
  },
  {
    id: "L7",
    title:
      "power loss (AOF everysec tail lost) on node 2 while A holds {0,1,2}, quarantine on: the restart is quarantined, B waits for A's lock to expire",
    expected: "safe",
    setup: { persistence: "aof-everysec", extraArgs: noAofRewriteArgs, store: true },
    checks: { MX: "clean", RS: "clean" },
    async run(ctx) {
      // FAULTS.md has this row documented-unsafe: the marker survives, so
      // only a missing marker would quarantine the node. Since 2026-12-02 a
      // node restarted without appendfsync always (a new run_id at the
      // client's check) is quarantined too (lock/quarantine-scripts.ts,
      // certifyScript); L7-no-quarantine is the negative control.
      // A's lock outlasts the power loss and restart on a loaded machine
      // (at 1.5 s it ran out first, and A's own increment then failed).
      const maxTtlMs = 4_000;
      const spec = { library: { maxTtlMs }, fencing: false };
      // B's own lock lasts 2 s: at 300 ms, its read, write and release on
      // a loaded machine outlasted it (its release found the validity gone).
      const [a, b] = await all(
        ctx.spawn("lock-set", "A", spec),
        ctx.spawn("lock-set", "B", { ...spec, ttlMs: 2_000 }),
      );
      await warm(a, b);
      const sampled = ctx.aofSize(2);
      await holdOn(ctx, a, "r", [3, 4], maxTtlMs);
      await ctx.powerLoss(2, sampled);
      await a.call("increment");
      // Granted once A's lock expired (nodes 0, 1, 3, 4), not over node 2 before.
      const got = await b.attempt("acquire", {
        resource: "r",
        acquireOptions: retryFor(maxTtlMs * 3),
      });
      ctx.expect(got.ok, `B could not acquire r after A's lock: ${got.ok ? "" : got.message}`);
      if (got.ok) {
        await b.call("increment");
        await b.call("release");
      }
      await a.attempt("release");
    },
  },
  {
    id: "L7-no-quarantine",
    title:
      "power loss as L7 with the quarantine off: B takes {2,3,4} while A holds {0,1,2} (negative control)",
    expected: "documented-unsafe",
    setup: { persistence: "aof-everysec", extraArgs: noAofRewriteArgs, store: true },
    checks: { MX: "flagged", RS: "flagged" },
    async run(ctx) {
      const spec = { library: noQuarantine, fencing: false };
      const [a, b] = await all(ctx.spawn("lock-set", "A", spec), ctx.spawn("lock-set", "B", spec));
      await warm(a, b);
      const sampled = ctx.aofSize(2);
      await holdOn(ctx, a, "r", [3, 4], 4_000);
      await ctx.powerLoss(2, sampled);
      const got = await b.attempt("acquire", { resource: "r", acquireOptions: retryFor(3_000) });
      ctx.expect(
        got.ok,
        `B did not acquire r after node 2's power loss: ${got.ok ? "" : got.message}`,
      );
      await a.call("read");
      await b.call("increment");
      await a.call("use");
      await a.call("write", { value: 1 });
      await a.attempt("release");
      await b.attempt("release");
    },
  },
  {
    id: "L7-delayed",
    title: "power loss as L7 with an operator delayed restart (> maxTtl): safe",
    expected: "safe",
    setup: { persistence: "aof-everysec", extraArgs: noAofRewriteArgs, store: true },
    checks: { MX: "clean", RS: "clean" },
    async run(ctx) {
      const maxTtlMs = 800;
      const spec = { fencing: false, library: { maxTtlMs } };
      const [a, b] = await all(ctx.spawn("lock-set", "A", spec), ctx.spawn("lock-set", "B", spec));
      await warm(a, b);
      const sampled = ctx.aofSize(2);
      await holdOn(ctx, a, "r", [3, 4], maxTtlMs);
      await a.call("increment");
      await ctx.kill(2);
      await ctx.sleep(maxTtlMs + 100);
      await ctx.powerLoss(2, sampled);
      await b.call("acquire", { resource: "r", acquireOptions: retryFor(3_000) });
      await b.call("increment");
      await b.attempt("release");
      await a.attempt("release");
    },
  },
  {
    id: "L8",
    title: "clients cut off from 2 of 5 nodes (silent: nodes stopped) while contending",
    expected: "safe",
    setup: { store: true },
    checks: { MX: "clean", RS: "clean", LV: "clean" },
    checkOptions: { LV: { nodeCount: 5 } },
    async run(ctx) {
      const clients = await contenders(ctx, 4, { durationMs: 600_000 });
      // Every client past its first contact before the pause: the row is
      // about rounds with 3 of 5 nodes answering, and a first contact slowed
      // by a loaded machine (over 2 s was seen) took the whole window.
      await warm(...clients);
      await ctx.sleep(300);
      ctx.pause(3, 4);
      // Long enough for a whole contended acquire to fall inside it beside
      // other test files (they took 1.2-1.5 s there; 1 s held none).
      await ctx.sleep(Math.max(3_000, ctx.params.durationMs));
      ctx.resume(3, 4);
      await ctx.sleep(300);
      await stopped(ctx, clients);
    },
    verify(events, ctx) {
      const [[from, to]] = faultWindows(events, "pause") as [[number, number]];
      const during = calls(events, "acquire").filter(
        (c) => ok(c) && c.invoke.timeMs > from && c.done!.timeMs < to,
      );
      ctx.expect(during.length > 0, "no acquire succeeded with 3 of 5 nodes answering");
      ctx.expect(
        validityViolations(events).length === 0,
        `validity: ${validityViolations(events).join("; ")}`,
      );
    },
  },
  {
    id: "L9",
    title: "clients cut off from 3 of 5: unavailable; available again within a TTL after heal",
    expected: "unavailable",
    setup: { store: true },
    checks: { MX: "clean", RS: "clean", LV: "clean" },
    checkOptions: { LV: { nodeCount: 5 } },
    async run(ctx) {
      const clients = await contenders(ctx, 4, {
        durationMs: 600_000,
        library: { retry: { retries: 1000, delayMs: 20, jitterMs: 10 } },
      });
      await ctx.sleep(300);
      ctx.pause(2, 3, 4);
      await ctx.sleep(800);
      ctx.resume(2, 3, 4);
      // Available again within a TTL (and a reconnect): give the loops time to show it.
      await ctx.sleep(ctx.ttlMs + 700);
      await stopped(ctx, clients);
      // Partial keys released or expired: nothing but internal keys left.
      const left = await ctx.leftoverKeys();
      ctx.expect(
        left.every((k) => k.every((key) => key.startsWith("value:"))),
        `keys left: ${JSON.stringify(left)}`,
      );
    },
    verify(events, ctx) {
      // "No ok acquire while 3 of 5 are stopped" is LV's unavailable window (nodeCount 5).
      const healed = Math.min(...faultWindows(events, "pause").map(([, end]) => end));
      const after = calls(events, "acquire").filter((c) => ok(c) && c.done!.timeMs > healed);
      ctx.expect(after.length > 0, "no acquire succeeded after the heal");
    },
  },
  {
    id: "L10",
    title:
      "clients see different majorities (A: {0,1,2}, B: {2,3,4}, per-client proxies): node 2 arbitrates, also for a client without fencing on 2 free nodes",
    expected: "safe",
    setup: { store: true },
    checks: { MX: "clean", RS: "clean", LV: "clean" },
    async run(ctx) {
      const [pa, pb] = await all(ctx.proxies("A"), ctx.proxies("B"));
      const spec = (urls: string[]) => ({
        urls,
        durationMs: ctx.params.durationMs + 500,
        resources: ["r"],
        fencedStore: true,
        library: { retry: { retries: 40, delayMs: 20, jitterMs: 20 } },
      });
      // C and D share A's and B's links (so their views), IPC-only: D
      // holds "s" through {0,1,2}, then C, without fencing, finds it free
      // on 3 and 4 and held on 2: node 2's vote is what refuses C, on every
      // run (the loops meet that race only by luck).
      const [a, b, d, c] = await all(
        ctx.spawn("lock-set", "A", spec(urlsOf(pa))),
        ctx.spawn("lock-set", "B", spec(urlsOf(pb))),
        ctx.spawn("lock", "D", { urls: urlsOf(pa) }),
        ctx.spawn("lock", "C", { ...splitRival, urls: urlsOf(pb) }),
      );
      for (const i of [3, 4]) pa[i]!.blackhole();
      for (const i of [0, 1]) pb[i]!.blackhole();
      const held = await d.call<{ validUntilMs: number }>("acquire", {
        resource: "s",
        ttlMs: 5_000,
      });
      await minorityRefused(ctx, held, c, "s");
      await d.attempt("use", { resource: "s" });
      await d.attempt("release", { resource: "s" });
      await finished([a, b]);
    },
  },
  {
    id: "L11",
    title:
      "replies 200 ms late on 1 node (safe, latency of the 3rd node), then 350 ms late on 3 nodes with TTL 300 ms (acquire fails, releases)",
    expected: "safe",
    checks: { MX: "clean", HY: "clean" },
    async run(ctx) {
      // faults-tools' proxy delays replies (this kernel has no netem).
      const proxies = await ctx.proxies("A");
      const a = await ctx.spawn("lock", "A", {
        urls: urlsOf(proxies),
        library: { nodeTimeoutMs: 1_000 },
      });
      await warm(a);
      proxies[4]!.latency(200, { jitterMs: 20 });
      const one = await a.attempt("acquire", { resource: "r", ttlMs: 1_000 });
      ctx.expect(one.ok, `one slow node: acquire failed: ${one.ok ? "" : one.message}`);
      await a.attempt("release");
      proxies[4]!.latency(0);
      for (const i of [2, 3, 4]) proxies[i]!.latency(350, { jitterMs: 20 });
      const three = await a.attempt("acquire", {
        resource: "r2",
        ttlMs: 300,
        acquireOptions: { retry: { retries: 0 } },
      });
      ctx.expect(
        !three.ok,
        "three nodes slower than the TTL: acquire returned a lock (node-redlock #296)",
      );
      for (const i of [2, 3, 4]) proxies[i]!.latency(0);
      await ctx.sleep(400);
      const left = await holders(ctx, "r2");
      ctx.expect(left.length === 0, `r2 still on nodes ${left} after its TTL`);
    },
    verify(events, ctx) {
      // One slow node: the round ends on the 3rd answer, before the slow one (200 ms) arrives.
      const first = calls(events, "acquire", "A").find((c) => c.invoke.resource === "r" && ok(c));
      const tookMs = first ? first.done!.timeMs - first.invoke.timeMs : Number.NaN;
      ctx.expect(tookMs < 200, `acquire with one node 200 ms slow took ${tookMs.toFixed(0)} ms`);
      ctx.expect(
        validityViolations(events).length === 0,
        `validity: ${validityViolations(events).join("; ")}`,
      );
    },
  },
  {
    id: "L12",
    title:
      "reply delayed past the per-node timeout (SET runs late), reset after the SET ran, swallowed: failed votes, no key outlives its TTL",
    expected: "safe",
    checks: { MX: "clean", HY: "clean" },
    async run(ctx) {
      const a = await ctx.spawn("lock", "A");
      await warm(a);
      ctx.pause(4);
      const got = await a.attempt("acquire", { resource: "r", ttlMs: 2_000 });
      ctx.expect(got.ok, `acquire with one late node failed: ${got.ok ? "" : got.message}`);
      await a.attempt("release");
      ctx.resume(4);
      // The late SET and then the release run on node 4, in that order.
      const gone = await ctx.waitFor(async () => (await holders(ctx, "r")).length === 0, 1_000);
      ctx.expect(gone, `r left on nodes ${await holders(ctx, "r")} after release (TTL 2000 ms)`);
      // Through proxies: the acquire's reply reset on node 4 after the SET ran, swallowed on node 3.
      const proxies = await ctx.proxies("B");
      const b = await ctx.spawn("lock", "B", { urls: urlsOf(proxies), ttlMs: 500 });
      await warm(b);
      proxies[4]!.trigger({ match: scriptIs("acquire"), reply: "reset" });
      proxies[3]!.trigger({ match: scriptIs("acquire"), reply: "swallow" });
      const third = await b.attempt("acquire", { resource: "s", ttlMs: 500 });
      ctx.expect(
        third.ok,
        `acquire with 3 clean votes of 5 failed: ${third.ok ? "" : third.message}`,
      );
      await b.attempt("release", { resource: "s" });
      // A key left on 3 or 4 by the lost replies lives at most its TTL.
      await ctx.sleep(550);
      const outlived = await holders(ctx, "s");
      ctx.expect(outlived.length === 0, `s still on nodes ${outlived} after its TTL`);
    },
  },
  {
    id: "L13",
    title:
      "slicer (1-byte slices) on node 0, bandwidth 1 KB/s on node 1, slow_close on node 2, limit_data on node 3",
    expected: "safe",
    setup: { store: true },
    checks: { MX: "clean", RS: "clean", HY: "clean" },
    async run(ctx) {
      const proxies = await ctx.proxies();
      proxies[0]!.slicer({ sizeBytes: 1, delayMs: 1, direction: "both" });
      proxies[1]!.bandwidth(1_024, { direction: "both" });
      proxies[2]!.slowClose(200);
      proxies[3]!.limitData(4_096, { direction: "both" });
      await finished(
        await contenders(ctx, 4, { urls: urlsOf(proxies), library: { nodeTimeoutMs: 200 } }),
      );
    },
  },
  {
    id: "L14",
    title: "node paused (SIGSTOP) longer than the TTL while a lock is held, then resumed",
    expected: "safe",
    setup: { store: true },
    checks: { MX: "clean", RS: "clean", LV: "clean" },
    async run(ctx) {
      const [a, others] = await all(ctx.spawn("lock", "A"), contenders(ctx, 4));
      await warm(a);
      await a.call("acquire", { resource: "r1", ttlMs: ctx.ttlMs });
      ctx.pause(0);
      await ctx.sleep(ctx.ttlMs * 3);
      ctx.resume(0);
      await a.attempt("release", { resource: "r1" });
      await finished(others);
      const stale = await ctx.admin(0).pttl("r1");
      ctx.expect(
        stale < ctx.ttlMs,
        `node 0's key r1 did not expire by time after resume (PTTL ${stale})`,
      );
    },
  },
  ...(["no-fencing", "fencing"] as const).map(
    (variant): Row => ({
      id: `L15-${variant}`,
      title: `client paused (SIGSTOP) > validity after acquire, before writing; ${variant === "fencing" ? "fenced store rejects the stale write" : "no fencing: holds overlap (negative control)"}`,
      expected: variant === "fencing" ? "safe" : "documented-unsafe",
      setup: { store: true },
      checks:
        variant === "fencing" ? { MX: "flagged", RS: "clean" } : { MX: "flagged", RS: "flagged" },
      async run(ctx) {
        const fencing = variant === "fencing";
        const spec = { fencing, fencedStore: fencing };
        const [a, b] = await all(
          ctx.spawn("lock-set", "A", spec),
          ctx.spawn("lock-set", "B", spec),
        );
        await warm(a, b);
        const ttlMs = ctx.ttlMs;
        await a.call("acquire", { resource: "r", ttlMs });
        await a.call("read");
        const resumeA = ctx.stopClient(a);
        await ctx.sleep(ttlMs * 2);
        await b.call("acquire", { resource: "r", acquireOptions: retryFor(ttlMs * 2) });
        await b.call("increment");
        resumeA();
        const left = await a.call<{ remainingMs: number }>("remaining");
        ctx.expect(
          left.remainingMs <= 0,
          `A's lock reports ${left.remainingMs} ms left after the pause`,
        );
        await a.call("use");
        await a.attempt("write", { value: 1 });
        const extended = await a.attempt("extend");
        ctx.expect(!extended.ok, "A extended a lock that expired during its pause");
        await b.attempt("release");
        await a.attempt("release");
      },
      verify(events, ctx) {
        if (variant !== "fencing") return;
        const refused = calls(events, "write").filter((c) => c.done?.error?.code === "STALE_FENCE");
        ctx.expect(refused.length > 0, "the fenced store refused no stale write");
      },
    }),
  ),
  {
    id: "L16",
    title:
      "event loop blocked during acquire: elapsed includes the block; past TTL − drift → fail + release",
    expected: "safe",
    checks: { MX: "clean", HY: "clean" },
    async run(ctx) {
      // Node timeouts longer than the blocks: the replies are in before any timer fires.
      const a = await ctx.spawn("lock", "A", { library: { nodeTimeoutMs: 500 } });
      await warm(a);
      const short = await a.attempt("acquireBlocked", {
        resource: "r",
        ttlMs: 1_000,
        blockMs: 100,
      });
      ctx.expect(
        short.ok,
        `a 100 ms block under a 1000 ms TTL failed the acquire: ${short.ok ? "" : short.message}`,
      );
      await a.attempt("release");
      const long = await a.attempt("acquireBlocked", { resource: "r2", ttlMs: 300, blockMs: 350 });
      ctx.expect(!long.ok, "a 350 ms block under a 300 ms TTL still returned a lock");
      const gone = await ctx.waitFor(async () => (await holders(ctx, "r2")).length === 0, 200);
      ctx.expect(gone, "the failed acquire's keys were not released");
    },
    verify(events, ctx) {
      ctx.expect(
        validityViolations(events).length === 0,
        `validity: ${validityViolations(events).join("; ")}`,
      );
    },
  },
  ...(["partial", "all"] as const).map(
    (variant): Row => ({
      id: variant === "partial" ? "L17" : "L17-all5",
      title:
        variant === "partial"
          ? "forward clock jump ≥ remaining TTL on node 2 while A holds {0,1,2}: B takes {2,3,4} (negative control); fenced store stays clean"
          : "forward clock jump on node 2 while A holds all 5: B cannot take a majority",
      expected: variant === "partial" ? "documented-unsafe" : "safe",
      setup: { store: true },
      checks: variant === "partial" ? { MX: "flagged", RS: "clean" } : { MX: "clean", RS: "clean" },
      async run(ctx) {
        const spec = { fencedStore: true, library: noQuarantine };
        const [a, b] = await all(
          ctx.spawn("lock-set", "A", spec),
          ctx.spawn("lock-set", "B", spec),
        );
        await warm(a, b);
        if (variant === "partial") await holdOn(ctx, a, "r", [3, 4], 4_000);
        else await a.call("acquire", { resource: "r", ttlMs: 4_000 });
        await a.call("read");
        await ctx.clockJump(2, 10_000);
        const got = await b.attempt("acquire", {
          resource: "r",
          acquireOptions: { retry: { retries: 3, delayMs: 20 } },
        });
        ctx.expect(
          got.ok === (variant === "partial"),
          `B's acquire ${got.ok ? "succeeded" : "failed"}`,
        );
        if (got.ok) await b.call("increment");
        await a.call("use");
        await a.attempt("write", { value: 1 });
        await b.attempt("release");
        await a.attempt("release");
      },
    }),
  ),
  ...([1.01, 1.5] as const).map(
    (rate): Row => ({
      id: rate === 1.01 ? "L18-within" : "L18-beyond",
      title: `node 2's clock runs ×${rate} (TTL shrink at that rate) while A holds {0,1,2}`,
      expected: rate === 1.01 ? "safe" : "documented-unsafe",
      setup: { store: true },
      checks: rate === 1.01 ? { MX: "clean" } : { MX: "flagged" },
      async run(ctx) {
        const spec = { fencing: false, library: noQuarantine };
        const [a, b] = await all(ctx.spawn("lock", "A", spec), ctx.spawn("lock", "B", spec));
        await warm(a, b);
        const ttlMs = 3_000;
        const held = await holdOn(ctx, a, "r", [3, 4], ttlMs);
        const clock = ctx.clock(2);
        clock.setRate(rate);
        // B tries each 20 ms, until 100 ms before A's lock's validity ends.
        // A grant counts as taken while A's lock was valid only if it came
        // back before that validity ended: on a loaded machine a try sent in
        // time can be granted after it (CI once saw one sent 71 ms before
        // the end come back 52 ms after it), which is no overlap; MX judges
        // the holds' intervals themselves.
        let taken = false;
        for (;;) {
          await ctx.sleep(20);
          if (monotonicMs() >= held.validUntilMs - 100) break;
          const got = await b.attempt("acquire", {
            resource: "r",
            acquireOptions: { retry: { retries: 0 } },
          });
          if (!got.ok) continue;
          taken = monotonicMs() < held.validUntilMs;
          if (!taken) ctx.note("B's last try was granted after A's lock's validity ended");
          break;
        }
        clock.setRate(1);
        ctx.expect(
          taken === rate > 1.02,
          `B ${taken ? "took" : "did not take"} r while A's lock was valid`,
        );
        await b.attempt("release");
        await a.attempt("release");
      },
    }),
  ),
  {
    id: "L19",
    title: "backward clock jump on a node (its TTLs get 1 h longer): liveness only",
    expected: "safe",
    checks: { MX: "clean", LV: "clean" },
    async run(ctx) {
      const [a, b] = await all(ctx.spawn("lock", "A"), ctx.spawn("lock", "B"));
      await warm(a, b);
      await a.call("acquire", { resource: "r", ttlMs: 300 });
      await ctx.clockJump(2, -3_600_000);
      await ctx.sleep(350);
      const got = await b.attempt("acquire", { resource: "r", acquireOptions: retryFor(1_000) });
      ctx.expect(
        got.ok,
        `B could not acquire r once A's lock expired (4 nodes free): ${got.ok ? "" : got.message}`,
      );
      await b.attempt("release");
      ctx.note(
        "a client wall-clock jump is not injected: the algorithms read only the monotonic clock (performance.now); the node-redlock drop-in's expiration, read from it, is stepped an hour each way in node-redlock-compat.test.ts",
      );
    },
  },
  {
    id: "L20",
    title:
      "Redis error replies: NOSCRIPT everywhere, OOM on node 3, READONLY on node 4, then WRONGTYPE on node 2, then MISCONF on node 1",
    expected: "safe",
    checks: { MX: "clean", HY: "clean" },
    async run(ctx) {
      const a = await ctx.spawn("lock", "A", { library: { recheckIntervalMs: 100_000 } });
      await warm(a);
      ctx.faultNow("script-flush", "all nodes");
      await Promise.all([0, 1, 2, 3, 4].map((i) => ctx.admin(i).script("FLUSH")));
      ctx.faultNow("oom", "node-3", "maxmemory 1 + noeviction");
      await ctx.admin(3).config("SET", "maxmemory-policy", "noeviction");
      await ctx.admin(3).config("SET", "maxmemory", "1");
      ctx.faultNow("readonly", "node-4", "REPLICAOF node 0");
      await ctx.admin(4).replicaof("127.0.0.1", String(ctx.cluster.node(0).port));
      const three = await a.attempt("acquire", { resource: "r" });
      ctx.expect(
        three.ok,
        `3 healthy nodes of 5: acquire failed: ${three.ok ? "" : three.message}`,
      );
      await a.attempt("release");
      ctx.faultNow("wrongtype", "node-2", "r is a list");
      await ctx.admin(2).lpush("r", "x");
      const two = await a.attempt("acquire", {
        resource: "r",
        acquireOptions: { retry: { retries: 1 } },
      });
      // WRONGTYPE: a list under the lock key fails that node (it does not look held).
      ctx.expect(
        !two.ok && two.code === "ERR_QUORUM" && /WRONGTYPE/.test(two.message),
        `2 healthy nodes: expected QuorumError naming WRONGTYPE, got ${two.ok ? "a lock" : `${two.code}: ${two.message}`}`,
      );
      await ctx.admin(2).del("r");
      // MISCONF on node 1: a node with RDB save points whose last save
      // failed refuses writes (stop-writes-on-bgsave-error, on by default).
      // The save fails for real: its directory is gone.
      ctx.faultNow("misconf", "node-1", "save points, a BGSAVE into a removed directory");
      const dataDir = ctx.cluster.node(1).dataDir;
      await ctx.admin(1).config("SET", "save", "3600 1");
      rmSync(dataDir, { recursive: true, force: true });
      await ctx.admin(1).bgsave();
      const failed = await ctx.waitFor(
        async () => /rdb_last_bgsave_status:err/.test(await ctx.admin(1).info("persistence")),
        5_000,
      );
      ctx.expect(failed, "premise broke: node 1's BGSAVE did not fail");
      const misconf = await a.attempt("acquire", {
        resource: "r",
        acquireOptions: { retry: { retries: 1 } },
      });
      ctx.expect(
        !misconf.ok && misconf.code === "ERR_QUORUM" && /MISCONF/.test(misconf.message),
        `node 1 MISCONF, nodes 3 and 4 failing: expected QuorumError naming MISCONF, got ${misconf.ok ? "a lock" : `${misconf.code}: ${misconf.message}`}`,
      );
      mkdirSync(dataDir, { recursive: true });
      await ctx.admin(1).config("SET", "save", "");
      await ctx.admin(4).replicaof("NO", "ONE");
      await ctx.admin(3).config("SET", "maxmemory", "0");
      // Every node healthy again: r is granted.
      const again = await a.attempt("acquire", { resource: "r", acquireOptions: retryFor(3_000) });
      ctx.expect(
        again.ok,
        `the nodes healthy again: acquire failed: ${again.ok ? "" : again.message}`,
      );
      if (again.ok) await a.attempt("release");
    },
  },
  {
    id: "L20-loading",
    title:
      "LOADING: node 2 restarted with 2 million keys to load from its AOF while A asks for r (nodes 3 and 4 stopped): refused naming LOADING, granted once it loaded",
    expected: "safe",
    setup: { persistence: "aof-always" },
    checks: { MX: "clean", HY: "clean" },
    async run(ctx) {
      const a = await ctx.spawn("lock", "A", { library: { recheckIntervalMs: 100_000 } });
      await warm(a);
      // Keys enough that loading them back takes a while: a restarted node
      // answers every command with LOADING until it has read its AOF.
      // In slices: each call is bounded by the admin client's timeout.
      for (let from = 0; from < 2_000_000; from += 100_000) {
        await ctx
          .admin(2)
          .eval(
            "for i = ARGV[1] + 1, ARGV[1] + 100000 do redis.call('set', 'filler:' .. i, 'x') end return 1",
            0,
            String(from),
          );
      }
      ctx.faultNow("loading", "node-2", "kill -9, restart loading 2 million keys");
      await ctx.cluster.kill(2);
      const restarting = ctx.restart(2, true);
      // The premise: node 2 answers, and answers LOADING.
      const probe = new Redis(ctx.urls[2]!, {
        lazyConnect: true,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
        enableReadyCheck: false,
      });
      probe.on("error", () => {});
      let loading = false;
      for (const until = monotonicMs() + 10_000; !loading && monotonicMs() < until; ) {
        loading = await probe
          .connect()
          .then(() => probe.ping())
          .then(
            () => false,
            (error: Error) => /LOADING/.test(error.message),
          );
        if (!loading) {
          probe.disconnect();
          await ctx.sleep(5);
        }
      }
      probe.disconnect();
      ctx.expect(loading, "premise broke: node 2 never answered LOADING");
      if (loading) {
        ctx.pause(3, 4);
        try {
          // Refused every time (2 nodes of 5 answer); until A's client has
          // reconnected to node 2, that node fails it for another reason
          // (its connection reopening), so A asks again while node 2 loads.
          const pattern = new RegExp(`${new URL(ctx.urls[2]!).host}: [^\\n]*loading its data set`);
          let last = "";
          let named = false;
          for (let n = 0; n < 20 && !named; n++) {
            const got = await a.attempt("acquire", {
              resource: "r",
              acquireOptions: { retry: { retries: 0 } },
            });
            ctx.expect(!got.ok, "A acquired r from 2 answering nodes of 5");
            if (got.ok) break;
            last = `${got.code}: ${got.message}`;
            named = got.code === "ERR_QUORUM" && pattern.test(got.message);
            // Only the loading node is said to be loading (3 and 4 are stopped).
            ctx.expect(
              (got.message.match(/loading its data set/g) ?? []).length <= 1,
              `a node other than 2 said to be loading: ${got.message}`,
            );
            if (!named) await ctx.sleep(50);
          }
          ctx.expect(
            named,
            `node 2 loading, 3 and 4 stopped: no QuorumError named LOADING; the last: ${last}`,
          );
        } finally {
          ctx.resume(3, 4);
        }
      }
      await restarting;
      const after = await a.attempt("acquire", { resource: "r", acquireOptions: retryFor(5_000) });
      ctx.expect(after.ok, `node 2 loaded: acquire failed: ${after.ok ? "" : after.message}`);
      if (after.ok) await a.attempt("release");
    },
  },
  {
    id: "L21",
    title: "release and extend after expiry and re-acquisition by another client",
    expected: "safe",
    checks: { MX: "clean" },
    async run(ctx) {
      const [a, b] = await all(ctx.spawn("lock", "A"), ctx.spawn("lock", "B"));
      await warm(a, b);
      await a.call("acquire", { resource: "r", ttlMs: 300 });
      await ctx.sleep(350);
      await b.call("acquire", { resource: "r", ttlMs: 2_000 });
      const extended = await a.attempt("extend", { ttlMs: 2_000 });
      ctx.expect(
        !extended.ok && extended.code === "ERR_LOCK_EXPIRED",
        `A's extend after expiry: ${extended.ok ? "succeeded" : extended.code}`,
      );
      await a.attempt("release");
      const still = await holders(ctx, "r");
      ctx.expect(
        still.length === 5,
        `A's late release deleted B's key on ${5 - still.length} node(s)`,
      );
      await b.call("use");
      await b.call("release");
    },
  },
  ...(["always", "quarantine"] as const).map(
    (variant): Row => ({
      id: `L22-${variant}`,
      title: `rolling restart of all 5 nodes one by one: ${variant === "always" ? "AOF always" : "no persistence + quarantine"}`,
      expected: "safe",
      setup: { persistence: variant === "always" ? "aof-always" : "none", store: true },
      checks: { MX: "clean", RS: "clean", LV: "clean" },
      async run(ctx) {
        const maxTtlMs = 400;
        // Fencing off: a node restarted empty would also wait for its fence repair (2 s); L25 covers that.
        const clients = await contenders(ctx, 4, {
          durationMs: 600_000,
          fencing: variant === "always",
          fencedStore: variant === "always",
          library: { maxTtlMs, retry: { retries: 1000, delayMs: 20, jitterMs: 10 } },
        });
        // CI rolls a majority of the nodes, long runs all five.
        for (let i = 0; i < (ctx.params.quick ? 3 : 5); i++) {
          await ctx.sleep(100);
          await ctx.restart(i, variant === "always");
          // Slow enough that at most one node is quarantined (or reconnecting) at a time.
          await ctx.sleep(variant === "always" ? 300 : maxTtlMs + 300);
        }
        await Promise.all(clients.map((c) => ctx.stopWorkload(c)));
      },
    }),
  ),
  {
    id: "L23",
    title:
      "misconfiguration: duplicate endpoint, the same server twice, a replica node, ttl > maxTtl (refused); a volatile-* eviction policy (warned)",
    expected: "refused",
    checks: {},
    async run(ctx) {
      const [u0, u1, u2, u3] = ctx.urls as [string, string, string, string];
      const sameServer = u1.replace("127.0.0.1", "localhost");
      const cases: Array<[string, string[], Record<string, unknown>]> = [
        ["duplicate endpoint", [u0, u0, u1, u2, u3], {}],
        ["same server twice (another name)", [u0, u1, sameServer, u2, u3], {}],
        ["ttl > maxTtl", ctx.urls, { ttlMs: 2_000, maxTtlMs: 1_000 }],
      ];
      ctx.faultNow("replica", "node-4", "REPLICAOF node 3");
      await ctx.admin(4).replicaof("127.0.0.1", String(ctx.cluster.node(3).port));
      cases.push(["a replica node", ctx.urls, {}]);
      for (const [n, [name, urls, options]] of cases.entries()) {
        const { ttlMs, ...library } = options;
        const client = await ctx
          .spawn("lock", `case-${n}`, { urls, library })
          .catch((error: Error) => error);
        if (client instanceof Error) {
          // Refused at construction: the workload exits before it serves, with the typed error.
          ctx.expect(
            /ERR_[A-Z_]+|[A-Z][a-z]+Error/.test(client.message),
            `${name}: untyped failure: ${client.message}`,
          );
          ctx.note(
            `${name}: refused at construction (${/(ERR_[A-Z_]+|[A-Z][a-zA-Z]+Error)/.exec(client.message)?.[1]})`,
          );
          continue;
        }
        const got = await client.attempt("acquire", {
          resource: "r",
          ttlMs: ttlMs ?? 300,
          acquireOptions: { retry: { retries: 0 } },
        });
        ctx.expect(
          !got.ok && got.code.startsWith("ERR_"),
          `${name}: ${got.ok ? "acquired (a fake majority)" : `untyped error ${got.code}`}`,
        );
        if (!got.ok) ctx.note(`${name}: ${got.code}`);
        await client.attempt("release");
      }
      // An eviction policy that may drop lock keys: warned (not refused), naming the node and setting.
      await ctx.admin(4).replicaof("NO", "ONE");
      ctx.faultNow("config-set", "node-0", "maxmemory 100mb, maxmemory-policy volatile-lru");
      await ctx.admin(0).config("SET", "maxmemory", "100mb");
      await ctx.admin(0).config("SET", "maxmemory-policy", "volatile-lru");
      const warned = await ctx.spawn("lock", "case-eviction");
      const got = await warned.attempt("acquire", { resource: "r" });
      await warned.attempt("release");
      const warning = await ctx.waitFor(() => /evict|volatile/i.test(warned.stderr), 1_000);
      ctx.expect(
        warning,
        `volatile-lru on node 0: no warning (acquire ${got.ok ? "succeeded" : got.code})`,
      );
    },
  },
  {
    id: "L24",
    title:
      "two extends of one lock in one tick (longer then shorter), NOSCRIPT on one node, two nodes stalled ~15 ms",
    expected: "safe",
    checks: { MX: "clean" },
    async run(ctx) {
      const a = await ctx.spawn("lock", "A", { library: { nodeTimeoutMs: 200 } });
      await warm(a);
      await a.call("acquire", { resource: "r", ttlMs: 1_000 });
      ctx.faultNow("script-flush", "node-0");
      await ctx.admin(0).script("FLUSH");
      ctx.pause(3, 4);
      const both = a.call<{ remainingMs: number; nowMs: number }>("extendBoth", {
        ttls: [3_000, 400],
      });
      await ctx.sleep(15);
      ctx.resume(3, 4);
      const claimed = await both;
      // The validity claimed may not exceed what the 3rd-longest key TTL
      // still holds, plus the time between the claim and the PTTL reads (and 2 ms of rounding).
      const pttls = (await Promise.all([0, 1, 2, 3, 4].map((i) => ctx.admin(i).pttl("r")))).sort(
        (x, y) => y - x,
      );
      const sinceClaimMs = monotonicMs() - claimed.nowMs;
      ctx.note(
        `claimed ${claimed.remainingMs.toFixed(0)} ms; key PTTLs ${pttls.join(", ")} read ${sinceClaimMs.toFixed(0)} ms later`,
      );
      ctx.expect(
        claimed.remainingMs <= pttls[2]! + sinceClaimMs + 2,
        `the lock claims ${claimed.remainingMs.toFixed(0)} ms but a majority's keys hold ${pttls[2]} ms`,
      );
      await a.attempt("release");
    },
  },
  {
    id: "L25",
    title:
      "rolling restart without persistence, each quarantine waited out, then a never-locked resource, fencing on",
    expected: "safe",
    checks: { MX: "clean", LV: "clean" },
    async run(ctx) {
      const maxTtlMs = 300;
      const a = await ctx.spawn("lock", "A", { library: { maxTtlMs } });
      await warm(a);
      await a.call("acquire", { resource: "r", ttlMs: 300 });
      // A stall past the 300 ms validity would fail this release; the row is about the restarts.
      await a.attempt("release", { resource: "r" });
      // Each node costs its quarantine and the fixed 2 s fence-repair delay: CI rolls a majority.
      for (let i = 0; i < (ctx.params.quick ? 3 : 5); i++) {
        await ctx.restart(i, false);
        // Rolling slowly enough: the next node goes down only once this one
        // votes again (its quarantine, maxTtlMs, then its fence repair, 2 s
        // after it is met, then a round): it then holds a grant's key.
        const deadline = performance.now() + maxTtlMs + 6_000;
        let back = false;
        while (!back && performance.now() < deadline) {
          const got = await a.attempt("acquire", {
            resource: "r",
            ttlMs: 300,
            acquireOptions: retryFor(1_000),
          });
          await ctx.sleep(100);
          back = got.ok && (await ctx.admin(i).exists("r")) === 1;
          await a.attempt("release", { resource: "r" });
        }
        ctx.expect(
          back,
          `node ${i} did not vote again within ${maxTtlMs + 6_000} ms of its empty restart`,
        );
      }
      const fresh = await a.attempt("acquire", {
        resource: "never-before",
        ttlMs: 300,
        acquireOptions: retryFor(2_000),
      });
      ctx.expect(
        fresh.ok,
        `a never-locked resource after the rolling restart: ${fresh.ok ? "" : fresh.message}`,
      );
      await a.attempt("release", { resource: "never-before" });
    },
  },
  {
    id: "L26",
    title:
      "connection flaps around acquires and releases (reset, refuse, heal): no key reappears after a release resolved",
    expected: "safe",
    checks: { MX: "clean", HY: "clean" },
    async run(ctx) {
      const proxies = await ctx.proxies("A");
      const ttlMs = 500;
      const a = await ctx.spawn("lock", "A", { urls: urlsOf(proxies), ttlMs });
      await warm(a);
      const rounds = 5;
      for (let round = 0; round < rounds; round++) {
        const resource = `r${round}`;
        const got = await a.attempt("acquire", { resource, acquireOptions: retryFor(2_000) });
        if (!got.ok) continue;
        // Flap a seeded minority of links: reset now, refuse reconnects for a moment, then heal.
        const flapped = [0, 1, 2, 3, 4].filter(() => ctx.random() < 0.4).slice(0, 2);
        for (const i of flapped) {
          proxies[i]!.reset();
          proxies[i]!.refuseNew();
        }
        const releasing = a.attempt("release", { resource });
        await ctx.sleep(Math.floor(ctx.random() * 30));
        for (const i of flapped) proxies[i]!.heal();
        const released = await releasing;
        if (!released.ok) continue;
        // A flapped node may still hold the key until its TTL (its delete was
        // lost with the connection), but no node may get it back.
        const left = await holders(ctx, resource);
        await ctx.sleep(100);
        const later = await holders(ctx, resource);
        const back = later.filter((i) => !left.includes(i));
        ctx.expect(
          back.length === 0,
          `round ${round}: ${resource} back on nodes ${back} after release resolved`,
        );
      }
      await ctx.sleep(ttlMs + 50);
      const outlived = (await ctx.leftoverKeys()).flatMap((keys, i) =>
        keys.filter((k) => /^r\d$/.test(k)).map((k) => `${k}@${i}`),
      );
      ctx.expect(outlived.length === 0, `keys outlived their TTL: ${outlived}`);
    },
  },
  {
    id: "L27",
    title: "resource names that are redquorum's own keys",
    expected: "refused",
    checks: { MX: "clean", HY: "clean" },
    async run(ctx) {
      const a = await ctx.spawn("lock", "A");
      await warm(a);
      for (const resource of ["redquorum:marker", "redquorum:quarantine", "redquorum:fence:r"]) {
        const got = await a.attempt("acquire", {
          resource,
          acquireOptions: { retry: { retries: 0 } },
        });
        ctx.expect(
          !got.ok && got.code.startsWith("ERR_"),
          `${resource}: ${got.ok ? "acquired" : `untyped ${got.code}`}`,
        );
        if (got.ok) await a.attempt("release", { resource });
      }
      const ok2 = await a.attempt("acquire", { resource: "r" });
      ctx.expect(
        ok2.ok,
        `a plain resource afterwards: ${ok2.ok ? "" : ok2.message} (a node quarantined?)`,
      );
      await a.attempt("release", { resource: "r" });
      const left = await ctx.leftoverKeys();
      ctx.expect(
        left.every((k) => k.length === 0),
        `keys left: ${JSON.stringify(left)}`,
      );
    },
  },
];
