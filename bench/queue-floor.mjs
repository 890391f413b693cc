// The least a fair lock with a queue on every node does, for the
// contention benchmark (contention-worker.mjs, "queue floor"). The fair
// floor's ring has a fixed membership that every contender knows from the
// start; a lock for processes that come and go cannot have one, so its
// waiters must join a queue on the nodes and leave it when granted. This
// is that queue and nothing else: no validity, no fencing, no restart
// quarantine or membership checks, no expiry of crashed waiters, no
// multi-resource locks, no turn kept within a process.
//
// - acquire, on every node: free and not reserved for another waiter ->
//   SET NX (the grant), the reservation ends and the waiter leaves the
//   queue; else it joins the queue (ZADD, one ticket on every node: the
//   acquire's start on the machine's clock, ties by waiter id). A majority
//   wins (and leaves the queues of the nodes that refused it: a plain
//   ZREM); otherwise the nodes that granted undo it (compare-and-delete,
//   and the waiter joins their queue too).
// - release, on every node: compare-and-delete, then the key is reserved
//   for the queue's head (SET PX); the releaser tells the first head a
//   node names on its own channel (one PUBLISH), as the fair floor tells
//   its next contender.
// - a waiter tries again when told, or after its paced delay times the
//   number of contenders (so nothing waits for ever on a lost notice).
import { randomBytes } from "node:crypto";
import { majorityOf, noticeOrPoll, queuedRound } from "./floor.mjs";

const acquireLua = `local heir = redis.call('get', KEYS[3])
if (not heir or heir == ARGV[3]) and redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if heir then redis.call('del', KEYS[3]) end
  if ARGV[5] == '1' then redis.call('zrem', KEYS[2], ARGV[3]) end
  return 1
end
redis.call('zadd', KEYS[2], ARGV[4], ARGV[3])
return 0`;

// ARGV: value, reservation ms, [waiter, ticket: join the queue (an undo)].
// Returns the head the key is reserved for, or "".
const releaseLua = `if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) end
if ARGV[3] then redis.call('zadd', KEYS[2], ARGV[4], ARGV[3]) end
local head = redis.call('zrange', KEYS[2], 0, 0)[1]
if not head then return '' end
redis.call('set', KEYS[3], head, 'PX', ARGV[2])
return head`;

/**
 * One contender: `clients` (one ioredis client per node), `subscriber` (an
 * ioredis client of its own on the first node), `waiterId` unique among
 * the contenders, `paced()` the benchmark's retry delay.
 */
export function queueFloor({ clients, subscriber, waiterId, ttlMs, reserveMs, paced, contenders }) {
  for (const client of clients) {
    client.defineCommand("queueFloorAcquire", { numberOfKeys: 3, lua: acquireLua });
    client.defineCommand("queueFloorRelease", { numberOfKeys: 3, lua: releaseLua });
  }
  const keysOf = (resource) => [resource, `${resource}:queue`, `${resource}:heir`];
  const { subscribed, forget, turn } = noticeOrPoll(
    subscriber,
    `queue-floor:${waiterId}`,
    () => paced() * contenders,
  );
  // A release tells the head the first node names, once (as the fair floor
  // tells its next contender): a node that has not heard of the waiters
  // yet names none, so it is not one fixed node.
  const release = ({ resource, value }) => {
    let notified = false;
    const replies = clients.map((client) =>
      client.queueFloorRelease(...keysOf(resource), value, reserveMs).then((head) => {
        if (head && !notified) {
          notified = true;
          clients[0].publish(`queue-floor:${head}`, "1").catch(() => {});
        }
        return head;
      }),
    );
    return majorityOf(replies, () => true);
  };
  return {
    acquire: async (resource) => {
      await subscribed;
      const ticket = String(Date.now());
      const queued = clients.map(() => false);
      for (;;) {
        forget();
        const value = randomBytes(20).toString("hex");
        const won = await queuedRound(
          clients,
          (client, i) =>
            client.queueFloorAcquire(
              ...keysOf(resource),
              value,
              ttlMs,
              waiterId,
              ticket,
              queued[i] ? "1" : "0",
            ),
          (i) => {
            if (queued[i]) clients[i].zrem(keysOf(resource)[1], waiterId).catch(() => {});
          },
          // The undo joins the queue there too.
          (client) =>
            client.queueFloorRelease(...keysOf(resource), value, reserveMs, waiterId, ticket),
        );
        if (won) return { resource, value };
        queued.fill(true);
        await turn();
      }
    },
    release,
  };
}
