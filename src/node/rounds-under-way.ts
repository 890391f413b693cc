/**
 * How many quorum rounds are under way in this process, and the most there
 * were since the connections last wrote: whether a command written now is
 * likely to have company on its connection in this tick.
 *
 * A connection that corks its socket for the rest of the tick sends the
 * tick's commands in one write, which is what many concurrent callers
 * need (one system call per connection and tick, and their rounds stay in
 * step, so that a node's script calls batch: redis-node.ts). A lone
 * caller's command gains nothing from waiting for the tick's end: one
 * worker's acquire → release cycle cost about 4 % more client CPU corked
 * and ran correspondingly slower. So a connection corks only where
 * another round was under way since the last writes
 * (ioredis-transport.ts); what a wrong guess costs is one system call, or
 * one tick's wait, never the order of commands.
 *
 * One count for the process: every Redlock and NextId in it shares the
 * event loop the writes go out on.
 */
export const roundsUnderWay = {
  /** Rounds started and not ended. */
  now: 0,
  /** The most at once since the last `writesFlushed()`. */
  peak: 0,
};

export function roundStarted(): void {
  roundsUnderWay.now++;
  if (roundsUnderWay.now > roundsUnderWay.peak) roundsUnderWay.peak = roundsUnderWay.now;
}

export function roundEnded(): void {
  roundsUnderWay.now--;
}

/** The connections wrote what this tick gave them: the peak starts again from now. */
export function writesFlushed(): void {
  roundsUnderWay.peak = roundsUnderWay.now;
}

/** Whether a tick's first command on a connection should wait for the tick's others. */
export function othersUnderWay(): boolean {
  return roundsUnderWay.peak >= 2;
}
