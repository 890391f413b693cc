/**
 * Membership rows (M1–M4): clients whose node lists differ must never both
 * win. The cluster has 4 nodes; the members are first {0,1,2}. Each
 * safety row has a negative control that turns one check off and must be
 * flagged.
 */
import { NextId, Redlock } from "../../../src/index.js";
import { applyMemberChange } from "../../../src/membership/change.js";
import { membershipTesting } from "../../../src/membership/testing.js";
import { createNodes } from "../../../src/node/resolve.js";
import { monotonicMs } from "../history.js";
import type { RowContext, Workload } from "../runner/context.js";
import type { Row } from "../runner/types.js";
import { calls, ok } from "./history-queries.js";
import { stopped } from "./scripts.js";

const long = 600_000;
/** Not about node timeouts: a loaded machine must not fail these on 50 ms. */
const library = { nodeTimeoutMs: 500, retry: { retries: 40, delayMs: 20, jitterMs: 20 } };
const idsLibrary = { nodeTimeoutMs: 500 };
/**
 * Longer than the scripted steps around it take on a loaded machine: the
 * stranger's value lapsing, the member change, the taker's first contact
 * and its ask. 5 s was not (a CI run with both cores kept busy took longer
 * and M2's premise broke). The hold is released at the row's end, and the
 * quarantine of a node joining (the clients' longest maxTtlMs, 5 min)
 * still outlasts it.
 */
const holdTtlMs = 20_000;
/**
 * How long the other list asks for a held lock: well inside the hold. With
 * only its retries to bound it (40, paced 20 ms, 500 ms per node), a loaded
 * machine stretched the ask past the hold, and it won the expired lock.
 */
const askMs = 1_000;

const urlsOf = (ctx: RowContext, ...nodes: number[]) => nodes.map((i) => ctx.urls[i]!);

/** `count` lock clients named `<prefix>-<i>` on `urls`, looping on r1 and r2 until stopped. */
function lockClients(
  ctx: RowContext,
  prefix: string,
  count: number,
  urls: string[],
): Promise<Workload[]> {
  return Promise.all(
    Array.from({ length: count }, (_, i) =>
      ctx.spawn("lock", `${prefix}-${i}`, {
        urls,
        durationMs: long,
        resources: ["r1", "r2"],
        library,
      }),
    ),
  );
}

/** Records the membership {0,1,2} as `redquorum init` and `id init` do (every node answers). */
async function recordMembers(ctx: RowContext, ids: boolean): Promise<void> {
  const urls = urlsOf(ctx, 0, 1, 2);
  // Setup, not what a row tests: the inits get the longest node bound (a
  // run of the whole suite on a loaded machine saw NextId.init miss its
  // 200 ms on one node, and the negative control M2-no-quarantine failed
  // before it had asked anything).
  const setup = { onWarning: () => {}, checkTimeoutMs: 5_000, nodeTimeoutMs: 1_000 };
  const redlock = new Redlock(urls, setup);
  try {
    await redlock.init();
  } finally {
    await redlock.close();
  }
  if (!ids) return;
  const counter = new NextId(urls, setup);
  try {
    await counter.init();
  } finally {
    await counter.close();
  }
}

/** A change of members from the runner, as `redquorum members` makes it. */
async function change(
  ctx: RowContext,
  from: readonly number[],
  step: { add?: number; remove?: number },
  joinQuarantine = true,
): Promise<void> {
  const done = ctx.faultStart(
    "member change",
    `${step.remove ?? "-"} → ${step.add ?? "-"}`,
    joinQuarantine ? undefined : "joined without the quarantine",
  );
  const nodes = createNodes([
    ...urlsOf(ctx, ...from),
    ...(step.add === undefined ? [] : [ctx.urls[step.add]!]),
  ]);
  try {
    await applyMemberChange(
      nodes.slice(0, from.length),
      {
        ...(step.add === undefined ? {} : { add: nodes[from.length]! }),
        ...(step.remove === undefined ? {} : { removeIndex: from.indexOf(step.remove) }),
      },
      5_000,
      joinQuarantine,
    );
  } finally {
    await Promise.all(nodes.map((node) => node.close()));
    done();
  }
}

