import { NextId, Redlock } from "../../../src/index.js";
import type { RowContext } from "./context.js";

/** NextId.init() from the runner (the counter exists before the workloads start). */
export async function initIds(
  ctx: RowContext,
  options: Record<string, unknown> = {},
): Promise<void> {
  // init needs every node; on a loaded machine a first contact can time out: try again.
  // Setup, not what a row tests: a row's tight node timeout (100 ms) is not
  // init's. Under a heavily loaded run, three inits in a row missed 100 ms
  // on three nodes each.
  for (let attempt = 1; ; attempt++) {
    const ids = new NextId(ctx.urls, {
      onWarning: () => {},
      checkTimeoutMs: 5_000,
      ...options,
      nodeTimeoutMs: 1_000,
    });
    try {
      await ids.init();
      return;
    } catch (error) {
      if (attempt >= 3) throw error;
      await ctx.sleep(200);
    } finally {
      await ids.close();
    }
  }
}

/**
 * A client meets node `index` (restarted empty) while the other members
 * answer, and takes it back as the member it was, as any call would: a
 * lock call, which touches no ID counter. A node is taken back only once
 * N - Q + 1 of the other members confirm the record (docs/membership.md),
 * so a row that takes members down after the loss has it met first.
 */
export async function takeBack(ctx: RowContext, index: number): Promise<void> {
  const client = new Redlock(ctx.urls, {
    fencing: false,
    nodeTimeoutMs: 1_000,
    retry: { retries: 0 },
    onWarning: () => {},
  });
  try {
    await client.acquire([`take-back:${index}`], 1_000).then(
      (lock) => lock.release(),
      () => {},
    );
    const until = performance.now() + 5_000;
    while (!(await ctx.admin(index).get("redquorum:node"))) {
      if (performance.now() > until) throw new Error(`node ${index} not taken back within 5 s`);
      await ctx.sleep(20);
    }
  } finally {
    await client.close();
  }
}
