/** Waits `ms` milliseconds (test schedules only; the library takes its time from its Clock). */
export const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, ms));
