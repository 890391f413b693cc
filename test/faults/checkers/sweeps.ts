/**
 * The two core sweeps, over plain intervals: overlapping holds (MX) and ID
 * order (ID). The history checkers (mutual-exclusion.ts, ids.ts) extract
 * holds and calls from a recorded history and call these; the integration
 * tests call them directly (through test/helpers/checkers.ts). Each is an
 * O(n log n) sweep returning the violations found (empty means safe).
 */

/** One critical section: from acquire's return to the call of release, on the monotonic clock. */
export interface Hold {
  readonly client: string;
  readonly startMs: number;
  readonly endMs: number;
}

export interface Overlap<H extends Hold = Hold> {
  readonly first: H;
  readonly second: H;
}

/** MX: no two holds of one resource overlap in time. */
export function findOverlaps<H extends Hold>(holds: readonly H[]): Overlap<H>[] {
  const sorted = [...holds].sort((a, b) => a.startMs - b.startMs || a.endMs - b.endMs);
  const overlaps: Overlap<H>[] = [];
  // The hold that ends last among those seen so far: any later hold starting
  // before it ends overlaps it.
  let latest: H | undefined;
  for (const hold of sorted) {
    if (hold.endMs < hold.startMs) {
      throw new Error(`malformed hold of ${hold.client}: ends before it starts`);
    }
    if (latest && hold.startMs < latest.endMs) overlaps.push({ first: latest, second: hold });
    if (!latest || hold.endMs > latest.endMs) latest = hold;
  }
  return overlaps;
}

/** One ID call: when it was made, when it returned (monotonic ms), and the IDs it returned. */
export interface IdCall {
  readonly client: string;
  readonly startMs: number;
  readonly endMs: number;
  readonly ids: readonly bigint[];
}

export interface IdViolation {
  readonly kind: "duplicate" | "order" | "batch-order";
  readonly message: string;
}

/**
 * ID: no ID returned twice; the IDs of one call strictly increase; and if
 * call A returned before call B was made, every ID of B is above every ID
 * of A (real-time order).
 */
export function findIdViolations(calls: readonly IdCall[]): IdViolation[] {
  const violations: IdViolation[] = [];
  const all: Array<{ id: bigint; call: IdCall }> = [];
  for (const call of calls) {
    for (let i = 0; i < call.ids.length; i++) {
      all.push({ id: call.ids[i]!, call });
      if (i > 0 && call.ids[i]! <= call.ids[i - 1]!) {
        violations.push({
          kind: "batch-order",
          message: `${call.client}: IDs of one call not increasing (${call.ids[i - 1]} then ${call.ids[i]})`,
        });
      }
    }
  }
  all.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  for (let i = 1; i < all.length; i++) {
    if (all[i]!.id === all[i - 1]!.id) {
      violations.push({
        kind: "duplicate",
        message: `ID ${all[i]!.id} returned to ${all[i - 1]!.call.client} and ${all[i]!.call.client}`,
      });
    }
  }
  // Sweep calls by start time; `highest` is the largest ID of any call that
  // returned before the current call was made.
  const byEnd = calls.filter((c) => c.ids.length > 0).sort((a, b) => a.endMs - b.endMs);
  const byStart = calls.filter((c) => c.ids.length > 0).sort((a, b) => a.startMs - b.startMs);
  let ended = 0;
  let highest: { id: bigint; call: IdCall } | undefined;
  for (const call of byStart) {
    while (ended < byEnd.length && byEnd[ended]!.endMs < call.startMs) {
      const done = byEnd[ended]!;
      // biome-ignore lint/complexity/useMathMinMax: bigint, which Math.max cannot take
      const top = done.ids.reduce((a, b) => (a > b ? a : b));
      if (!highest || top > highest.id) highest = { id: top, call: done };
      ended++;
    }
    // biome-ignore lint/complexity/useMathMinMax: bigint, which Math.min cannot take
    const lowest = call.ids.reduce((a, b) => (a < b ? a : b));
    if (highest && lowest <= highest.id) {
      violations.push({
        kind: "order",
        message:
          `${call.client} got ${lowest} after ${highest.call.client} had returned ${highest.id} ` +
          `(ended ${highest.call.endMs.toFixed(3)} ms, this call started ${call.startMs.toFixed(3)} ms)`,
      });
    }
  }
  return violations;
}
