import type { Redis } from "ioredis";

/**
 * Every key of the client's database with its type, value and whether it
 * expires, for comparing two databases that ran the same calls a moment
 * apart: TTLs to the nearest 5 s, decimal times masked, and the queue
 * expiry zsets by member only (their scores are node times).
 */
export async function dumpKeys(client: Redis): Promise<string[]> {
  const out: string[] = [];
  for (const name of (await client.keys("*")).sort()) {
    const type = await client.type(name);
    let value: unknown;
    if (type === "string") value = await client.get(name);
    else if (type === "list") value = await client.lrange(name, 0, -1);
    else if (type === "zset") {
      const withScores = await client.zrange(name, 0, -1, "WITHSCORES");
      value = name.includes("queue-expiry")
        ? withScores.filter((_, i) => i % 2 === 0).sort()
        : withScores;
    }
    const pttl = await client.pttl(name);
    const expires = pttl > 0 ? Math.round(pttl / 5_000) * 5 : pttl;
    // Times: "<s>.<µs>" in markers, ms since the epoch (13 digits) in the
    // memory check's cache and a replaced memory's quarantine.
    const masked = JSON.stringify(value)
      .replace(/\d+\.\d+/g, "T")
      .replace(/\d{13,}/g, "T");
    out.push(`${name} ${type} ${masked} ${expires}`);
  }
  return out;
}
