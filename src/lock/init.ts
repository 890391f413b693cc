/**
 * `Redlock.init()`: makes a cluster that redquorum has never used ready for
 * its first lock by marking every node (a client cannot tell a brand-new
 * node from one that restarted empty), and leaves a cluster in use alone.
 * It lifts no quarantine unless told the nodes are new (`liftQuarantines`):
 * see `initPlan`. What it found and did is reported node by node.
 */

import { repeatWhile } from "../clock.js";
import { fenceFloorKey } from "../fencing/scripts.js";
import {
  initNodeScript,
  initState,
  markerKey,
  quarantineKey,
  runKey,
  unjudgedPrefix,
} from "../node/node-state.js";
import type { NodeGroup } from "../quorum/node-group.js";
import type { Outcome, RoundResult } from "../quorum/round.js";
import { resolveInitOptions } from "./call-arguments.js";
import type { QuarantineJudge } from "./quarantine-judge.js";

/** What `Redlock.init()` found and did on one node. */
export interface InitReport {
  readonly endpoint: string;
  /**
   * "in service": it keeps its fencing counters and serves locks; "in
   * quarantine": it keeps (or was repaired to) known counters but serves
   * the quarantine of a restart or loss first.
   */
  readonly found: "in service" | "in quarantine" | "not marked" | "unreachable";
  /**
   * "marked": now in service; "left to recover": it may have forgotten a
   * lock still held, so it serves its quarantine (and a fencing repair);
   * "none": nothing to do, or (`detail` says) nothing done yet.
   */
  readonly action: "marked" | "left to recover" | "none";
  /**
   * What the node serves now: "locks", every lock (in service, or marked
   * now); "unfenced locks", locks taken with `fencing: false` (such as the
   * node-redlock drop-in's) but no fenced one: it serves locks from a
   * `lost:` marker and its fencing counters are unknown (`detail` says what
   * to do); "none yet": it is unreachable, serves a quarantine, or waits
   * for one.
   */
  readonly serves: "locks" | "unfenced locks" | "none yet";
  readonly detail: string;
}

export interface InitOptions {
  /**
   * Lift the quarantines running on a cluster none of whose nodes is in
   * service, and mark every node: say so only for nodes you know are new
   * (that never held a lock), such as a new cluster whose first lock call
   * came before `init()`. A cluster whose every node lost its memory
   * within the longest maxTtlMs (a rolling restart without persistence)
   * looks the same to the nodes, and lifting its quarantines can let a
   * second client take a lock still held. Default false.
   */
  readonly liftQuarantines?: boolean;
}

/** The init script's reply to "check": {state, marker, server state, quarantine}. */
type CheckReply = [number, string, string?, string?];

const initKeys = [markerKey, quarantineKey, fenceFloorKey, runKey];

/**
 * What init does on a cluster, from what each node is (initState):
 *
 * - "in use" (some node is in service: it keeps fencing counters): nothing;
 *   a node that lost its memory serves its quarantine and is repaired.
 * - "mark" (every node without a marker and a quarantine): mark every
 *   node, lifting no quarantine: a new cluster (or one whose every node
 *   lost its memory and no client met it since: README).
 * - "lost" (every node serving locks from a "lost:" marker that nothing
 *   repaired: each lost its memory, and its quarantine is over): nothing.
 *   Marked, they would start fresh fencing counters, below tokens handed
 *   out before that a store may hold (a paused old holder's write would
 *   pass it again). The operator raises the fencing floor first, or says
 *   no fenced lock was ever used (`liftQuarantines`).
 * - "wait" (some node in quarantine, or nodes unmarked beside nodes serving
 *   locks): nothing yet. A node in quarantine may have forgotten a lock
 *   still held: a rolling restart without persistence leaves every node so
 *   in turn, which the nodes cannot tell from a new cluster's first call.
 *   Marking the others alone would leave it unrepairable with fencing (too
 *   few known others). Once the quarantines are over, init marks all.
 * - "lift" ("wait", told the nodes are new): mark every node, lift every
 *   quarantine.
 */
