import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { describe, it } from "node:test";
import { groupRunning } from "./process-group.js";

/** A `sleep` leading a process group of its own; its pgid is its pid. */
async function sleeperGroup(): Promise<{ pgid: number; stop: () => Promise<void> }> {
  const child = spawn("sleep", ["30"], { detached: true, stdio: "ignore" });
  await once(child, "spawn");
  const pgid = child.pid!;
  return {
    pgid,
    stop: async () => {
      const exited = once(child, "exit");
      process.kill(-pgid, "SIGKILL");
      await exited;
    },
  };
}

const failWith = (code: string) => () => {
  throw Object.assign(new Error(`kill: ${code}`), { code });
};

describe("groupRunning: whether a process of the group still runs", () => {
  it("a group with a live member runs; once it is gone and reaped, it does not", async () => {
    const group = await sleeperGroup();
    assert.equal(groupRunning(group.pgid), true);
    await group.stop();
    assert.equal(groupRunning(group.pgid), false);
  });

  it("members this user may not signal (EPERM, a command run through sudo) still run: not gone", async () => {
    // Before, EPERM read as "no process left", and redquorum lock released
    // while another user's leftover ran on.
    const group = await sleeperGroup();
    try {
      assert.equal(groupRunning(group.pgid, failWith("EPERM") as typeof process.kill), true);
      assert.equal(groupRunning(group.pgid, failWith("ESRCH") as typeof process.kill), false);
    } finally {
      await group.stop();
    }
  });
});
