/**
 * The switch for the fault suite's negative controls only (never exported
 * from the package): with it a test shows the violation the membership
 * check prevents, so that a check that stopped working fails a test.
 */
export const membershipTesting: {
  /** Views made while this is "off" check no list and send each node its own stamp. */
  mode: "enforce" | "off";
  /**
   * True: a member that lost its record is taken back once every other
   * member answered, whatever they hold, as by an operator's act (the
   * clients' rule before it was closed: view.ts, confirmCurrent).
   */
  takeBackEmptyLists: boolean;
} = { mode: "enforce", takeBackEmptyLists: false };
