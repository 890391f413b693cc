/**
 * "Act on a Redis command": what a proxy trigger matches and what it does.
 * redquorum runs its protocol as Lua scripts sent with EVALSHA (EVAL after
 * NOSCRIPT), so a command is named by the script it runs ("acquire",
 * "release", "id-propose", …), found from the SHA1 or the source.
 */
import { createHash } from "node:crypto";
import { fencedSetScript } from "../../../src/fencing/fenced-store.js";
import {
  fenceMaxReadScript,
  fenceRepairScript,
  fenceScript,
} from "../../../src/fencing/scripts.js";
import {
  certifyScript,
  initScript,
  proposeScript,
  readScript,
  repairScript,
} from "../../../src/id/counter.js";
import { acquireScript } from "../../../src/lock/acquire-script.js";
import { extendScript } from "../../../src/lock/extend-script.js";
import {
  horizonReadScript,
  judgeQuarantineScript,
  certifyScript as lockCertifyScript,
} from "../../../src/lock/quarantine-scripts.js";
import { leaveQueueScript, releaseScript } from "../../../src/lock/release-script.js";
import { initNodeScript } from "../../../src/node/node-state.js";

/** Every script redquorum sends, by SHA1: the names a trigger can match. */
const scriptsBySha1 = new Map(
  [
    acquireScript,
    extendScript,
    releaseScript,
    leaveQueueScript,
    horizonReadScript,
    judgeQuarantineScript,
    initNodeScript,
    proposeScript,
    readScript,
    repairScript,
    initScript,
    certifyScript,
    fenceScript,
    fenceMaxReadScript,
    lockCertifyScript,
    fenceRepairScript,
    fencedSetScript,
  ].map((script) => [script.sha1, script.name]),
);

/** The names `scriptIs` accepts (a typo must not make a trigger that never fires). */
export const scriptNames: readonly string[] = [...scriptsBySha1.values()];

/** A command as a trigger sees it, on one proxied connection. */
export interface ProxyCommand {
  /** Upper-cased command name: "EVALSHA", "SET", "PING". */
  readonly name: string;
  /** Every argument, the name included, as sent. */
  readonly args: readonly string[];
  /** The redquorum script it runs (EVALSHA/EVAL), or the function (FCALL). */
  readonly script: string | undefined;
  /** The keys of a script call (EVALSHA/EVAL/FCALL), else []. */
  readonly keys: readonly string[];
  /** Which client connection of the proxy sent it (1, 2, … in accept order). */
  readonly connectionId: number;
}

export function toCommand(args: readonly string[], connectionId: number): ProxyCommand {
  const name = (args[0] ?? "").toUpperCase();
  let script: string | undefined;
  let keys: readonly string[] = [];
  if (name === "EVALSHA" || name === "EVAL" || name === "FCALL" || name === "FCALL_RO") {
    const id = args[1] ?? "";
    if (name === "EVALSHA") script = scriptsBySha1.get(id.toLowerCase());
    else if (name === "EVAL")
      script = scriptsBySha1.get(createHash("sha1").update(id).digest("hex"));
    else script = id;
    const keyCount = Number(args[2]);
    if (Number.isInteger(keyCount) && keyCount >= 0) keys = args.slice(3, 3 + keyCount);
  }
  return { name, args, script, keys, connectionId };
}

/** Matches calls of the named redquorum scripts (e.g. `scriptIs("acquire")`). */
export function scriptIs(...names: string[]): (command: ProxyCommand) => boolean {
  for (const name of names) {
    if (!scriptNames.includes(name)) {
      throw new TypeError(
        `scriptIs: unknown script ${JSON.stringify(name)}; known: ${scriptNames.join(", ")}`,
      );
    }
  }
  return (command) => command.script !== undefined && names.includes(command.script);
}

/** Matches commands by name, case-insensitively (e.g. `commandIs("SET", "DEL")`). */
export function commandIs(...names: string[]): (command: ProxyCommand) => boolean {
  const upper = names.map((name) => name.toUpperCase());
  return (command) => upper.includes(command.name);
}

/**
 * What happens to the reply of a matching command (the command itself
 * always reaches the node and runs):
 * - `deliver`: nothing (use the hooks);
 * - `swallow`: the client never hears it; nor any later reply on that
 *   connection, which from then on carries requests only — one lost reply
 *   on a live TCP stream cannot happen, and dropping just one would pair
 *   every later reply with the wrong command;
 * - `reset`: the connection is reset (RST both ways) when the reply comes
 *   back, so the command ran and its reply is lost;
 * - `{ holdMs }`: the reply (and, to keep the order, those after it) is
 *   delivered `holdMs` after it came back.
 */
export type ReplyAction = "deliver" | "swallow" | "reset" | { readonly holdMs: number };

export interface TriggerSpec {
  readonly match: (command: ProxyCommand) => boolean;
  /** Default "deliver". */
  readonly reply?: ReplyAction;
  /**
   * Called when the command reaches the proxy, before it is forwarded; the
   * connection waits for it (e.g. `kill -9` the node: the command then
   * meets a dead node, as if the crash came just before it arrived).
   */
  readonly onCommand?: (command: ProxyCommand) => void | Promise<void>;
  /** Called when the reply comes back, before `reply` is applied; the connection waits for it. */
  readonly onReply?: (command: ProxyCommand, reply: string) => void | Promise<void>;
  /** How many matching commands to act on; then the trigger disarms. Default 1. */
  readonly times?: number;
}

/** An armed trigger: `fired` resolves with the first command it acted on. */
export interface Trigger {
  readonly fired: Promise<ProxyCommand>;
  /** How many commands it has acted on so far. */
  readonly count: number;
  /** Disarms it; replies already marked are still acted on. */
  remove(): void;
}

/** The proxy's side of a trigger. */
export class ArmedTrigger implements Trigger {
  count = 0;
  readonly fired: Promise<ProxyCommand>;
  private resolveFired!: (command: ProxyCommand) => void;
  private readonly timesMax: number;

  constructor(
    readonly spec: TriggerSpec,
    private readonly onRemove: (trigger: ArmedTrigger) => void,
  ) {
    if (typeof spec?.match !== "function") throw new TypeError("trigger: match must be a function");
    const reply = spec.reply ?? "deliver";
    const holdOk = typeof reply === "object" && Number.isFinite(reply.holdMs) && reply.holdMs >= 0;
    if (typeof reply !== "object" ? !["deliver", "swallow", "reset"].includes(reply) : !holdOk) {
      throw new TypeError(
        `trigger: reply must be "deliver", "swallow", "reset" or { holdMs ≥ 0 }, got ${JSON.stringify(reply)}`,
      );
    }
    this.timesMax = spec.times ?? 1;
    if (!(this.timesMax >= 1)) throw new TypeError(`trigger: times must be ≥ 1, got ${spec.times}`);
    this.fired = new Promise((resolve) => {
      this.resolveFired = resolve;
    });
  }

  /** Whether it acts on `command`; counts it if so. */
  take(command: ProxyCommand): boolean {
    if (this.count >= this.timesMax || !this.spec.match(command)) return false;
    this.count++;
    if (this.count === 1) this.resolveFired(command);
    if (this.count >= this.timesMax) this.onRemove(this);
    return true;
  }

  remove(): void {
    this.onRemove(this);
  }
}