/**
 * `client` holds a lock on the nodes of its list but `away`: that node
 * holds a stranger's value while it asks (longer than a node timeout, so
 * its call there lands before it lapses), then it lapses. No pause,
 * nothing to undo. On a loaded machine the acquire can outlast the
 * stranger (its first attempts timing out) and win `away` too: that is
 * no hold without it, so the lock is released and taken again under a
 * fresh name (`<resource>-2`, …), three times at most. Returns the name
 * held.
 */
async function holdWithout(
  ctx: RowContext,
  client: Workload,
  resource: string,
  away: number,
): Promise<{ validUntilMs: number; resource: string }> {
  const tries = 3;
  const seen: string[] = [];
  for (let n = 1; n <= tries; n++) {
    const name = n === 1 ? resource : `${resource}-${n}`;
    await ctx.admin(away).set(name, "stranger", "PX", 1_500);
    const held = (await client.call("acquire", { resource: name, ttlMs: holdTtlMs })) as {
      validUntilMs: number;
    };
    let there: string | null = "stranger";
    await ctx.waitFor(async () => {
      there = await ctx.admin(away).get(name);
      return there !== "stranger";
    }, 5_000);
    if (there === null) return { ...held, resource: name };
    seen.push(
      `${name}: ${there === "stranger" ? "the stranger's value did not lapse" : "the lock won it too"}`,
    );
    await client.attempt("release", { resource: name });
  }
  ctx.expect(false, `no hold without node ${away} in ${tries} tries (${seen.join("; ")})`);
  throw new Error(`no hold without node ${away}`);
}

/**
 * A (list {0,1,2}) holds r on {0,2} only; B (list {0,1,3}) then asks for
 * it. Without the membership check, B wins on {1,3}: majorities of their
 * lists that share no node.
 */
async function twoLists(ctx: RowContext, membershipOff: boolean): Promise<void> {
  await recordMembers(ctx, false);
  const [a, b] = await Promise.all([
    ctx.spawn("lock", "A", { urls: urlsOf(ctx, 0, 1, 2), library }),
    ctx.spawn("lock", "B", { urls: urlsOf(ctx, 0, 1, 3), library, membershipOff }),
  ]);
  const held = await holdWithout(ctx, a, "r", 1);
  const got = await b.attempt("acquire", {
    resource: held.resource,
    ttlMs: holdTtlMs,
    acquireOptions: { waitMs: askMs },
  });
  ctx.expect(monotonicMs() < held.validUntilMs, "premise broke: A's lock ran out before B asked");
  if (!membershipOff) {
    ctx.expect(!got.ok, "B's list {0,1,3} won r while A held it");
    ctx.expect(
      got.ok || got.code === "ERR_MEMBERSHIP",
      `B was refused, but not for its list: ${got.ok ? "" : `${got.code} ${got.message}`}`,
    );
  } else {
    ctx.expect(got.ok, `the control: B did not take r (${got.ok ? "" : got.message})`);
  }
  await a.attempt("release", { resource: held.resource });
  if (got.ok) await b.attempt("release", { resource: held.resource });
}

/**
 * FAULTS.md M1 for IDs: X draws IDs over {0,1,2} with its link to node 0
 * cut (its rounds win on 1 and 2), then Y, over {0,1,3} with its link to
 * node 1 cut, asks for IDs: with the membership check, Y is refused (node 3
 * is no member) before any ID; without it (the negative control; node 3
 * given a counter of its own), Y wins on 0 and 3, neither of which saw X's
 * rounds, and hands out X's IDs again.
 */
async function twoIdLists(ctx: RowContext, membershipOff: boolean): Promise<void> {
  await recordMembers(ctx, true);
  if (membershipOff) {
    // A counter on node 3 as a client without the check would make it.
    membershipTesting.mode = "off";
    const lone = new NextId([ctx.urls[3]!], {
      onWarning: () => {},
      checkTimeoutMs: 5_000,
      nodeTimeoutMs: 1_000,
    });
    membershipTesting.mode = "enforce";
    try {
      await lone.init();
    } finally {
      await lone.close();
    }
  }
  const [px, py] = await Promise.all([ctx.proxies("X"), ctx.proxies("Y")]);
  const [x, y] = await Promise.all([
    ctx.spawn("ids", "X", {
      urls: [px[0]!.url, px[1]!.url, px[2]!.url],
      library: idsLibrary,
    }),
    ctx.spawn("ids", "Y", {
      urls: [py[0]!.url, py[1]!.url, py[3]!.url],
      library: idsLibrary,
      membershipOff,
    }),
  ]);
  px[0]!.blackhole();
  for (let n = 0; n < 5; n++) {
    const got = await x.attempt("next");
    ctx.expect(got.ok, `X's next() on {1,2}: ${got.ok ? "" : got.message}`);
  }
  py[1]!.blackhole();
  const got = await y.attempt("next");
  if (!membershipOff) {
    ctx.expect(
      !got.ok && got.code === "ERR_MEMBERSHIP",
      `Y's list {0,1,3}: expected ERR_MEMBERSHIP before any ID, got ${got.ok ? "an ID" : `${got.code} ${got.message}`}`,
    );
  } else {
    ctx.expect(got.ok, `the control: Y got no ID (${got.ok ? "" : got.message})`);
    for (let n = 0; n < 4; n++) await y.attempt("next");
  }
}

