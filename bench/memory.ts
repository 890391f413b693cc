// What locks leave in a node's memory: used_memory (INFO memory) on one of
// 3 local nodes before and after 10,000 distinct resources are locked and
// released one at a time (each leaves its fencing counter, which has no
// TTL), then while 1,000 more locks are held. The numbers behind the
// operations guide's "Sizing".
//
//   node --import tsx bench/memory.ts
import { Redis } from "ioredis";
import { LocalCluster, Redlock } from "../src/index.js";

const released = 10_000;
const heldCount = 1_000;
const cluster = await LocalCluster.start({ nodeCount: 3, persistence: "none" });
const redlock = new Redlock(cluster.urls);
const probe = new Redis(cluster.urls[0]!);
try {
  const usedBytes = async () =>
    Number((await probe.info("memory")).match(/used_memory:(\d+)/)?.[1] ?? Number.NaN);
  await redlock.acquire(["warm"], 1_000).then((lock) => lock.release());
  const before = await usedBytes();
  for (let i = 0; i < released; i++) {
    await (await redlock.acquire([`order:${1_000_000 + i}`], 10_000)).release();
  }
  const afterReleased = await usedBytes();
  const held = [];
  for (let i = 0; i < heldCount; i++) {
    held.push(await redlock.acquire([`held:${1_000_000 + i}`], 60_000));
  }
  const afterHeld = await usedBytes();
  const perResource = (afterReleased - before) / released;
  console.log(`redis ${(await probe.info("server")).match(/redis_version:(\S+)/)?.[1]}`);
  console.log(`per resource locked once and released (13-byte names): ${perResource.toFixed(0)} B`);
  console.log(
    `per lock held, beyond that: ${((afterHeld - afterReleased) / heldCount - perResource).toFixed(0)} B`,
  );
  for (const lock of held) await lock.release();
} finally {
  probe.disconnect();
  await redlock.close();
  await cluster.stop();
}
