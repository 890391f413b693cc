/**
 * History checkers for the safety properties, shared by the integration and
 * fault tests. Each is an O(n log n) sweep and returns the violations it
 * found (empty means the history is safe).
 */

/** One critical section: from acquire's return to the call of release, on the monotonic clock. */
export interface Hold {
  readonly client: string;
  readonly startMs: number;
  readonly endMs: number;
}

export interface Overlap {
  readonly first: Hold;
  readonly second: Hold;
}

/** MX: no two holds of one resource overlap in time. */
export function findOverlaps(holds: readonly Hold[]): Overlap[] {
  const sorted = [...holds].sort((a, b) => a.startMs - b.startMs || a.endMs - b.endMs);
  const overlaps: Overlap[] = [];
  // The hold that ends last among those seen so far: any later hold starting
  // before it ends overlaps it.
  let latest: Hold | undefined;
  for (const hold of sorted) {
    if (hold.endMs < hold.startMs) {
      throw new Error(`malformed hold of ${hold.client}: ends before it starts`);
    }
    if (latest && hold.startMs < latest.endMs) overlaps.push({ first: latest, second: hold });
    if (!latest || hold.endMs > latest.endMs) latest = hold;
  }
  return overlaps;
}