type InitPlan = "in use" | "mark" | "lost" | "wait" | "lift";

export function initPlan(
  states: readonly (number | undefined)[],
  liftQuarantines: boolean,
): InitPlan {
  if (states.includes(initState.healthy)) return "in use";
  const known = states.filter((state) => state !== undefined);
  if (known.every((state) => state === initState.unmarked)) return "mark";
  if (known.every((state) => state === initState.servesLocks)) {
    return liftQuarantines ? "lift" : "lost";
  }
  return liftQuarantines ? "lift" : "wait";
}

/** What init needs besides the nodes. */
export interface InitContext {
  readonly group: NodeGroup;
  readonly timeoutMs: number;
  /**
   * Judges the unjudged quarantines init finds: a quarantine that only
   * quarantine-off clients met is judged by no one else.
   */
  readonly judge: Pick<QuarantineJudge, "judgeNow">;
  /** Called once first contact is over (init on a closed instance throws). */
  readonly assertOpen: () => void;
}

/** Checks every node and carries out `initPlan` (marking needs every node). */
export async function initNodes(
  context: InitContext,
  options: InitOptions | undefined,
): Promise<InitReport[]> {
  const { liftQuarantines } = resolveInitOptions(options);
  const { group, timeoutMs, judge, assertOpen } = context;
  await group.ready().catch(() => {}); // a node that failed its check is reported below
  assertOpen();
  const checkRound = () =>
    group.round((node) => node.evalScript(initNodeScript, initKeys, ["check"]), {
      isYes: () => true,
      stop: "all",
      timeoutMs,
    });
  const repliesOf = (round: RoundResult<unknown>) =>
    round.outcomes.map((outcome) =>
      outcome?.kind === "yes" ? (outcome.value as CheckReply) : undefined,
    );
  // Another init marking the nodes (services that each call init() as they
  // start, the drop-in's first call): for a moment some nodes are in
  // service and the rest not marked yet, which read once would be nodes
  // that lost their memory beside a cluster in use. Read again while so,
  // for at most timeoutMs: a node that did lose its memory is reported
  // that much later.
  let check = await repeatWhile(
    checkRound,
    (round) => markingUnderWay(repliesOf(round)),
    timeoutMs,
  );
  let found = repliesOf(check);
  const unjudged = found.flatMap((reply, index) =>
    reply?.[3]?.startsWith(unjudgedPrefix) ? [{ index, marker: reply[1] }] : [],
  );
  if (unjudged.length > 0) {
    await judge.judgeNow(unjudged);
    assertOpen();
    check = await checkRound();
    found = repliesOf(check);
  }
  const plan = initPlan(
    found.map((reply) => reply?.[0]),
    liftQuarantines,
  );
  const reports = group.nodes.map((node, i) =>
    reportOf(node.endpoint, found[i], check.outcomes[i], plan),
  );
  if (plan === "in use" || plan === "wait" || plan === "lost") return reports;
  if (check.errorCount > 0) throw group.quorumError("init", check, group.nodes.length);
  const mode = plan === "lift" ? "lift" : "keep";
  const write = await group.round(
    (node, i) => node.evalScript(initNodeScript, initKeys, ["write", found[i]![2] ?? "", mode]),
    {
      isYes: (reply) => Array.isArray(reply) && reply[0] === initState.healthy,
      stop: "all",
      timeoutMs,
    },
  );
  return reports.map((report, i) => afterWrite(report, write.outcomes[i]));
}

/** Some nodes in service and some not marked (nor in quarantine): another init's marks may be on their way. */
function markingUnderWay(found: ReadonlyArray<CheckReply | undefined>): boolean {
  const states = found.map((reply) => reply?.[0]);
  return states.includes(initState.healthy) && states.includes(initState.unmarked);
}

