/**
 * The one function that runs a lock or fencing script and reads what a
 * node answers: a quarantine or unknown counters become that node's typed
 * error, and the guard hears of the loss.
 */

import { parseCounter } from "../decimal.js";
import { NodeError } from "../errors.js";
import { fenceReply } from "../fencing/scripts.js";
import type { LuaScript } from "../node/lua-script.js";
import { quarantineReply, restartedMarkerPrefix, unjudgedPrefix } from "../node/node-state.js";
import type { RedisNode } from "../node/redis-node.js";
import type { Observer } from "../observe.js";
import { isGrantCode } from "./acquire-reply.js";

/** Runs a lock or fencing script on node `index` and reads its reply. */
export type ScriptRunner = (
  node: RedisNode,
  index: number,
  script: LuaScript,
  keys: readonly string[],
  args: readonly string[],
) => Promise<unknown>;

export interface ScriptGuard {
  readonly observer: Observer;
  /** The quarantine in ms (lock/horizon.ts), for the error's text. */
  readonly quarantineMs: number;
  /** Told of a node that may have lost its memory (`marker` names the loss): fencing repairs it. */
  onMemoryLoss(index: number, marker: string): void;
  /** Told of a node whose quarantine waits for its length (lock/quarantine-judge.ts). */
  onUnjudged(index: number, marker: string): void;
}

/**
 * A runner for the lock and fencing scripts. A node in quarantine
 * ({quarantined, marker}), or whose fencing counters are unknown ({unknown,
 * marker}: it lost its memory), is a failed vote that says so, and the
 * guard is told of the loss. A reply that is not what the scripts answer (a
 * counter that is not a decimal) is that node's error too: nothing a node
 * says escapes untyped.
 */
export function guardedRunner(guard: ScriptGuard): ScriptRunner {
  return (node, index, script, keys, args) =>
    node.evalScript(script, keys, args).then((reply) => checkedReply(guard, node, index, reply));
}

function checkedReply(guard: ScriptGuard, node: RedisNode, index: number, reply: unknown) {
  if (!Array.isArray(reply)) return reply;
  const [code, marker] = reply as [unknown, unknown];
  if (code === fenceReply.unknown) {
    guard.observer.node(
      node.endpoint,
      "needs repair",
      `fencing counters unknown (marker ${String(marker)})`,
    );
    guard.onMemoryLoss(index, String(marker));
    // A restart (its marker says so) kept the counters, which may have come
    // back older; a node without them lost its memory.
    const restarted = String(marker).startsWith(restartedMarkerPrefix);
    const repair =
      "a repair from the other nodes is scheduled (it needs N - Q + 1 of them with known " +
      "counters; if more nodes lost theirs, see redlock.raiseFencingFloor / redquorum fencing-floor";
    throw new NodeError(
      node.endpoint,
      new Error(
        restarted
          ? "fencing counters unknown: the node restarted (a new run_id), and its counters may " +
              `have come back older; ${repair})`
          : `fencing counters unknown: the node lost its memory, and ${repair}; if these are new ` +
              "nodes that never held a fenced lock, call redlock.init({ liftQuarantines: true }) " +
              "once: redquorum init --lift-quarantines)",
      ),
    );
  }
  if (code === quarantineReply.quarantined) {
    guard.observer.node(node.endpoint, "quarantined", "it may have lost its memory");
    guard.onMemoryLoss(index, String(marker));
    if (String(reply[2]).startsWith(unjudgedPrefix)) guard.onUnjudged(index, String(marker));
    throw new NodeError(
      node.endpoint,
      new Error(
        "quarantined: it may have lost lock keys (no redquorum marker: restarted without its data, " +
          "or flushed; or restarted from data that may be older, without appendfsync always), " +
          `and stays out of service for the longest maxTtlMs of the cluster's clients (${guard.quarantineMs} ms or more); ` +
          "if these are new nodes that never held a lock, call redlock.init({ liftQuarantines: true }) once " +
          "(redquorum init --lift-quarantines)",
      ),
    );
  }
  if (code === fenceReply.counted || isGrantCode(code)) {
    // {code, current_1, accepted_1, ...}: every current value is a counter.
    try {
      for (let i = 1; i < reply.length; i += 2) parseCounter(reply[i]);
    } catch (error) {
      throw new NodeError(node.endpoint, error);
    }
  }
  return reply;
}
