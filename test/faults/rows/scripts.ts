/**
 * Steps several rows share: a lock held on exactly a chosen majority, the
 * first contact of a client while every node answers, waiting out a
 * queued write on a resumed node.
 */
import type { RowContext, Workload, WorkloadSpec } from "../runner/context.js";

/** First contact while every node answers (later acquires then go to all nodes at once). */
export async function warm(...clients: Workload[]): Promise<void> {
  await Promise.all(
    clients.map(async (client) => {
      const resource = `warm-${client.name}`;
      await client.call("acquire", { resource });
      // On a loaded machine the warm-up lock may run out before this: it is about connecting only.
      await client.attempt("release", { resource });
    }),
  );
}

/**
 * `client` acquires `resource` so that its key is on the nodes not in
 * `away` only: the `away` nodes are paused during the acquire (their votes
 * time out), then resumed, and the acquire they run once resumed is undone
 * there. Returns the acquire's result; throws if it failed.
 */
export async function holdOn(
  ctx: RowContext,
  client: Workload,
  resource: string,
  away: readonly number[],
  ttlMs: number,
): Promise<{ fence?: string; validUntilMs: number }> {
  ctx.pause(...away);
  let result: { fence?: string; validUntilMs: number };
  try {
    result = await client.call("acquire", { resource, ttlMs });
  } finally {
    ctx.resume(...away);
  }
  await undoQueued(ctx, resource, away);
  return result;
}

/** The paused nodes run the queued acquire once resumed: wait for its key, delete it. */
export async function undoQueued(
  ctx: RowContext,
  resource: string,
  nodes: readonly number[],
): Promise<void> {
  for (const i of nodes) {
    const ran = await ctx.waitFor(async () => (await ctx.admin(i).exists(resource)) === 1, 2_000);
    ctx.expect(ran, `node ${i} did not run the queued acquire of ${resource} once resumed`);
    await ctx.admin(i).del(resource);
  }
}

/** Which nodes hold `resource` now. */
export async function holders(ctx: RowContext, resource: string): Promise<number[]> {
  const out: number[] = [];
  for (const node of ctx.cluster.nodes) {
    if (node.state !== "running") continue;
    if (
      (await ctx
        .admin(node.index)
        .exists(resource)
        .catch(() => 0)) === 1
    )
      out.push(node.index);
  }
  return out;
}

/** Runs `spawn`s in parallel (process start-up dominates a short row). */
export function all<T extends readonly unknown[]>(
  ...work: { [K in keyof T]: Promise<T[K]> }
): Promise<T> {
  return Promise.all(work) as Promise<T>;
}

/** `count` lock clients (half of them lock-set with the fenced store when there is a store) looping for the row's duration. */
export async function contenders(
  ctx: RowContext,
  count: number,
  spec: WorkloadSpec = {},
): Promise<Workload[]> {
  return Promise.all(
    Array.from({ length: count }, (_, i) => {
      const set = ctx.store !== undefined && i % 2 === 1;
      return ctx.spawn(set ? "lock-set" : "lock", `${set ? "set" : "lock"}-${i}`, {
        durationMs: ctx.params.durationMs,
        resources: ["r1", "r2"],
        fencedStore: true,
        ...spec,
        library: { retry: { retries: 40, delayMs: 20, jitterMs: 20 }, ...spec.library },
      });
    }),
  );
}

/** Ends loop workloads started with a long duration, once the schedule is done. */
export async function stopped(ctx: RowContext, workloads: readonly Workload[]): Promise<void> {
  await Promise.all(workloads.map((w) => ctx.stopWorkload(w)));
}

/** Waits for loop workloads to finish their duration. */
export async function finished(workloads: readonly Workload[]): Promise<void> {
  await Promise.all(workloads.map((w) => w.exited));
}