/** What the check found on one node, and what init will do there. */
function reportOf(
  endpoint: string,
  reply: CheckReply | undefined,
  outcome: Outcome<unknown> | undefined,
  plan: InitPlan,
): InitReport {
  if (!reply) {
    const error = outcome?.kind === "error" ? outcome.error.message : "no answer";
    return { endpoint, found: "unreachable", action: "none", serves: "none yet", detail: error };
  }
  const [state] = reply;
  const marker = reply[1] ? `marker ${JSON.stringify(reply[1])}` : "no marker";
  if (state === initState.healthy) {
    if (reply[3]) {
      return {
        endpoint,
        found: "in quarantine",
        action: "none",
        serves: "none yet",
        detail:
          // Marker "1": it kept its counters. "restarted:" or "lost:": it
          // served before, and its counters are unknown until repaired.
          `${marker}: ${reply[1] === "1" ? "its fencing counters are known, but it serves" : "it served before; its fencing counters are repaired from the others, and it serves"} ` +
          "the quarantine of a restart or loss first (up to the cluster's longest maxTtlMs): " +
          "run init again after it, or wait",
      };
    }
    return { endpoint, found: "in service", action: "none", serves: "locks", detail: marker };
  }
  if (plan === "mark" || plan === "lift") {
    const lifted = plan === "lift" && state === initState.quarantined ? ", quarantine lifted" : "";
    return {
      endpoint,
      found: "not marked",
      action: "marked",
      serves: "locks",
      detail: marker + lifted,
    };
  }
  if (plan === "lost") {
    return {
      endpoint,
      found: "not marked",
      action: "none",
      serves: "unfenced locks",
      detail:
        `${marker}: every node serves locks from a lost: marker, as when every node lost its ` +
        "memory (or new nodes met a lock call before init): the fencing tokens handed out " +
        "before, if any, are known nowhere, and marked now the nodes would hand out tokens " +
        "from 1 again. If fenced locks were ever granted here, run redquorum fencing-floor " +
        "with a token above every one issued (raiseFencingFloor); if never (new nodes), " +
        "redquorum init --lift-quarantines (liftQuarantines)",
    };
  }
  const forgot = "marking it now could let a second client take a lock it forgot";
  if (plan === "in use") {
    return {
      endpoint,
      found: "not marked",
      action: "left to recover",
      serves: "none yet",
      detail:
        `${marker} while other nodes are in service: it lost its memory, so it serves its ` +
        "quarantine and has its fencing counters repaired from the others (which needs " +
        `N - Q + 1 of them with known counters); ${forgot}`,
    };
  }
  // plan "wait"
  const again =
    "run init again once no node is in quarantine (the cluster's longest maxTtlMs at most), " +
    "or with liftQuarantines (redquorum init --lift-quarantines) only for nodes you know are new";
  if (state === initState.servesLocks) {
    return {
      endpoint,
      found: "not marked",
      action: "none",
      serves: "unfenced locks",
      detail: `${marker}: it serves locks; other nodes may have forgotten a lock still held: ${again}`,
    };
  }
  return {
    endpoint,
    found: "not marked",
    action: "left to recover",
    serves: "none yet",
    detail:
      state === initState.quarantined
        ? `${marker}, in quarantine: it may have forgotten a lock still held (a node restarted ` +
          `empty looks new); ${forgot}: ${again}`
        : `${marker} while other nodes serve locks or are in quarantine: it may have lost its ` +
          `memory, and the next lock call starts its quarantine; ${forgot}: ${again}`,
  };
}

/** A node init meant to mark, if the write did not: why. */
function afterWrite(report: InitReport, outcome: Outcome<unknown> | undefined): InitReport {
  if (report.action !== "marked" || outcome?.kind === "yes") return report;
  const reply = outcome?.kind === "no" ? (outcome.value as CheckReply) : undefined;
  return {
    ...report,
    action: reply?.[0] === initState.quarantined ? "left to recover" : "none",
    serves: "none yet",
    detail:
      outcome?.kind === "error"
        ? outcome.error.message
        : reply?.[0] === initState.quarantined
          ? "a lock call put it in quarantine while init ran: it serves it (the other nodes are in service)"
          : "it restarted or was flushed while init ran: it stays unmarked (run init() again)",
  };
}
