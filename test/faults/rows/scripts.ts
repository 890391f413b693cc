/**
 * Steps several rows share: a lock held on exactly a chosen majority, the
 * first contact of a client while every node answers, waiting out a
 * queued write on a resumed node.
 */
import { monotonicMs } from "../history.js";
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

/**
 * A workload that serves votes that split (spawned IPC-only): fencing off
 * and no retries, so one acquire is one round whose grant rests on its
 * votes alone (with fencing on, the token's commit needs a majority too and
 * would hide a lock granted on fewer votes).
 */
export const splitRival: WorkloadSpec = {
  fencing: false,
  // Not about timeouts: a loaded machine's slow answer must not turn the
  // split into a round without enough answers.
  library: { retry: { retries: 0 }, nodeTimeoutMs: 500 },
};

/**
 * Votes that split, scripted so that every run meets them: `holder` holds
 * `resource` on exactly 3 of 5 nodes (the row arranges which), with
 * `validUntilMs` from its acquire; `rival` (spawned with `splitRival`)
 * then tries it once and finds it free on the other 2 nodes: 2 votes of
 * 5, which must not grant. A grant after the holder's validity ran out is
 * no violation: the row notes that its premise broke instead of flagging.
 * A grant releases at once (the MX checker has the overlap).
 */
export async function minorityRefused(
  ctx: RowContext,
  holder: { validUntilMs: number },
  rival: Workload,
  resource: string,
): Promise<void> {
  const triedMs = monotonicMs();
  const got = await rival.attempt("acquire", { resource, ttlMs: 5_000 });
  if (!got.ok) {
    if (got.code === "ERR_QUORUM") {
      // Too many nodes timed out (a loaded machine): no split to judge.
      ctx.note(`premise broke: ${rival.name}'s split round met node timeouts (${got.message})`);
      return;
    }
    ctx.expect(
      got.code === "ERR_RESOURCE_LOCKED",
      `${rival.name} on 2 of 5 free nodes: expected ERR_RESOURCE_LOCKED, got ${got.code}: ${got.message}`,
    );
    return;
  }
  await rival.attempt("release", { resource });
  if (triedMs >= holder.validUntilMs) {
    ctx.note(
      `premise broke: ${rival.name} tried ${resource} ${Math.round(triedMs - holder.validUntilMs)} ms after the holder's validity ended (a stalled runner), so its grant proves nothing`,
    );
    return;
  }
  ctx.expect(
    false,
    `${rival.name} was granted ${resource} on 2 of 5 votes while another client held it on 3`,
  );
}

/**
 * `client` holds `resource` on nodes 0, 1 and 2 only: a client that is not
 * redquorum holds the key on 3 and 4 during the acquire (so those refuse),
 * and deletes it there afterwards. No fault: a plain SET NX of a foreign
 * client, as node-redlock's would be.
 */
export async function holdOnFirstThree(
  ctx: RowContext,
  client: Workload,
  resource: string,
  ttlMs: number,
): Promise<{ validUntilMs: number }> {
  for (const i of [3, 4]) await ctx.admin(i).set(resource, "foreign", "PX", 60_000);
  try {
    return await client.call<{ validUntilMs: number }>("acquire", { resource, ttlMs });
  } finally {
    for (const i of [3, 4]) await ctx.admin(i).del(resource);
  }
}