/** An ID client (2 callers, paced 10 ms) on `urls`, running until stopped. */
function idClient(ctx: RowContext, name: string, urls: string[]): Promise<Workload> {
  return ctx.spawn("ids", name, {
    urls,
    durationMs: long,
    callers: 2,
    pacingMs: 10,
    library: idsLibrary,
  });
}

/**
 * Node 2 is replaced by node 3 while 4 lock clients and an ID client run on
 * the old list; after the change 4 lock clients and an ID client start on
 * the new one, the old ones still running (refused from their next vote).
 * A scripted holder on the old list keeps a lock on {0,2} across the
 * change: the new list must not win it while it is held (node 3 joins in
 * quarantine); without the quarantine it does.
 */
async function replaceUnderLoad(ctx: RowContext, joinQuarantine: boolean): Promise<void> {
  await recordMembers(ctx, true);
  const oldList = urlsOf(ctx, 0, 1, 2);
  const newList = urlsOf(ctx, 0, 1, 3);
  const ids = (name: string, urls: string[]) => idClient(ctx, name, urls);
  // The taker makes no contact before its first command: it starts with the new list.
  const [holder, taker, oldLocks, oldIds] = await Promise.all([
    ctx.spawn("lock", "holder", { urls: oldList, library }),
    ctx.spawn("lock", "taker", { urls: newList, library }),
    lockClients(ctx, "old", 4, oldList),
    ids("ids-old", oldList),
  ]);
  await ctx.sleep(ctx.params.durationMs / 2);
  const held = await holdWithout(ctx, holder, "held", 1);
  await change(ctx, [0, 1, 2], { remove: 2, add: 3 }, joinQuarantine);
  // The taker's first contact (its checks of the new list's nodes) before
  // it asks: setup, not bounded by the ask (a loaded machine took over a
  // second for it, and the control then failed for no lock question at all).
  const warm = await taker.attempt("acquire", { resource: "taker-warm-up", ttlMs: 1_000 });
  if (warm.ok) await taker.attempt("release", { resource: "taker-warm-up" });
  const got = await taker.attempt("acquire", {
    resource: held.resource,
    ttlMs: holdTtlMs,
    acquireOptions: { waitMs: askMs },
  });
  ctx.expect(
    monotonicMs() < held.validUntilMs,
    "premise broke: the old list's lock ran out before the new list asked",
  );
  if (joinQuarantine) {
    ctx.expect(!got.ok, "the new list won the lock the old list held, across the replacement");
  } else {
    ctx.expect(got.ok, `the control: the new list did not take it (${got.ok ? "" : got.message})`);
  }
  const [newLocks, newIds] = await Promise.all([
    lockClients(ctx, "new", 4, newList),
    ids("ids-new", newList),
  ]);
  await ctx.sleep(ctx.params.durationMs);
  await stopped(ctx, [...oldLocks, ...newLocks, oldIds, newIds]);
  await holder.attempt("release", { resource: held.resource });
  if (got.ok) await taker.attempt("release", { resource: held.resource });
}

/**
 * A client left on a list whose nodes were all removed: members {0,1},
 * then {0,2} (the stale client starts here and reads that record), then
 * {3,2} and {3,1}, one replacement at a time, each removed node emptied
 * to be reused. The current list {3,1} holds r; the stale client, still
 * on {0,2}, asks for it until it is held no longer. Its nodes hold no
 * record: it must take neither back. Before that was closed (the control:
 * `takeBackEmptyLists`), each empty node confirmed the other, the client
 * took both back as a cluster of its own and, their quarantine over
 * (its maxTtlMs, 1 s), won r beside the current list. Without fencing:
 * the removed nodes' counters are not what this row is about.
 */
