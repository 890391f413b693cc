import { NextId } from "../../../src/index.js";
import { takeBack as takeBackNode } from "../../helpers/take-back.js";
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

/** A client takes node `index` back as the member it was (test/helpers/take-back.ts). */
export function takeBack(ctx: RowContext, index: number): Promise<void> {
  return takeBackNode(ctx.urls, ctx.admin(index), index);
}
