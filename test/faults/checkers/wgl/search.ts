/**
 * Wing & Gong's linearizability search with Lowe's memoisation, as Knossos
 * and Porcupine run it: walk the history's call/return entries in time
 * order, try to linearize each pending call, backtrack when a return is
 * reached for an operation not yet linearized, and never revisit a
 * (linearized set, model state) pair. Exponential in the worst case, so the
 * caller bounds it; the cache makes typical small histories fast.
 *
 * An optional operation (Jepsen's `info`: indeterminate) never returns: it
 * may take effect at any point after its call, or never.
 */

export interface Model<S, I> {
  readonly init: S;
  /** The state after `input`, or undefined if `input` is not legal in `state`. */
  step(state: S, input: I): S | undefined;
  /** Equal states, equal keys: the memo's second half. */
  key(state: S): string;
}

export interface SearchOp<I> {
  readonly callMs: number;
  /** Ignored for optional operations (they never return). */
  readonly returnMs: number;
  readonly input: I;
  /** May never have taken effect (an `info` completion, or none). */
  readonly optional: boolean;
}

export type SearchOutcome =
  | { readonly kind: "ok" }
  /** `stuckAt`: the op whose return was reached unlinearized at the deepest point. */
  | { readonly kind: "violation"; readonly linearizedMax: number; readonly stuckAt: number }
  | { readonly kind: "unknown"; readonly reason: string };

const NIL = -1;

export function searchLinearization<S, I>(
  model: Model<S, I>,
  ops: readonly SearchOp<I>[],
  deadlineMs: number,
): SearchOutcome {
  const list = new EntryList(ops);
  const required = ops.filter((op) => !op.optional).length;
  const linearized = new Uint32Array(Math.ceil(ops.length / 32) + 1);
  const seen = new Set<string>();
  const stack: Array<{ entry: number; state: S }> = [];
  let state = model.init;
  let done = 0;
  let deepest = { count: -1, op: NIL };
  let entry = list.first();
  for (let steps = 0; done < required; steps++) {
    if ((steps & 1023) === 0 && performance.now() > deadlineMs) {
      return { kind: "unknown", reason: `time budget spent after ${steps} steps` };
    }
    if (entry === NIL || list.isReturn(entry)) {
      // The op returning here was not linearized before its return: undo the last choice.
      if (stack.length > deepest.count) deepest = { count: stack.length, op: list.opOf(entry) };
      const top = stack.pop();
      if (!top) return { kind: "violation", linearizedMax: deepest.count, stuckAt: deepest.op };
      const op = list.opOf(top.entry);
      state = top.state;
      flip(linearized, op);
      if (!ops[op]!.optional) done--;
      list.unlift(top.entry);
      entry = list.next(top.entry);
      continue;
    }
    const op = list.opOf(entry);
    const after = model.step(state, ops[op]!.input);
    if (after !== undefined) {
      flip(linearized, op);
      const key = `${linearized.join(",")}|${model.key(after)}`;
      if (!seen.has(key)) {
        seen.add(key);
        stack.push({ entry, state });
        state = after;
        if (!ops[op]!.optional) done++;
        list.lift(entry);
        entry = list.first();
        continue;
      }
      flip(linearized, op);
    }
    entry = list.next(entry);
  }
  return { kind: "ok" };
}

function flip(bits: Uint32Array, index: number): void {
  bits[index >>> 5]! ^= 1 << (index & 31);
}

/**
 * The call and return entries, sorted by time (calls first at equal times,
 * so operations that touch count as concurrent), in a doubly linked list
 * that can lift an operation out and put it back in O(1).
 */
class EntryList {
  private readonly next_: Int32Array;
  private readonly prev: Int32Array;
  private readonly head: number;

  constructor(ops: readonly SearchOp<unknown>[]) {
    const n = ops.length;
    // Entry 2i is op i's call, 2i + 1 its return; entry 2n is the head.
    const time = (e: number) => {
      const op = ops[e >>> 1]!;
      if ((e & 1) === 0) return op.callMs;
      return op.optional ? Number.POSITIVE_INFINITY : op.returnMs;
    };
    const order = Array.from({ length: 2 * n }, (_, e) => e).sort(
      (a, b) => time(a) - time(b) || (a & 1) - (b & 1) || a - b,
    );
    this.head = 2 * n;
    this.next_ = new Int32Array(2 * n + 1).fill(NIL);
    this.prev = new Int32Array(2 * n + 1).fill(NIL);
    let last = this.head;
    for (const e of order) {
      this.next_[last] = e;
      this.prev[e] = last;
      last = e;
    }
  }

  first(): number {
    return this.next_[this.head]!;
  }

  next(entry: number): number {
    return this.next_[entry]!;
  }

  isReturn(entry: number): boolean {
    return (entry & 1) === 1;
  }

  opOf(entry: number): number {
    return entry === NIL ? NIL : entry >>> 1;
  }

  /** Removes a call entry and its return. */
  lift(call: number): void {
    this.unlink(call);
    this.unlink(call + 1);
  }

  /** Puts back what `lift(call)` removed (in reverse order). */
  unlift(call: number): void {
    this.relink(call + 1);
    this.relink(call);
  }

  private unlink(e: number): void {
    const before = this.prev[e]!;
    const after = this.next_[e]!;
    this.next_[before] = after;
    if (after !== NIL) this.prev[after] = before;
  }

  private relink(e: number): void {
    const before = this.prev[e]!;
    const after = this.next_[e]!;
    this.next_[before] = e;
    if (after !== NIL) this.prev[after] = e;
  }
}
