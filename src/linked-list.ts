/**
 * An insertion-ordered list with O(1) append, removal by entry and first
 * value, for collections on hot paths that gain and lose an element per
 * request, call or waiter (open responses, promises under way, one key's
 * waiters). With 100,000 waiters leaving in turn, an array's indexOf and
 * splice were quadratic.
 *
 * Why not a Map or a Set: V8 rebuilds a Map's table as entries come and
 * go, and each old table keeps a link to the next one. Once a table of a
 * long-lived Map has been promoted, that chain reaches every later table
 * and, through them, the young entries: each survives two young-generation
 * collections, is promoted, and waits for a full one. In `redquorum serve`
 * at 12,000 requests a second that was about 10 % of the server's time
 * (bench/results/id-server.md, "The garbage"). A removed entry here is
 * unlinked and its links cleared: nothing old points at it any more.
 */

/** A place in a `LinkedList`: the value, and the entries either side while it is in the list. */
export interface ListEntry<T> {
  readonly value: T;
  previous: ListEntry<T> | undefined;
  next: ListEntry<T> | undefined;
  /** False once removed. */
  linked: boolean;
}

export class LinkedList<T> {
  private oldest: ListEntry<T> | undefined;
  private newest: ListEntry<T> | undefined;
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** The oldest value, or undefined when empty. */
  first(): T | undefined {
    return this.oldest?.value;
  }

  /** Adds `value` at the end; the entry returned removes it (`remove`). */
  push(value: T): ListEntry<T> {
    const entry: ListEntry<T> = { value, previous: this.newest, next: undefined, linked: true };
    if (this.newest) this.newest.next = entry;
    else this.oldest = entry;
    this.newest = entry;
    this.count++;
    return entry;
  }

  /** Takes `entry` out; false if it was out already. */
  remove(entry: ListEntry<T>): boolean {
    if (!entry.linked) return false;
    if (entry.previous) entry.previous.next = entry.next;
    else this.oldest = entry.next;
    if (entry.next) entry.next.previous = entry.previous;
    else this.newest = entry.previous;
    entry.previous = undefined;
    entry.next = undefined;
    entry.linked = false;
    this.count--;
    return true;
  }

  /** The values, oldest first, as they are now (removing or adding meanwhile changes nothing here). */
  values(): T[] {
    const found: T[] = [];
    for (let e = this.oldest; e; e = e.next) found.push(e.value);
    return found;
  }

  /** The entries whose value `matches` (all without it), oldest first, as they are now. */
  entries(matches?: (value: T) => boolean): ListEntry<T>[] {
    const found: ListEntry<T>[] = [];
    for (let e = this.oldest; e; e = e.next) if (!matches || matches(e.value)) found.push(e);
    return found;
  }

  /** The newest entry whose value `matches`, or undefined. */
  findLast(matches: (value: T) => boolean): ListEntry<T> | undefined {
    for (let e = this.newest; e; e = e.previous) if (matches(e.value)) return e;
    return undefined;
  }
}
