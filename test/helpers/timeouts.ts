/**
 * Options for a client in a test that is not about node timeouts. The
 * library's 50 ms bound on a node's answer is missed whenever the test
 * process or the nodes stall (other test files run beside it on two
 * cores); an acquire asserted to succeed, or to fail for another reason,
 * then fails with `QuorumError` ("no reply within 50 ms"). 1 s is the
 * longest bound allowed (limits.nodeTimeoutMsMax).
 */
export const notAboutTimeouts = { nodeTimeoutMs: 1_000 } as const;
