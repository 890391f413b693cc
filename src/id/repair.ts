/**
 * The ID counter's repair: which nodes are read (those that kept their
 * counter) and how the lost one is raised (repairScript, guarded by the
 * loss token), over the shared counter repair (quorum/counter-repair.ts,
 * which says why N - Q + 1 reads suffice). Who hears of a loss tells
 * `IdRepairs.nodeLost`; who must know the repaired value is told through
 * `onRepaired`.
 */
import type { Observer } from "../observe.js";
import { RepairScheduler, raiseFromOthers } from "../quorum/counter-repair.js";
import type { NodeGroup } from "../quorum/node-group.js";
import {
  type CounterLoss,
  counterStatus,
  counterValueOf,
  evalCounter,
  isAccepted,
  readMayLag,
  readScript,
  repairReply,
  repairScript,
} from "./counter.js";
import type { CounterKeys } from "./keys.js";
import type { ResolvedNextIdOptions } from "./options.js";

export interface IdRepairContext {
  readonly group: NodeGroup;
  readonly keys: CounterKeys;
  readonly observer: Observer;
  readonly options: Pick<
    ResolvedNextIdOptions,
    "clock" | "nodeTimeoutMs" | "repairDelayMs" | "onRepair"
  >;
  /** Told each value a node was raised to (at least every ID handed out), before `onRepair`. */
  readonly onRepaired: (value: bigint) => void;
}

/** The repairs of one NextId's counter. */
export class IdRepairs {
  private readonly context: IdRepairContext;
  private readonly scheduler: RepairScheduler;
  private count = 0;

  constructor(context: IdRepairContext) {
    this.context = context;
    const { clock, repairDelayMs, nodeTimeoutMs } = context.options;
    this.scheduler = new RepairScheduler(clock, repairDelayMs, nodeTimeoutMs);
  }

  /** How many lost node counters have been repaired. */
  get repairedCount(): number {
    return this.count;
  }

  /**
   * Node `index` answered that its counter is gone, in any reply (also one
   * that came after its round had ended: a round won without the node has
   * dropped it, and a slow node that lost its data would otherwise never be
   * repaired).
   */
  nodeLost(index: number, loss: CounterLoss): void {
    this.context.observer.node(
      this.context.group.nodes[index]!.endpoint,
      "needs repair",
      loss.status === counterStatus.suspect
        ? "restarted, or its data replaced in place"
        : "lost its ID counter",
    );
    this.scheduler.schedule(index, () => this.repair(index, loss.token));
  }

  /** Whether a repair is scheduled or running. */
  get pending(): boolean {
    return this.scheduler.pending;
  }

  /** Resolves once every repair scheduled so far has ended. */
  settled(): Promise<void> {
    return this.scheduler.settled();
  }

  /**
   * The NextId is closing: the repairs scheduled run when their delay ends
   * (RepairScheduler.finish: bounded), and no new one is scheduled.
   */
  finish(reason: unknown): Promise<void> {
    return this.scheduler.finish(reason);
  }

  /** One try: whether it is done (the node raised, or the loss no longer current). */
  private async repair(index: number, token: string): Promise<boolean> {
    const { group, keys, observer, options } = this.context;
    const { signal } = this.scheduler;
    const timeoutMs = options.nodeTimeoutMs;
    const result = await raiseFromOthers(
      group,
      index,
      {
        // Only nodes that kept their counter hold a value: a node that lost
        // its own is never read from.
        readOther: (node) =>
          evalCounter(node, readScript, keys, []).then((reply) =>
            isAccepted(reply)
              ? { value: counterValueOf(reply), mayLag: readMayLag(reply) }
              : undefined,
          ),
        raise: async (raised) => {
          // Through the group, so a node not checked on its connection is checked first.
          const skipped = Promise.resolve(repairReply.notApplied);
          const write = await group.round(
            (node) => node.evalScript(repairScript, keys, [raised.toString(), token]),
            {
              isYes: (reply) => reply === repairReply.applied,
              skip: (i) => (i === index ? undefined : skipped),
              stop: "all",
              signal,
              timeoutMs,
            },
          );
          const outcome = write.outcomes[index];
          if (outcome?.kind === "error") throw outcome.error;
          return outcome?.kind === "yes";
        },
      },
      { signal, timeoutMs },
    );
    if (result.kind !== "raised") return result.kind === "not current";
    const { value } = result;
    const endpoint = group.nodes[index]!.endpoint;
    this.context.onRepaired(value);
    this.count++;
    observer.node(endpoint, "repaired", `ID counter raised to ${value}`);
    options.onRepair({ endpoint, value });
    return true;
  }
}
