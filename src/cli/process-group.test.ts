import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
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

  it("a chain of processes that each fork and exit is seen running at every look", async () => {
    // Each generation counts to 50, starts the next and exits (about a ms
    // each). Read from /proc alone, a generation forked after the listing
    // whose parent exited before it was read went unseen: most looks said
    // "not running" (the lock was then released beside it).
    const dir = mkdtempSync(join(tmpdir(), "redquorum-group-"));
    const script = join(dir, "chain.sh");
    writeFileSync(
      script,
      "j=0; while [ $j -lt 50 ]; do j=$((j + 1)); done\n" +
        'if [ "$1" -lt 100000 ]; then sh "$0" $(($1 + 1)) & fi\nexit 0\n',
    );
    const child = spawn("sh", [script, "1"], { detached: true, stdio: "ignore" });
    await once(child, "spawn");
    const pgid = child.pid!;
    try {
      let missed = 0;
      const looks = 200;
      for (let i = 0; i < looks; i++) {
        if (!groupRunning(pgid)) missed++;
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      assert.equal(missed, 0, `${missed} of ${looks} looks missed the running chain`);
    } finally {
      // SIGKILL to the group reaches every generation, one being forked too.
      process.kill(-pgid, "SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    }
    const deadline = performance.now() + 5_000;
    while (groupRunning(pgid) && performance.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal(groupRunning(pgid), false, "the chain outlived SIGKILL to its group");
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
