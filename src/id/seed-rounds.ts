/**
 * The seed strategy, seed 2 as written: per ID, read a majority, propose
 * their maximum + 1, and the ID is that value once a majority accepted it.
 * Two round trips per ID and no sharing between calls; kept for comparison
 * with the range strategy (range-rounds.ts).
 */
import { maxId, maxOf } from "../decimal.js";
import { IdOverflowError } from "../errors.js";
import { counterValueOf, isAccepted } from "./counter.js";
import type { CounterRounds, RoundFailure } from "./counter-rounds.js";
import type { ResolvedNextIdOptions } from "./options.js";

export interface SeedContext {
  readonly counter: CounterRounds;
  readonly quorum: number;
  readonly options: Pick<ResolvedNextIdOptions, "retry" | "clock">;
  /** Throws `ClosedError` once the NextId is closed (checked before every try). */
  readonly assertOpen: () => void;
}

/** `count` IDs, one after the other. */
export async function seedBatch(
  context: SeedContext,
  count: number,
  signal: AbortSignal | undefined,
): Promise<bigint[]> {
  const ids: bigint[] = [];
  for (let i = 0; i < count; i++) ids.push(await seedOne(context, signal));
  return ids;
}

async function seedOne(context: SeedContext, signal: AbortSignal | undefined): Promise<bigint> {
  const { counter, quorum, options } = context;
  for (let losses = 1; ; losses++) {
    context.assertOpen();
    const read = await counter.read({
      isYes: isAccepted,
      // A lost read waits for every answer, so its error says whether
      // any node knows the counter (lost data) or none does (no init).
      stop: "won",
      signal,
    });
    if (read.aborted) throw signal?.reason;
    counter.learn(read, undefined);
    // The ContentionError of a lost round counts 1 attempt: the range
    // strategy's count of losses in a row, which this strategy never raises.
    let failure: RoundFailure;
    if (read.yesCount >= quorum) {
      let readMax = 0n;
      for (const outcome of read.outcomes) {
        if (outcome?.kind === "yes") readMax = maxOf(readMax, counterValueOf(outcome.value));
      }
      const proposal = readMax + 1n;
      if (proposal > maxId) throw new IdOverflowError(readMax, 1, maxId);
      const write = await counter.propose(proposal);
      counter.learn(write, proposal);
      if (write.yesCount >= quorum) return proposal;
      failure = counter.failureOf("next", write, 1);
    } else {
      failure = counter.failureOf("next", read, 1);
    }
    if (losses > options.retry.retries) throw failure.error;
    await options.clock.sleep(counter.backoffMs(losses), signal);
  }
}
