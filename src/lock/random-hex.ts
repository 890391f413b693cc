import type { RandomSource } from "../clock.js";

/**
 * `byteCount` random bytes as hex: a lock's value, an instance's id. Apart
 * from attempt.ts so that the lock context, which names its instance with
 * it, does not import the attempt (which imports the context's type).
 */
export function randomHex(random: RandomSource, byteCount: number): string {
  const bytes = random.bytes(byteCount);
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex");
}
