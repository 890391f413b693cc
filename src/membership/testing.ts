/**
 * Switches for the fault suite's negative controls only (never exported
 * from the package): with them a test shows the violation each check
 * prevents, so that a check that stopped working fails a test.
 */
export const membershipTesting: {
  /** Views made while this is "off" check no list and send each node its own stamp. */
  mode: "enforce" | "off";
  /** A node joined while this is false is not put in the quarantine nor marked lost. */
  joinQuarantine: boolean;
} = { mode: "enforce", joinQuarantine: true };
