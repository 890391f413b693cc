// The A/B cells (ab.mjs runs one build per process, interleaved.mjs two
// builds in one process): each measures one redquorum workload given the
// build's module (`lib`: its dist/index.js) and a cluster's URLs.
//   L1 / L64: uncontended acquire → release, 1 or 64 workers, each on its own key
//   LC: 64 workers of one instance on one key, retry 10 ± 5 ms
//   I1 / I64: NextId (range strategy), 1 or 64 callers of one instance
import { lockCycles, measureCell, percentile } from "../report.mjs";

const ttlMs = 10_000;

/** The lock cells: workers and whether they share one key. */
export const lockCells = {
  L1: { workers: 1, contended: false },
  L64: { workers: 64, contended: false },
  LC: { workers: 64, contended: true, pacing: { delayMs: 10, jitterMs: 5 } },
};

/** The ID cells: callers of one NextId instance (a cluster with appendfsync always). */
export const idCells = { I1: 1, I64: 64 };

export function redquorumContender(lib, urls, pacing) {
  const redlock = new lib.Redlock(urls, {
    retry: pacing ? { retries: 10_000, ...pacing } : { retries: 0 },
  });
  return {
    acquire: (resource) => redlock.acquire([resource], ttlMs),
    release: (lock) => lock.release(),
    close: () => redlock.close(),
  };
}

/**
 * Acquire → release in a loop for `cellMs` by `workers` workers, on one key
 * (`contended`) or one each; `label` keeps the keys apart from other cells.
 */
export async function lockCell(contender, label, workers, contended, cellMs) {
  for (let i = 0; i < 20; i++) await contender.release(await contender.acquire(`warm:${label}`));
  const { perSecond, acquireMs, releaseMs, errors } = await lockCycles(contender, {
    workers,
    cellMs,
    resourceOf: (worker) => (contended ? `bench:${label}` : `bench:${label}:${worker}`),
    acquireBoundMs: contended ? 30_000 : 2_000,
  });
  await contender.close();
  return {
    perSecond,
    p50Ms: percentile(acquireMs, 50),
    p99Ms: percentile(acquireMs, 99),
    relP50Ms: percentile(releaseMs, 50),
    relP99Ms: percentile(releaseMs, 99),
    errors,
  };
}

/** `callers` concurrent next() calls on one NextId instance for `cellMs` (`key`: its counter, if not the default). */
export async function idCell(lib, urls, callers, cellMs, key) {
  const ids = new lib.NextId(urls, { strategy: "range", ...(key && { key }) });
  try {
    await ids.next();
    return await measureCell(callers, cellMs, () => ids.next());
  } finally {
    await ids.close();
  }
}
