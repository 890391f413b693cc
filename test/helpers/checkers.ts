/**
 * The MX and ID sweeps, for the integration tests that collect holds and ID
 * calls themselves. One implementation lives with the fault-suite checkers
 * (test/faults/checkers/sweeps.ts), which read the same properties from a
 * recorded history.
 */
export {
  findIdViolations,
  findOverlaps,
  type Hold,
  type IdCall,
  type IdViolation,
  type Overlap,
} from "../faults/checkers/sweeps.js";
