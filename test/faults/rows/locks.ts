/**
 * FAULTS.md's lock rows (L1–L27) as scripted schedules. Node indexes are
 * 0-based: FAULTS.md's "nodes {1,2,3}" are 0, 1, 2 here.
 */
import type { Row } from "../runner/types.js";
import { all, holdOn, warm } from "./scripts.js";

const noQuarantine = { quarantine: false };

export const lockRows: Row[] = [
  {
    id: "L1",
    title: "no faults, 8 clients contending on 3 resources (lock + lock-set)",
    expected: "safe",
    setup: { store: true },
    checks: { MX: "clean", RS: "clean", LV: "clean", HY: "clean" },
    async run(ctx) {
      const durationMs = ctx.params.durationMs;
      const resources = ["r1", "r2", "r3"];
      const clients = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          ctx.spawn(i < 4 ? "lock" : "lock-set", `${i < 4 ? "lock" : "set"}-${i}`, {
            durationMs,
            resources,
            fencedStore: true,
            library: { retry: { retries: 20, delayMs: 20, jitterMs: 20 } },
          }),
        ),
      );
      await Promise.all(clients.map((c) => c.exited));
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
      const got = await b.attempt("acquire", {
        resource: "r",
        acquireOptions: { retry: { retries: 30, delayMs: 50, jitterMs: 10 } },
      });
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
      const maxTtlMs = 1_500;
      const spec = { library: { maxTtlMs }, fencing: false };
      const [a, b] = await all(ctx.spawn("lock-set", "A", spec), ctx.spawn("lock-set", "B", spec));
      await warm(a, b);
      await holdOn(ctx, a, "r", [3, 4], maxTtlMs);
      await ctx.restart(2, false);
      const refused = await b.attempt("acquire", {
        resource: "r",
        acquireOptions: { retry: { retries: 0 } },
      });
      ctx.expect(!refused.ok, "B acquired r while A held it and node 2 was quarantined");
      await a.call("increment");
      await a.attempt("release");
      // Available again once the quarantine (maxTtlMs) ran out.
      const later = await b.attempt("acquire", {
        resource: "r",
        acquireOptions: {
          waitMs: maxTtlMs * 3,
          retry: { retries: 100, delayMs: 100, jitterMs: 20 },
        },
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
];
