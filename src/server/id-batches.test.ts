import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { HttpError } from "./http-error.js";
import { IdBatches, type IdWaiter } from "./id-batches.js";
import type { IdSource } from "./id-source.js";

/**
 * An ID source that counts up in memory and records each call; a call
 * waits until `release()` (or its signal aborts, as NextId's does).
 */
class CountingSource implements IdSource {
  next = 1n;
  readonly calls: { count: number; signal: AbortSignal | undefined }[] = [];
  private readonly held: (() => void)[] = [];
  hold = false;

  nextBatch(count: number, options: { signal?: AbortSignal } = {}): Promise<bigint[]> {
    this.calls.push({ count, signal: options.signal });
    const give = () => Array.from({ length: count }, () => this.next++);
    if (!this.hold) return Promise.resolve(give());
    return new Promise((resolve, reject) => {
      options.signal?.addEventListener("abort", () => reject(options.signal?.reason), {
        once: true,
      });
      this.held.push(() => resolve(give()));
    });
  }

  release(): void {
    for (const give of this.held.splice(0)) give();
  }

  status() {
    return Promise.resolve([]);
  }
}

function waiter(count: number) {
  const outcome: { ids?: bigint[]; error?: unknown } = {};
  let done!: () => void;
  const settled = new Promise<void>((resolve) => {
    done = resolve;
  });
  const w: IdWaiter = {
    count,
    batch: undefined,
    waiting: false,
    served(ids) {
      outcome.ids = ids;
      done();
    },
    failed(error) {
      outcome.error = error;
      done();
    },
  };
  return { w, outcome, settled };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

/** 17 IDs left: a call for more fails whole, with NextId's code, and hands out nothing. */
class NearTheEnd extends CountingSource {
  readonly last = 17n;
  override nextBatch(count: number, options: { signal?: AbortSignal } = {}) {
    if (this.next + BigInt(count) - 1n > this.last) {
      this.calls.push({ count, signal: options.signal });
      const error = Object.assign(new Error(`cannot hand out ${count} more ID(s)`), {
        code: "ERR_ID_OVERFLOW",
      });
      return Promise.reject(error);
    }
    return super.nextBatch(count, options);
  }
}

describe("IdBatches: one ID call per event-loop turn", () => {
  it("requests added in one turn share one call for the sum of their counts, in arrival order", async () => {
    const source = new CountingSource();
    const batches = new IdBatches(source, { requestTimeoutMs: 5_000 });
    const a = waiter(1);
    const b = waiter(3);
    const c = waiter(2);
    for (const x of [a, b, c]) batches.add(x.w);
    await Promise.all([a.settled, b.settled, c.settled]);
    assert.deepEqual(
      source.calls.map((call) => call.count),
      [6],
    );
    assert.deepEqual(a.outcome.ids, [1n]);
    assert.deepEqual(b.outcome.ids, [2n, 3n, 4n]);
    assert.deepEqual(c.outcome.ids, [5n, 6n]);
  });

  it("a request added after a call was made waits for a later call: its IDs are above the earlier ones", async () => {
    const source = new CountingSource();
    const batches = new IdBatches(source, { requestTimeoutMs: 5_000 });
    const first = waiter(2);
    batches.add(first.w);
    await turn(); // the first call is made
    const second = waiter(1);
    batches.add(second.w);
    await Promise.all([first.settled, second.settled]);
    assert.deepEqual(
      source.calls.map((call) => call.count),
      [2, 1],
    );
    assert.ok(second.outcome.ids![0]! > first.outcome.ids![1]!);
  });

  it("a call never asks for more than maxIdsPerCall: a turn's requests are split", async () => {
    const source = new CountingSource();
    const batches = new IdBatches(source, { requestTimeoutMs: 5_000, maxIdsPerCall: 10 });
    const all = [6, 4, 5, 1].map(waiter);
    for (const x of all) batches.add(x.w);
    await Promise.all(all.map((x) => x.settled));
    assert.deepEqual(
      source.calls.map((call) => call.count),
      [10, 6],
    );
    assert.deepEqual(
      all.map((x) => x.outcome.ids!.length),
      [6, 4, 5, 1],
    );
  });

  it("a request cancelled before its call is made is not asked for, and gets nothing", async () => {
    const source = new CountingSource();
    const batches = new IdBatches(source, { requestTimeoutMs: 5_000 });
    const kept = waiter(2);
    const gone = waiter(5);
    batches.add(kept.w);
    batches.add(gone.w);
    batches.cancel(gone.w);
    await kept.settled;
    await turn();
    assert.deepEqual(
      source.calls.map((call) => call.count),
      [2],
    );
    assert.deepEqual(gone.outcome, {});
  });

  it("a call whose every request was cancelled is aborted; one with a request left is not", async () => {
    const source = new CountingSource();
    source.hold = true;
    const batches = new IdBatches(source, { requestTimeoutMs: 5_000 });
    const a = waiter(1);
    const b = waiter(1);
    batches.add(a.w);
    batches.add(b.w);
    await turn();
    const [call] = source.calls;
    batches.cancel(a.w);
    assert.equal(call!.signal!.aborted, false);
    batches.cancel(b.w);
    assert.equal(call!.signal!.aborted, true);
    await turn();
    assert.deepEqual(a.outcome, {});
    assert.deepEqual(b.outcome, {});
  });

  it("a request cancelled while its call is in flight leaves a hole; the others get their IDs", async () => {
    const source = new CountingSource();
    source.hold = true;
    const batches = new IdBatches(source, { requestTimeoutMs: 5_000 });
    const a = waiter(1);
    const b = waiter(2);
    batches.add(a.w);
    batches.add(b.w);
    await turn();
    batches.cancel(a.w);
    source.release();
    await b.settled;
    assert.deepEqual(a.outcome, {});
    assert.equal(b.outcome.ids!.length, 2);
    assert.ok(b.outcome.ids![0]! >= 1n);
  });

  it("a call still waiting after requestTimeoutMs is aborted: every request gets the 503 timeout", async () => {
    const source = new CountingSource();
    source.hold = true;
    const batches = new IdBatches(source, { requestTimeoutMs: 20 });
    const a = waiter(1);
    const b = waiter(1);
    batches.add(a.w);
    batches.add(b.w);
    await Promise.all([a.settled, b.settled]);
    for (const x of [a, b]) {
      assert.ok(x.outcome.error instanceof HttpError, String(x.outcome.error));
      assert.equal(x.outcome.error.status, 503);
      assert.equal(x.outcome.error.code, "timeout");
    }
    assert.equal(source.calls[0]!.signal!.aborted, true);
  });

  it("a failed call fails every request waiting in it with the source's error", async () => {
    const failure = new Error("no majority");
    const source: IdSource = {
      nextBatch: () => Promise.reject(failure),
      status: () => Promise.resolve([]),
    };
    const batches = new IdBatches(source, { requestTimeoutMs: 5_000 });
    const a = waiter(1);
    const b = waiter(4);
    batches.add(a.w);
    batches.add(b.w);
    await Promise.all([a.settled, b.settled]);
    assert.equal(a.outcome.error, failure);
    assert.equal(b.outcome.error, failure);
  });

  it("a source that gives the wrong number of IDs fails the requests instead of handing out a short list", async () => {
    const source: IdSource = {
      nextBatch: () => Promise.resolve([1n]),
      status: () => Promise.resolve([]),
    };
    const batches = new IdBatches(source, { requestTimeoutMs: 5_000 });
    const a = waiter(1);
    const b = waiter(1);
    batches.add(a.w);
    batches.add(b.w);
    await Promise.all([a.settled, b.settled]);
    assert.match(String(a.outcome.error), /gave 1 IDs, not the 2 asked for/);
    assert.equal(b.outcome.ids, undefined);
  });

  it("near the end of the ID space, a turn's sum that does not fit is asked again request by request: each gets what it would alone", async () => {
    const source = new NearTheEnd();
    source.hold = true; // the calls made one by one wait, so that one request can go meanwhile
    const batches = new IdBatches(source, { requestTimeoutMs: 5_000 });
    const small = waiter(2);
    const large = waiter(100);
    const cancelled = waiter(1);
    const rest = waiter(15);
    for (const x of [small, large, cancelled, rest]) batches.add(x.w);
    await turn(); // the turn's call is made, and fails
    batches.cancel(cancelled.w); // gone while the others are asked again
    source.hold = false;
    source.release();
    await Promise.all([small.settled, large.settled, rest.settled]);
    assert.deepEqual(
      source.calls.map((call) => call.count),
      [118, 2, 100, 15],
    );
    assert.deepEqual(small.outcome.ids, [1n, 2n]);
    assert.equal((large.outcome.error as { code?: string }).code, "ERR_ID_OVERFLOW");
    assert.equal(large.outcome.ids, undefined);
    assert.equal(cancelled.outcome.ids, undefined);
    assert.equal(cancelled.outcome.error, undefined);
    assert.deepEqual(
      rest.outcome.ids,
      Array.from({ length: 15 }, (_, i) => BigInt(i + 3)),
    );
    // A lone request that does not fit gets the error, and is not asked again.
    const alone = waiter(5);
    batches.add(alone.w);
    await alone.settled;
    assert.equal((alone.outcome.error as { code?: string }).code, "ERR_ID_OVERFLOW");
    assert.deepEqual(
      source.calls.map((call) => call.count),
      [118, 2, 100, 15, 5],
    );
  });

  it("asked again one by one, a long run of requests cancelled meanwhile is passed over without a call each (no recursion per request)", async () => {
    const source = new NearTheEnd();
    source.hold = true;
    const batches = new IdBatches(source, { requestTimeoutMs: 5_000 });
    const first = waiter(1);
    const gone = Array.from({ length: 8_000 }, () => waiter(1));
    const last = waiter(1);
    for (const x of [first, ...gone, last]) batches.add(x.w);
    await turn(); // the turn's one call (8,002 IDs) fails: asked again one by one
    for (const x of gone) batches.cancel(x.w); // while the first one's call is in flight
    source.hold = false;
    source.release();
    await Promise.all([first.settled, last.settled]);
    assert.deepEqual(first.outcome.ids, [1n]);
    assert.deepEqual(last.outcome.ids, [2n]);
    assert.deepEqual(
      source.calls.map((call) => call.count),
      [8_002, 1, 1],
    );
  });
});
