/**
 * Test setup around a node that lost its memory: a client taking it back
 * as the member it was, and what another memory at its address may hold.
 */
import type { Redis } from "ioredis";
import { Redlock } from "../../src/index.js";
import { serverIdentityLua } from "../../src/node/server-identity.js";
import { sleep } from "./sleep.js";

/**
 * A client meets node `index` (which lost its memory) while the other
 * members answer, and takes it back as the member it was, as any call
 * would: a lock call (refused or not: its checks of the nodes are what
 * count), which touches no ID counter. A node is taken back only once
 * N - Q + 1 of the other members confirm the record (docs/membership.md),
 * so a test that takes members down after the loss has it met first.
 * `admin`: a plain connection to node `index`.
 */
export async function takeBack(
  urls: readonly string[],
  admin: Redis,
  index: number,
): Promise<void> {
  const client = new Redlock([...urls], {
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
    while (!(await admin.get("redquorum:node"))) {
      if (performance.now() > until) throw new Error(`node ${index} not taken back within 5 s`);
      await sleep(20);
    }
  } finally {
    await client.close();
  }
}

/**
 * What NextId leaves on a node, written on `node` as if by another memory
 * (another deployment's counter, or one from before the membership was
 * recorded): counter `key` at `value`, its marker "1" and the identity of
 * the memory it was kept on (this one). Trusted as it is, it votes with
 * its own value.
 */
export async function leaveIdCounter(node: Redis, key: string, value: string): Promise<void> {
  await node.eval(
    `redis.call('set', KEYS[1], ARGV[1])
redis.call('set', KEYS[2], '1')
redis.call('set', KEYS[3], ${serverIdentityLua})`,
    3,
    key,
    `${key}:marker`,
    `${key}:run`,
    value,
  );
}
