/**
 * Items in arrival order (one key's waiters, wait-queue.ts): appends,
 * removal from anywhere and the first item in O(1) (amortized). An array's indexOf and splice made
 * 100,000 waiters leaving in turn quadratic (seconds of one event-loop
 * turn); a Set was no better from the front, where its iteration steps
 * over every deleted entry. Removed slots are left empty, the head skips
 * them, and the array drops its empty front when that is half of it.
 */
export class ArrivalQueue<T> {
  private slots: Array<T | undefined> = [];
  /** Index of the first item in `slots` (or its length when empty). */
  private head = 0;
  /** Sequence number of `slots[0]`: an item's slot is its number minus this. */
  private base = 0;
  private readonly numbers = new Map<T, number>();

  get size(): number {
    return this.numbers.size;
  }

  add(item: T): void {
    this.numbers.set(item, this.base + this.slots.length);
    this.slots.push(item);
  }

  delete(item: T): boolean {
    const number = this.numbers.get(item);
    if (number === undefined) return false;
    this.numbers.delete(item);
    this.slots[number - this.base] = undefined;
    while (this.head < this.slots.length && this.slots[this.head] === undefined) this.head++;
    if (this.head >= 64 && this.head * 2 >= this.slots.length) {
      this.slots = this.slots.slice(this.head);
      this.base += this.head;
      this.head = 0;
    }
    return true;
  }

  first(): T | undefined {
    return this.slots[this.head];
  }

  *[Symbol.iterator](): IterableIterator<T> {
    for (let i = this.head; i < this.slots.length; i++) {
      const item = this.slots[i];
      if (item !== undefined) yield item;
    }
  }
}
