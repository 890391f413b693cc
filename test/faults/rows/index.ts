import type { Row } from "../runner/types.js";
import { idRows } from "./ids.js";
import { lockRows } from "./locks.js";

/** Every row, in FAULTS.md order. */
export const rows: readonly Row[] = [...lockRows, ...idRows];

export function findRow(id: string): Row | undefined {
  return rows.find((row) => row.id.toLowerCase() === id.toLowerCase());
}
