/** FAULTS.md's ID rows (I1–I16) as scripted schedules. */
import { initIds } from "../runner/ids-setup.js";
import type { Row } from "../runner/types.js";

export const idRows: Row[] = [
  {
    id: "I1",
    title: "8 concurrent clients, next() and nextBatch(k), no faults",
    expected: "safe",
    setup: { persistence: "aof-always" },
    checks: { ID: "clean", LV: "clean", HY: "clean" },
    async run(ctx) {
      const durationMs = ctx.params.durationMs;
      await initIds(ctx);
      const clients = await Promise.all(
        Array.from({ length: 4 }, (_, i) =>
          ctx.spawn("ids", `ids-${i + 1}`, { durationMs, callers: 2 }),
        ),
      );
      await Promise.all(clients.map((c) => c.exited));
    },
  },
];
