/**
 * The guard of `redquorum lock`: a small process beside redquorum that
 * stops the command's process group when redquorum cannot. The command
 * runs in a session of its own, so nothing reaches it when redquorum is
 * killed (SIGKILL, the OOM killer), and a stopped redquorum (SIGSTOP, a
 * frozen container, a descheduled VM) tells it nothing while the lock runs
 * out. The guard is told the lock's schedule and acts on it by itself:
 *
 * - redquorum gone (its end of the pipe closes before "done"): SIGTERM to
 *   the group at once, SIGKILL after the grace, and no later than the end
 *   of the validity redquorum last reported;
 * - redquorum silent past the time it would have sent SIGTERM itself (it is
 *   stopped): SIGTERM then, SIGKILL at the same point redquorum would.
 *
 * Started as `cli-guard.js <pgid> <grace ms>`, in a session of its own (a
 * signal to redquorum's process group, a terminal's Ctrl-C, does not reach
 * it). Its stdin takes lines, times in ms on CLOCK_MONOTONIC
 * (`process.hrtime`, one clock for every process of the machine):
 * `at <term> <kill>` (the schedule: SIGTERM if the lock is not extended by
 * then, SIGKILL at the other), `term <kill>` (redquorum sent SIGTERM itself:
 * only SIGKILL is left, at that time), `done` (the group is gone).
 *
 * Self-contained on purpose (no import from the library): it starts in
 * tens of milliseconds, and nothing it does can wait on Redis.
 */

/** How long the guard lets redquorum send SIGTERM itself before it does (a second one could read as "force"). */
const termSlackMs = 50;

const nowMs = () => Number(process.hrtime.bigint() / 1_000_000n);
// redquorum's stderr, shared: its reader may be gone with redquorum (a
// pipeline killed whole). A failed write must not end the guard before
// its SIGKILL, so each signal goes out before the guard says it.
process.stderr.on("error", () => {});
const say = (message: string) => process.stderr.write(`redquorum lock (guard): ${message}\n`);

function main(): void {
  const pgid = Number(process.argv[2]);
  const graceMs = Number(process.argv[3]);
  if (!Number.isSafeInteger(pgid) || pgid <= 1 || !Number.isSafeInteger(graceMs) || graceMs < 0) {
    say(`expected <pgid> <grace ms>, got ${JSON.stringify(process.argv.slice(2))}`);
    process.exit(2);
  }
  // Signals meant for redquorum's terminal or group are redquorum's to pass on.
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"] as const)
    process.on(signal, () => {});

  let termAt = Number.POSITIVE_INFINITY;
  let killAt = Number.POSITIVE_INFINITY;
  let termSent = false;
  let finished = false;
  let timer: ReturnType<typeof setTimeout> | undefined;

  /** Sends `signal` to the group (0: only looks); false when the group is gone. */
  const send = (signal: NodeJS.Signals | 0): boolean => {
    try {
      process.kill(-pgid, signal);
      return true;
    } catch {
      return false;
    }
  };

  const finish = (): void => {
    finished = true;
    clearTimeout(timer);
    process.stdin.destroy();
  };

  // SIGKILL cannot be refused; its reaping is redquorum's (a stopped
  // redquorum leaves zombies until it runs again), so the guard is done.
  const killAndGo = (): void => {
    finish();
    send("SIGKILL");
  };

  /** Acts on what is due, and sets the timer for what comes next. */
  const step = (): void => {
    clearTimeout(timer);
    if (finished) return;
    const now = nowMs();
    if (!termSent && now >= termAt + termSlackMs) {
      termSent = true;
      if (!send("SIGTERM")) {
        finish();
        return;
      }
      say(
        `redquorum did not extend the lock or stop the command in time (is it stopped?): ` +
          `sent SIGTERM to the command (SIGKILL in ${Math.max(0, killAt - now)}ms)`,
      );
    }
    if (now >= killAt) {
      killAndGo();
      return;
    }
    const next = Math.min(termSent ? killAt : termAt + termSlackMs, killAt);
    if (Number.isFinite(next)) timer = setTimeout(step, Math.max(1, next - now));
  };

  let pending = "";
  process.stdin.setEncoding("utf8");
  process.stdin.on("data", (chunk: string) => {
    pending += chunk;
    let newline = pending.indexOf("\n");
    while (newline >= 0 && !finished) {
      const [kind, first, second] = pending.slice(0, newline).split(" ");
      pending = pending.slice(newline + 1);
      if (kind === "done") {
        finish();
        return;
      }
      // Once the command was told to stop, it is not told again: a
      // schedule that comes after (a stopped redquorum resumed) changes nothing.
      if (kind === "at" && !termSent) {
        termAt = Number(first);
        killAt = Number(second);
      } else if (kind === "term") {
        termSent = true;
        killAt = Number(first);
      }
      newline = pending.indexOf("\n");
    }
    step();
  });
  // redquorum is gone: nobody extends the lock or watches the command now.
  process.stdin.on("end", () => {
    if (finished) return;
    const now = nowMs();
    killAt = Math.min(killAt, now + graceMs);
    if (!termSent) {
      termSent = true;
      if (!send("SIGTERM")) {
        finish();
        return;
      }
      say(
        `redquorum exited while the command held the lock (killed?): sent SIGTERM to the ` +
          `command (SIGKILL in ${Math.max(0, killAt - now)}ms)`,
      );
    }
    step();
  });
  process.stdin.on("error", () => {});
}

main();
