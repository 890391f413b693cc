/**
 * A row of FAULTS.md as the runner runs it: its setup, its scripted fault
 * schedule (deterministic from the seed), and what each checker must say.
 */
import type { Persistence } from "../../../src/index.js";
import type { HistoryEvent } from "../history.js";
import type { CheckOptions } from "./checks.js";
import type { RowContext } from "./context.js";

export type CheckerName = "MX" | "ID" | "RS" | "LV" | "HY" | "WGL";

/** `clean`: the checker must find nothing; `flagged`: it must find a violation (negative control). */
export type Expectation = "clean" | "flagged";

export type RowExpected = "safe" | "documented-unsafe" | "unavailable" | "refused";

export interface RowSetup {
  /** Default 5. */
  readonly nodeCount?: number;
  /** Default "none" (faster; rows about durability say theirs). */
  readonly persistence?: Persistence;
  readonly extraArgs?: readonly string[];
  /** A separate single Redis for lock-set's shared value. */
  readonly store?: boolean;
}

export interface Row {
  /** "L4", "I5-no-marker", … (variants of one FAULTS.md row share its number). */
  readonly id: string;
  readonly title: string;
  readonly expected: RowExpected;
  /** Set when the row cannot be injected on this machine: why (it stays in the report). */
  readonly notRun?: string;
  readonly setup?: RowSetup;
  readonly checks: Partial<Record<CheckerName, Expectation>>;
  /** Options for the checkers (fencing order, fenced store, liveness windows…). */
  readonly checkOptions?: CheckOptions;
  /** The scripted schedule: spawns workloads, injects faults, states row-specific expectations. */
  readonly run?: (ctx: RowContext) => Promise<void>;
  /** Row-specific checks over the merged history (validity accounting, "no ok acquire during…"): `ctx.expect`. */
  readonly verify?: (events: readonly HistoryEvent[], ctx: RowContext) => void;
}