async function emptiedList(ctx: RowContext, takeBackEmptyLists: boolean): Promise<void> {
  /** The current list's hold, and its clients' maxTtlMs (the joined nodes' quarantine). */
  const holdMs = 5_000;
  const short = { ...library, maxTtlMs: 1_000, retry: { retries: 0 } };
  const setup = new Redlock(urlsOf(ctx, 0, 1), { ...short, onWarning: () => {} });
  try {
    await setup.init();
  } finally {
    await setup.close();
  }
  await change(ctx, [0, 1], { remove: 1, add: 2 });
  const stale = await ctx.spawn("lock", "stale", {
    urls: urlsOf(ctx, 0, 2),
    library: short,
    fencing: false,
    takeBackEmptyLists,
  });
  // Its first contact reads epoch 2 (node 2's quarantine may refuse the lock).
  const warm = await stale.attempt("acquire", { resource: "warm", ttlMs: 500 });
  if (warm.ok) await stale.attempt("release", { resource: "warm" });
  await ctx.admin(1).flushall();
  await change(ctx, [0, 2], { remove: 0, add: 3 });
  await change(ctx, [3, 2], { remove: 2, add: 1 });
  await ctx.admin(0).flushall();
  await ctx.admin(2).flushall();
  // The stale client goes on calling, as a service would: in the control
  // its take-back and the quarantine that follows (1 s) are over before
  // the current list holds r.
  for (const until = monotonicMs() + 2_000; monotonicMs() < until; ) {
    const got = await stale.attempt("acquire", { resource: "other", ttlMs: 500 });
    if (got.ok) await stale.attempt("release", { resource: "other" });
    await ctx.sleep(100);
  }
  const current = await ctx.spawn("lock", "current", {
    urls: urlsOf(ctx, 3, 1),
    library: { ...short, maxTtlMs: holdMs },
    fencing: false,
  });
  // Granted once the joined nodes' quarantines are over (setup, not the question).
  let held: { validUntilMs: number } | undefined;
  await ctx.waitFor(async () => {
    const got = await current.attempt("acquire", { resource: "r", ttlMs: holdMs });
    if (got.ok) held = got.result as { validUntilMs: number };
    return got.ok;
  }, 30_000);
  if (!held) {
    ctx.expect(false, "premise broke: the current list never got r");
    return;
  }
  // Asked until a second before the hold ends.
  let last = "";
  let won = false;
  while (!won && monotonicMs() < held.validUntilMs - 1_000) {
    const got = await stale.attempt("acquire", { resource: "r", ttlMs: 1_000 });
    won = got.ok;
    last = got.ok ? "granted" : got.message;
    if (!won) await ctx.sleep(100);
  }
  if (!takeBackEmptyLists) {
    ctx.expect(
      !won,
      "the stale list, its nodes removed and emptied, won r while the current list held it",
    );
    ctx.expect(
      won || /so did every other node of the list/.test(last),
      `the stale client was refused, but not for its emptied list: ${last}`,
    );
  } else {
    ctx.expect(won, `the control: the stale list did not take r (${last})`);
  }
  await current.attempt("release", { resource: "r" });
  if (won) await stale.attempt("release", { resource: "r" });
}

