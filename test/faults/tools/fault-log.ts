import { type FaultEvent, type HistoryWriter, monotonicMs } from "../history.js";

/** What a tool says about a fault; the log adds `kind`, `faultId` and `timeMs`. */
export interface FaultNote {
  /** e.g. "latency", "blackhole", "reset", "swallow", "kill", "power-loss", "clock-jump". */
  readonly fault: string;
  /** e.g. "node-2", "lock-1→node-2", "client lock-1". */
  readonly target: string;
  readonly detail?: string;
}

/**
 * The fault log every tool writes to: numbers faults, stamps them with the
 * shared monotonic clock and hands each event to a sink (a HistoryWriter,
 * usually). Keeps the events too, so a test can look at what was injected.
 * Tools take it as an optional option: without one, nothing is recorded.
 */
export class FaultLog {
  readonly events: FaultEvent[] = [];
  private nextId = 1;
  private readonly sink: ((event: FaultEvent) => void) | undefined;

  constructor(sink?: HistoryWriter | ((event: FaultEvent) => void)) {
    this.sink = typeof sink === "function" ? sink : sink ? (event) => sink.write(event) : undefined;
  }

  /** A fault that lasts: returns the function that records its end (idempotent). */
  start(note: FaultNote): () => void {
    const faultId = this.nextId++;
    this.emit({ ...note, kind: "fault", phase: "start", faultId, timeMs: monotonicMs() });
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.emit({ ...note, kind: "fault", phase: "end", faultId, timeMs: monotonicMs() });
    };
  }

  /** A fault with no duration (a kill, a reset, a reply swallowed). */
  instant(note: FaultNote): void {
    const faultId = this.nextId++;
    this.emit({ ...note, kind: "fault", phase: "start", faultId, timeMs: monotonicMs() });
  }

  private emit(event: FaultEvent): void {
    this.events.push(event);
    this.sink?.(event);
  }
}
