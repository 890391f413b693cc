/**
 * How much work the long harnesses do (acquisitions, grants, IDs, rounds of
 * faults): REDQUORUM_TEST_SCALE is "fast" (the default: `npm test`) or
 * "full" (`npm run test:full`). The fast scale keeps every property each
 * harness checks, on fewer operations; the runner (scripts/run-tests.mjs)
 * reruns at full scale only the files that import this module.
 */
export type TestScale = "fast" | "full";

function readScale(): TestScale {
  const value = process.env.REDQUORUM_TEST_SCALE;
  if (value === undefined || value === "" || value === "fast") return "fast";
  if (value === "full") return "full";
  throw new Error(
    `REDQUORUM_TEST_SCALE must be "fast" or "full" (or unset: fast), got ${JSON.stringify(value)}`,
  );
}

export const testScale: TestScale = readScale();

/** `fast` at the fast scale, `full` at the full one. */
export function byScale<T>(fast: T, full: T): T {
  return testScale === "full" ? full : fast;
}
