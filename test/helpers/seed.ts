/**
 * Seeded randomness for property and concurrency tests. The seed comes from
 * REDQUORUM_SEED or is drawn, and `describeSeed` goes into every failure
 * message so a failing run can be repeated.
 */
export function testSeed(): number {
  const fromEnv = process.env.REDQUORUM_SEED;
  return fromEnv ? Number(fromEnv) : Math.floor(Math.random() * 2 ** 31);
}

export function describeSeed(seed: number): string {
  return `seed ${seed} (rerun with REDQUORUM_SEED=${seed})`;
}

/** mulberry32: small, fast, good enough to drive test schedules. */
export function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
