/**
 * CLOCK_MONOTONIC in ms, as `redquorum lock` and its guard process both
 * read it (`process.hrtime`: one clock for every process of the machine,
 * unlike `performance.now()`, whose origin is each process's start). Its
 * own module so that the guard's bundle takes nothing else of the CLI.
 */
export const monotonicNowMs = (): number => Number(process.hrtime.bigint() / 1_000_000n);
