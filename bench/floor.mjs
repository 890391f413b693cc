// The floor every lock benchmark compares against: the least any correct
// Redlock does — one SET NX PX round and one compare-and-delete round over
// the given ioredis clients, a majority each, nothing else (no validity, no
// fencing, no quarantine). Shared by locks.mjs, contention-worker.mjs,
// cycle-cost.mjs and ab/ab.mjs, so every table's floor is the same code.
import { randomBytes } from "node:crypto";

const compareAndDelete =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

/**
 * Whether a majority of `calls` (one per node) answered yes by `isYes`
 * (a failed call is a no); resolves as soon as that is decided.
 */
export function majorityOf(calls, isYes) {
  const quorum = Math.floor(calls.length / 2) + 1;
  return new Promise((resolve) => {
    let yes = 0;
    let no = 0;
    for (const call of calls) {
      call
        .then(
          (reply) => (isYes(reply) ? ++yes : ++no),
          () => ++no,
        )
        .then(() => {
          // At least: answers already in may count several at once.
          if (yes >= quorum) resolve(true);
          else if (no >= calls.length - quorum + 1) resolve(false);
        });
    }
  });
}

/**
 * One acquire round of a queue floor (queue-floor.mjs, handover-floor.mjs):
 * `call(client, i)` on every node, 1 meaning granted. A majority wins; each
 * node that did not grant then gets `leave(i)` once every node answered
 * (still queued there, the waiter would be handed a key it no longer waits
 * for). Otherwise `undo(client, i)` runs, awaited, on every node that
 * granted or may have (an undo also queues the waiter there). Resolves
 * whether it won.
 */
export async function queuedRound(clients, call, leave, undo) {
  const replies = clients.map(call);
  const settled = Promise.allSettled(replies);
  const granted = (outcome) => outcome.status === "fulfilled" && outcome.value === 1;
  if (await majorityOf(replies, (reply) => reply === 1)) {
    void settled.then((outcomes) => {
      outcomes.forEach((outcome, i) => {
        if (!granted(outcome)) leave(i);
      });
    });
    return true;
  }
  const outcomes = await settled;
  await Promise.all(
    clients.map((client, i) =>
      outcomes[i].status !== "fulfilled" || outcomes[i].value === 1
        ? undo(client, i).catch(() => {})
        : undefined,
    ),
  );
  return false;
}

/**
 * A contender's turn by notice, for the fair and queue floors: it listens on
 * `channel` (on `subscriber`, its own ioredis client); `turn()` resolves
 * when a notice came since the last `forget()`, or after `pollMs()` (so
 * nothing waits for ever on a lost notice). `subscribed` resolves once it
 * listens.
 */
export function noticeOrPoll(subscriber, channel, pollMs) {
  let told = false;
  let wake = () => {};
  subscriber.on("message", () => {
    told = true;
    wake();
  });
  return {
    subscribed: subscriber.subscribe(channel),
    forget: () => {
      told = false;
    },
    turn: () =>
      new Promise((resolve) => {
        if (told) return resolve();
        const timer = setTimeout(resolve, pollMs());
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      }),
  };
}

/**
 * `acquireRound(resource)`: one SET NX PX round; the lock `{ resource, value }`
 * when a majority set it, else undefined (undone on every node first).
 * `release(lock)`: one compare-and-delete round; true when a majority answered.
 */
export function bareRounds(clients, ttlMs) {
  for (const client of clients) {
    client.defineCommand("compareAndDelete", { numberOfKeys: 1, lua: compareAndDelete });
  }
  const majority = (calls, isYes) => majorityOf(calls, isYes);
  const release = ({ resource, value }) =>
    majority(
      clients.map((c) => c.compareAndDelete(resource, value)),
      () => true,
    );
  return {
    acquireRound: async (resource) => {
      const value = randomBytes(20).toString("hex");
      const won = await majority(
        clients.map((c) => c.set(resource, value, "PX", ttlMs, "NX")),
        (reply) => reply === "OK",
      );
      if (won) return { resource, value };
      await release({ resource, value });
      return undefined;
    },
    release,
  };
}