export const membershipRows: Row[] = [
  {
    id: "M1",
    title:
      "two node lists side by side ({0,1,2} and {0,1,3}): the second is refused before any grant",
    expected: "refused",
    setup: { nodeCount: 4 },
    checks: { MX: "clean", HY: "clean" },
    run: (ctx) => twoLists(ctx, false),
  },
  {
    id: "M1-no-check",
    title:
      "two node lists side by side with the membership check off: both win r (negative control)",
    expected: "documented-unsafe",
    setup: { nodeCount: 4 },
    checks: { MX: "flagged" },
    run: (ctx) => twoLists(ctx, true),
  },
  {
    id: "M1-ids",
    title:
      "two node lists side by side for IDs ({0,1,2} and {0,1,3}, each client cut from one shared node): the second is refused before any ID",
    expected: "refused",
    setup: { nodeCount: 4, persistence: "aof-always" },
    checks: { ID: "clean", HY: "clean" },
    run: (ctx) => twoIdLists(ctx, false),
  },
  {
    id: "M1-ids-no-check",
    title:
      "as M1-ids with the membership check off: the second list hands out the first's IDs again (negative control)",
    expected: "documented-unsafe",
    setup: { nodeCount: 4, persistence: "aof-always" },
    checks: { ID: "flagged" },
    run: (ctx) => twoIdLists(ctx, true),
  },
  {
    id: "M2",
    title:
      "node 2 replaced by node 3 under load (4+4 lock clients, 2 ID clients, old and new lists mixed)",
    expected: "safe",
    setup: { nodeCount: 4, persistence: "aof-always" },
    checks: { MX: "clean", ID: "clean", HY: "clean" },
    run: (ctx) => replaceUnderLoad(ctx, true),
    verify(events, ctx) {
      const newIdsOk = calls(events, "ids", "ids-new").filter(ok).length;
      ctx.expect(newIdsOk > 0, "the new list's ID client got no ID after the replacement");
      const oldRefused = calls(events, undefined, "ids-old").some(
        (call) => call.done?.error?.code === "ERR_MEMBERSHIP",
      );
      ctx.expect(oldRefused, "the old list's ID client was never told its list changed");
    },
  },
  {
    id: "M2-no-quarantine",
    title:
      "node replaced as M2, the new node joining without the quarantine: the held lock is taken (negative control)",
    expected: "documented-unsafe",
    setup: { nodeCount: 4, persistence: "aof-always" },
    checks: { MX: "flagged", ID: "clean" },
    run: (ctx) => replaceUnderLoad(ctx, false),
  },
  {
    id: "M3",
    title:
      "node 3 added, then node 0 removed, with lock clients and an ID client on each list in turn",
    expected: "safe",
    setup: { nodeCount: 4, persistence: "aof-always" },
    checks: { MX: "clean", ID: "clean", HY: "clean" },
    async run(ctx) {
      await recordMembers(ctx, true);
      const lists = [urlsOf(ctx, 0, 1, 2), urlsOf(ctx, 0, 1, 2, 3), urlsOf(ctx, 1, 2, 3)];
      const started = (name: string, urls: string[]) =>
        Promise.all([lockClients(ctx, name, 4, urls), idClient(ctx, `${name}-ids`, urls)]);
      const [first, firstIds] = await started("first", lists[0]!);
      await ctx.sleep(ctx.params.durationMs / 2);
      await change(ctx, [0, 1, 2], { add: 3 });
      const [second, secondIds] = await started("second", lists[1]!);
      await ctx.sleep(ctx.params.durationMs / 2);
      await change(ctx, [0, 1, 2, 3], { remove: 0 });
      const [third, thirdIds] = await started("third", lists[2]!);
      await ctx.sleep(ctx.params.durationMs / 2);
      await stopped(ctx, [...first, ...second, ...third, firstIds, secondIds, thirdIds]);
    },
    verify(events, ctx) {
      // Each list served while it was the members' (liveness across the changes).
      for (const list of ["first", "second", "third"]) {
        const granted = calls(events, "acquire").some(
          (call) => call.invoke.process.startsWith(`${list}-`) && ok(call),
        );
        ctx.expect(granted, `no lock granted to the ${list} list's clients`);
        const drawn = calls(events, "ids").some(
          (call) => call.invoke.process.startsWith(`${list}-ids`) && ok(call),
        );
        ctx.expect(drawn, `no ID handed out to the ${list} list's ID client`);
      }
      const refused = calls(events, "acquire").some(
        (call) =>
          call.invoke.process.startsWith("first-") && call.done?.error?.code === "ERR_MEMBERSHIP",
      );
      ctx.expect(refused, "the first list's clients were never told their list changed");
    },
  },
  {
    id: "M4",
    title:
      "a client left on a list whose nodes were all replaced ({0,2} → {3,1}) and emptied: it takes none back",
    expected: "refused",
    setup: { nodeCount: 4 },
    checks: { MX: "clean", HY: "clean" },
    run: (ctx) => emptiedList(ctx, false),
  },
  {
    id: "M4-empty-lists-taken-back",
    title:
      "as M4, with empty lists taken back as before: the stale list wins r beside the current one (negative control)",
    expected: "documented-unsafe",
    setup: { nodeCount: 4 },
    checks: { MX: "flagged" },
    run: (ctx) => emptiedList(ctx, true),
  },
];
