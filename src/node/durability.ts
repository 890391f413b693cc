/**
 * The durability check of a node that keeps IDs: every acknowledged write
 * must be on disk before the answer (seed 2), read with one CONFIG GET.
 * NodeGroup runs it at every (re)check of a node (as its `extraCheck`).
 */
import { DurabilityError } from "../errors.js";
import { configValue } from "./inspect.js";
import type { RedisNode } from "./redis-node.js";

/** A setting that must hold the value `required`, and what goes wrong otherwise. */
interface DurabilityRule {
  readonly setting: string;
  readonly required: string;
  readonly why: string;
}

const rules: readonly DurabilityRule[] = [
  {
    setting: "appendonly",
    required: "yes",
    why:
      "NextId needs appendonly yes and appendfsync always, or a restarted node can forget IDs it " +
      "acknowledged",
  },
  {
    setting: "appendfsync",
    required: "always",
    why: "NextId needs appendfsync always, or a power loss can make it forget IDs it acknowledged",
  },
  {
    // With "yes", Redis skips fsync while a rewrite or save child runs, even
    // with appendfsync always: an acknowledged write can be lost then.
    setting: "no-appendfsync-on-rewrite",
    required: "no",
    why:
      "Redis then skips fsync while it rewrites the AOF or saves a snapshot, so NextId needs " +
      "no-appendfsync-on-rewrite no",
  },
];

/**
 * `appendonly yes`, `appendfsync always` and `no-appendfsync-on-rewrite no`,
 * checked in that order; the first that fails throws a `DurabilityError`
 * naming it.
 */
export async function checkDurability(node: RedisNode, timeoutMs: number): Promise<void> {
  const reply = await readAppendSettings(node, timeoutMs);
  for (const { setting, required, why } of rules) {
    const value = configValue(reply, setting);
    if (value === required) continue;
    throw new DurabilityError(
      node.endpoint,
      setting,
      `${node.endpoint} has ${setting} ${value || "(unknown)"}: ${why} ` +
        "(pass unsafeAllowNonDurableNodes: true to accept the risk)",
    );
  }
}

/**
 * Whether the node keeps every acknowledged write across a restart: the
 * settings above all hold. False where they cannot be read (CONFIG
 * refused, renamed, or the call failed): a lock node that does not is put
 * in the restart quarantine when it restarts (lock/quarantine-scripts.ts,
 * certifyScript), the safe side, and a check must not fail for it.
 */
export async function keepsEveryWrite(node: RedisNode, timeoutMs: number): Promise<boolean> {
  let reply: unknown;
  try {
    reply = await readAppendSettings(node, timeoutMs);
  } catch {
    return false;
  }
  return rules.every(({ setting, required }) => configValue(reply, setting) === required);
}

/**
 * One round trip for the three settings (a pattern, so Redis 6.2 takes it
 * too): this runs again after every reconnect and recheck interval. A node
 * that refuses CONFIG cannot be checked, which is a `DurabilityError` too.
 */
async function readAppendSettings(node: RedisNode, timeoutMs: number): Promise<unknown> {
  try {
    return await node.command(["CONFIG", "GET", "*append*"], { timeoutMs });
  } catch (error) {
    const message =
      error instanceof Error
        ? error.cause instanceof Error
          ? error.cause.message
          : error.message
        : "";
    if (/unknown command|NOPERM|not allowed/i.test(message)) {
      throw new DurabilityError(
        node.endpoint,
        "CONFIG",
        `${node.endpoint} does not allow CONFIG GET (${message.trim()}), so its persistence cannot be checked: ` +
          "if it runs with appendonly yes and appendfsync always, pass unsafeAllowNonDurableNodes: true",
      );
    }
    throw error;
  }
}
