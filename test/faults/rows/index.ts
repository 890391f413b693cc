import type { Row } from "../runner/types.js";
import { idRows } from "./ids.js";
import { lockRows } from "./locks.js";
import { membershipRows } from "./membership.js";

/** Every row, in FAULTS.md order. */
export const rows: readonly Row[] = [...lockRows, ...idRows, ...membershipRows];

export function findRow(id: string): Row | undefined {
  return rows.find((row) => row.id.toLowerCase() === id.toLowerCase());
}
