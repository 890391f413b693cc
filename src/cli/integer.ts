/** Integer arguments on the command line: digits only, within a range named in the error. */
import { UsageError } from "./errors.js";

/** The integer `text`; throws `UsageError` naming `argument` and the range when it is not one. */
export function parseInteger(text: string, argument: string, min: number, max: number): number {
  const value = /^\d+$/.test(text.trim()) ? Number(text.trim()) : Number.NaN;
  if (!(value >= min && value <= max)) {
    throw new UsageError(
      argument,
      `${JSON.stringify(text)}: expected an integer from ${min} to ${max}`,
    );
  }
  return value;
}
