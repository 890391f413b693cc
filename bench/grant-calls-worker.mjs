// One contender of bench/grant-calls.ts: acquire → release on one resource
// until the time is up, then sends its grant count to the parent.
import { Redlock } from "../dist/index.js";

const [urls, ms] = [process.argv[2].split(","), Number(process.argv[3])];
const redlock = new Redlock(urls, { retry: { retries: 10_000, delayMs: 10, jitterMs: 5 } });
const end = performance.now() + ms;
let grants = 0;
while (performance.now() < end) {
  const lock = await redlock.acquire(["grant-calls"], 10_000);
  grants++;
  await lock.release();
}
await redlock.close();
process.send(grants);
