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
 * - redquorum silent past the time it would have had the command stopped
 *   (it is stopped): SIGTERM then, SIGKILL at the same point.
 *
 * It is started before the command, which waits to be let go until the
 * guard has been told its group (lock.ts): no moment exists in which the
 * command runs and nobody could stop it. While the guard runs, every
 * SIGTERM that stops the command comes from it (redquorum asks with
 * `term`), so the command gets one, whoever noticed first.
 *
 * Started as `cli-guard.js <grace ms>`, in a session of its own (a signal
 * to redquorum's process group, a terminal's Ctrl-C, does not reach it).
 * Its stdin takes lines, times in ms on CLOCK_MONOTONIC (`process.hrtime`,
 * one clock for every process of the machine): `group <pgid>` (the
 * command's), `at <term> <kill>` (the schedule: SIGTERM if the lock is not
 * extended by then, SIGKILL at the other), `term <kill>` (SIGTERM now if
 * not sent yet, SIGKILL at that time at the latest), `done` (the group is
 * gone, or never ran). It exits once it has nothing left to watch.
 */
import { monotonicNowMs as nowMs } from "./monotonic.js";
import { groupRunning, signalGroup } from "./process-group.js";

/** How long the guard lets redquorum ask for SIGTERM before it sends one by itself. */
const termSlackMs = 50;
/** How often the guard looks whether the group is gone, once it was told to stop. */
const pollMs = 50;

// redquorum's stderr, shared: its reader may be gone with redquorum (a
// pipeline killed whole). A failed write must not end the guard before
// its SIGKILL, so each signal goes out before the guard says it.
process.stderr.on("error", () => {});
const say = (message: string) => process.stderr.write(`redquorum lock (guard): ${message}\n`);

function main(): void {
  const graceMs = Number(process.argv[2]);
  if (!Number.isSafeInteger(graceMs) || graceMs < 0) {
    say(`expected <grace ms>, got ${JSON.stringify(process.argv.slice(2))}`);
    process.exit(2);
  }
  // Signals meant for redquorum's terminal or group are redquorum's to pass on.
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"] as const)
    process.on(signal, () => {});

  let pgid: number | undefined;
  let termAt = Number.POSITIVE_INFINITY;
  let killAt = Number.POSITIVE_INFINITY;
  /** SIGKILL's time as redquorum asked for it (`term`), apart from the lock's schedule (`at`). */
  let askedKillAt = Number.POSITIVE_INFINITY;
  let termSent = false;
  /** The guard sent SIGTERM by itself: redquorum was silent (stopped). */
  let termOwn = false;
  /** redquorum exited: its end of the pipe closed before "done". */
  let orphaned = false;
  let finished = false;
  let timer: ReturnType<typeof setTimeout> | undefined;

  const finish = (): void => {
    finished = true;
    clearTimeout(timer);
    process.stdin.destroy();
  };

  /** SIGTERM to the group if not sent yet; whether it was sent now. */
  const terminate = (): boolean => {
    if (termSent || pgid === undefined) return false;
    termSent = true;
    return signalGroup(pgid, "SIGTERM");
  };

  /** Acts on what is due, and sets the timer for what comes next. */
  const step = (): void => {
    clearTimeout(timer);
    if (finished || pgid === undefined) return;
    const now = nowMs();
    if (!termSent && now >= termAt + termSlackMs && terminate()) {
      termOwn = true;
      say(
        "redquorum did not extend the lock or stop the command in time (is it stopped?): " +
          `sent SIGTERM to the command (SIGKILL in ${Math.max(0, killAt - now)}ms)`,
      );
    }
    // Stopping the command on its own (redquorum stopped or gone), the
    // guard watches the group itself (otherwise redquorum does, and says
    // "done"; the two do not stop the group to look at it at once).
    // Nothing left to stop: the guard goes before the group id can be
    // another's, with a SIGKILL in case a member was missed after all.
    const watching = termSent && (termOwn || orphaned);
    if (watching && !groupRunning(pgid)) {
      signalGroup(pgid, "SIGKILL");
      finish();
      return;
    }
    if (now >= killAt) {
      // SIGKILL cannot be refused; reaping is the parent's, so the guard is done.
      signalGroup(pgid, "SIGKILL");
      finish();
      return;
    }
    let next = Math.min(termSent ? killAt : termAt + termSlackMs, killAt);
    if (watching) next = Math.min(next, now + pollMs);
    if (Number.isFinite(next)) timer = setTimeout(step, Math.max(1, next - now));
  };

  let pending = "";
  process.stdin.setEncoding("utf8");
  process.stdin.on("data", (chunk: string) => {
    pending += chunk;
    for (let newline = pending.indexOf("\n"); newline >= 0; newline = pending.indexOf("\n")) {
      const [kind, first, second] = pending.slice(0, newline).split(" ");
      pending = pending.slice(newline + 1);
      if (finished) return;
      if (kind === "done") {
        finish();
        return;
      }
      if (kind === "group") pgid = Number(first);
      // Once the guard stopped the command by itself, a later schedule (a
      // stopped redquorum resumed) does not put that off. After redquorum's
      // own `term` (the command exited and what it left runs on, or the
      // lock was lost), the lock's schedule still moves with each
      // extension: SIGKILL comes when redquorum asked, or when the lock
      // would run out, whichever is first.
      else if (kind === "at" && !termOwn) {
        // A time already past comes from a redquorum that runs (a lock
        // found lost: its `term` follows at once): the slack counts from
        // now, or the guard would blame a stopped redquorum for it.
        termAt = Math.max(Number(first), nowMs());
        killAt = Math.min(askedKillAt, Number(second));
      } else if (kind === "term") {
        askedKillAt = Math.min(askedKillAt, Number(first));
        killAt = Math.min(killAt, askedKillAt);
        terminate();
      }
    }
    step();
  });
  // redquorum is gone: nobody extends the lock or watches the command now.
  process.stdin.on("end", () => {
    if (finished) return;
    if (pgid === undefined) {
      finish(); // the command was never let go
      return;
    }
    orphaned = true;
    const now = nowMs();
    killAt = Math.min(killAt, now + graceMs);
    if (terminate()) {
      say(
        "redquorum exited while the command held the lock (killed?): sent SIGTERM to the " +
          `command (SIGKILL in ${Math.max(0, killAt - now)}ms)`,
      );
    }
    step();
  });
  process.stdin.on("error", () => {});
}

main();
