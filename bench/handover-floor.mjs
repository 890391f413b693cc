// The least a fair lock with a queue on every node does when a release
// hands the lock over itself, for the contention benchmark
// (contention-worker.mjs, "handover floor"). The queue floor's release
// reserves the key for the head and wakes it, and the head then takes the
// key in a round of its own; here the release writes the head's own value
// into the key (the head registered it when it joined the queue), and the
// releaser tells the head it holds the lock once a majority of nodes named
// it: no round of the heir's own. What a handover without a wake-up round
// would cost. Like the queue floor, nothing else: no validity (a real lock
// would count the heir's from the last time it was told "still queued"), no
// fencing, no restart quarantine or membership checks, no expiry of crashed
// waiters, no multi-resource locks, no turn kept within a process.
//
// - acquire, on every node (one value for all attempts of one acquire):
//   the key holds our value (a release handed it to us) -> yes; free and
//   nobody else heads the queue -> SET NX (the grant), leave the queue;
//   else join the queue with our value (ZADD, one ticket on every node: the
//   acquire's start on the machine's clock, ties by waiter id; HSET of the
//   value). A majority wins (and leaves the queues of the nodes that
//   refused it); otherwise the nodes that granted undo it
//   (compare-and-delete, and the waiter joins their queue too).
// - release, on every node: compare-and-delete; if the key is then free
//   and someone waits, the head leaves the queue and the key is set to its
//   value (SET PX: the head holds it on this node). The releaser tells a
//   head that a majority named that it holds the lock ("granted"), or the
//   first head a node named that it should try ("try"), in one PUBLISH.
// - a waiter tries again when told "try", or after its paced delay times
//   the number of contenders (so nothing waits for ever on a lost notice).
import { randomBytes } from "node:crypto";
import { majorityOf, queuedRound } from "./floor.mjs";

// KEYS: key, queue, values. ARGV: value, ttl ms, waiter, ticket, "1" if queued here before.
const acquireLua = `local held = redis.call('get', KEYS[1])
if held == ARGV[1] then return 1 end
if not held then
  local head = redis.call('zrange', KEYS[2], 0, 0)[1]
  if (not head or head == ARGV[3]) and redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    if ARGV[5] == '1' then
      redis.call('zrem', KEYS[2], ARGV[3])
      redis.call('hdel', KEYS[3], ARGV[3])
    end
    return 1
  end
end
redis.call('zadd', KEYS[2], ARGV[4], ARGV[3])
redis.call('hset', KEYS[3], ARGV[3], ARGV[1])
return 0`;

// KEYS: key, queue, values. ARGV: value, ttl ms, the releaser's waiter id,
// [ticket: it joins the queue (an undo)]. A releaser still queued here (its
// grant's clean-up not in yet) leaves the queue, and is handed nothing.
// Returns the head the key was handed to, or "".
const releaseLua = `if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) end
if ARGV[4] then
  redis.call('zadd', KEYS[2], ARGV[4], ARGV[3])
  redis.call('hset', KEYS[3], ARGV[3], ARGV[1])
elseif redis.call('zrem', KEYS[2], ARGV[3]) == 1 then
  redis.call('hdel', KEYS[3], ARGV[3])
end
if redis.call('exists', KEYS[1]) == 1 then return '' end
local head = redis.call('zrange', KEYS[2], 0, 0)[1]
if not head then return '' end
local value = redis.call('hget', KEYS[3], head)
redis.call('zrem', KEYS[2], head)
redis.call('hdel', KEYS[3], head)
if not value then return '' end
redis.call('set', KEYS[1], value, 'PX', ARGV[2])
return head .. ' ' .. value`;

/**
 * One contender: `clients` (one ioredis client per node), `subscriber` (an
 * ioredis client of its own on the first node), `waiterId` unique among
 * the contenders, `paced()` the benchmark's retry delay.
 */
export function handoverFloor({ clients, subscriber, waiterId, ttlMs, paced, contenders }) {
  for (const client of clients) {
    client.defineCommand("handoverFloorAcquire", { numberOfKeys: 3, lua: acquireLua });
    client.defineCommand("handoverFloorRelease", { numberOfKeys: 3, lua: releaseLua });
  }
  const keysOf = (resource) => [resource, `${resource}:queue`, `${resource}:values`];
  const quorum = Math.floor(clients.length / 2) + 1;
  // Notices: "granted <value>" (a majority handed the key to us, under that
  // value: a notice of an earlier acquire's value is stale) or "try".
  let notice;
  let wake = () => {};
  subscriber.on("message", (_channel, message) => {
    // A "try" does not hide a grant.
    if (message !== "try" || !notice) notice = message;
    wake();
  });
  const subscribed = subscriber.subscribe(`handover-floor:${waiterId}`);
  const turn = () =>
    new Promise((resolve) => {
      if (notice) return resolve();
      const timer = setTimeout(resolve, paced() * contenders);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  const release = async ({ resource, value }) => {
    // "<head> <value>" each node handed the key to, counted.
    const named = new Map();
    let first;
    const replies = clients.map((client) =>
      client.handoverFloorRelease(...keysOf(resource), value, ttlMs, waiterId).then((handed) => {
        if (handed) {
          first ??= handed;
          named.set(handed, (named.get(handed) ?? 0) + 1);
        }
        return handed;
      }),
    );
    const answered = await majorityOf(replies, () => true);
    // Every node's answer: whether a majority handed the key to one head.
    await Promise.allSettled(replies);
    let granted;
    for (const [handed, count] of named) if (count >= quorum) granted = handed;
    const to = granted ?? first;
    if (to) {
      const [head, headValue] = to.split(" ");
      await clients[0]
        .publish(`handover-floor:${head}`, granted ? `granted ${headValue}` : "try")
        .catch(() => {});
    }
    return answered;
  };
  return {
    acquire: async (resource) => {
      await subscribed;
      const ticket = String(Date.now());
      const value = randomBytes(20).toString("hex");
      const queued = clients.map(() => false);
      notice = undefined;
      for (;;) {
        if (notice === `granted ${value}`) {
          notice = undefined;
          return { resource, value };
        }
        notice = undefined;
        const [, queue, values] = keysOf(resource);
        const won = await queuedRound(
          clients,
          (client, i) =>
            client.handoverFloorAcquire(
              ...keysOf(resource),
              value,
              ttlMs,
              waiterId,
              ticket,
              queued[i] ? "1" : "0",
            ),
          (i) => {
            clients[i].zrem(queue, waiterId).catch(() => {});
            clients[i].hdel(values, waiterId).catch(() => {});
          },
          // The undo joins the queue there too.
          (client) =>
            client.handoverFloorRelease(...keysOf(resource), value, ttlMs, waiterId, ticket),
        );
        if (won) {
          notice = undefined;
          return { resource, value };
        }
        queued.fill(true);
        await turn();
      }
    },
    release,
  };
}
