import { NextId } from "../../../src/index.js";
import type { RowContext } from "./context.js";

/** NextId.init() from the runner (the counter exists before the workloads start). */
export async function initIds(
  ctx: RowContext,
  options: Record<string, unknown> = {},
): Promise<void> {
  const ids = new NextId(ctx.urls, { onWarning: () => {}, ...options });
  try {
    await ids.init();
  } finally {
    await ids.close();
  }
}
