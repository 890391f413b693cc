/**
 * One client connection through the fault proxy, and its connection to the
 * node. Commands are parsed on the way in and replies on the way back, and
 * paired in order (Redis answers each command on a connection in the order
 * sent), so a trigger can act on the reply of the very command it matched.
 */
import { createConnection, type Socket } from "node:net";
import { Pipe, type StreamConditions, type Verdict } from "./pipe.js";
import { commandArgs, describeFrame, isPush, RespSplitter } from "./resp.js";
import type { ArmedTrigger, ProxyCommand } from "./triggers.js";
import { toCommand } from "./triggers.js";

/** What a link needs from its proxy. */
export interface LinkContext {
  targetPort(): number;
  conditions(direction: "up" | "down"): StreamConditions;
  partitioned(): boolean;
  slowCloseMs(): number;
  random(): number;
  /** The first armed trigger that takes this command, if any. */
  takeTrigger(command: ProxyCommand): ArmedTrigger | undefined;
  /** A trigger acted on a reply: for the fault log. */
  noteReply(fault: string, command: ProxyCommand, reply: string, holdMs?: number): () => void;
  closed(link: Link): void;
  failed(error: unknown): void;
  /** Runs a trigger's hook; a hook that throws is reported, and the traffic goes on. */
  runHook(name: string, command: ProxyCommand, hook: () => void | Promise<void>): Promise<void>;
}

/** Commands after which replies are no longer one per command: stop pairing. */
function endsPairing(command: ProxyCommand): boolean {
  if (["SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "MONITOR"].includes(command.name)) return true;
  // CLIENT REPLY OFF / SKIP: commands without replies.
  const [sub, mode] = command.args.slice(1).map((arg) => arg.toUpperCase());
  return command.name === "CLIENT" && sub === "REPLY" && mode !== "ON";
}

interface Awaiting {
  readonly command: ProxyCommand;
  readonly trigger: ArmedTrigger | undefined;
}

export class Link {
  readonly upstream: Socket;
  private readonly up: Pipe;
  private readonly down: Pipe;
  private readonly commands = new RespSplitter({ inline: true });
  private readonly replies = new RespSplitter();
  private readonly awaiting: Awaiting[] = [];
  /** Replies are not paired any more (pub/sub, MONITOR, CLIENT REPLY, not RESP). */
  private unpaired = false;
  private finished = false;

  constructor(
    readonly id: number,
    readonly client: Socket,
    private readonly context: LinkContext,
  ) {
    this.upstream = createConnection({ host: "127.0.0.1", port: context.targetPort() });
    client.setNoDelay(true);
    this.upstream.setNoDelay(true);
    const hooks = (direction: "up" | "down") => ({
      conditions: () => context.conditions(direction),
      blocked: () => context.partitioned(),
      random: () => context.random(),
      reset: (reason: "action" | "limit") => (reason === "limit" ? this.close() : this.reset()),
      failed: (error: unknown) => {
        context.failed(error);
        this.reset();
      },
    });
    this.up = new Pipe(this.upstream, hooks("up"));
    this.down = new Pipe(client, hooks("down"));
    if (context.partitioned()) this.hold();
    client.on("data", (chunk: Buffer) => this.fromClient(chunk));
    this.upstream.on("data", (chunk: Buffer) => this.fromNode(chunk));
    // The node went away (killed, restarted): the client hears it after the
    // replies already on their way, as it would from the node itself.
    let upstreamError = false;
    this.upstream.on("error", () => {
      upstreamError = true;
    });
    this.upstream.on("close", () => void this.mirrorClose(this.down, client, upstreamError));
    let clientError = false;
    client.on("error", () => {
      clientError = true;
    });
    client.on("close", () => void this.mirrorClose(this.up, this.upstream, clientError));
  }

  /** A partition began: stop reading both ways; the kernel buffers, as a dead path does. */
  hold(): void {
    this.client.pause();
    this.upstream.pause();
  }

  /** The partition healed: what was sent meanwhile flows now, in order. */
  release(): void {
    this.client.resume();
    this.upstream.resume();
    this.up.wake();
    this.down.wake();
  }

  /** Conditions changed: re-read them now rather than after the current wait. */
  wake(): void {
    this.up.wake();
    this.down.wake();
  }

  /** RST to both the client and the node. */
  reset(): void {
    if (this.finished) return;
    this.finish();
    this.client.resetAndDestroy();
    this.upstream.resetAndDestroy();
  }

  /** FIN to both, after what was written (limit_data). */
  close(): void {
    if (this.finished) return;
    this.finish();
    this.client.end(() => this.client.destroy());
    this.upstream.end(() => this.upstream.destroy());
  }

  destroy(): void {
    if (this.finished) return;
    this.finish();
    this.client.destroy();
    this.upstream.destroy();
  }

  private finish(): void {
    this.finished = true;
    this.up.stop();
    this.down.stop();
    this.context.closed(this);
  }

  private async mirrorClose(pipe: Pipe, other: Socket, withError: boolean): Promise<void> {
    if (this.finished) return;
    await pipe.idle();
    const slowCloseMs = this.context.slowCloseMs();
    // Unref'd: a proxy closed meanwhile must not keep the process alive for it.
    if (slowCloseMs > 0) await new Promise((resolve) => setTimeout(resolve, slowCloseMs).unref());
    if (this.finished) return;
    this.finish();
    if (withError) other.resetAndDestroy();
    else other.end(() => other.destroy());
    // The side that closed is gone already; make sure of it.
    (other === this.client ? this.upstream : this.client).destroy();
  }

  private fromClient(chunk: Buffer): void {
    for (const frame of this.commands.push(chunk)) {
      if (this.commands.broken) {
        this.unpaired = true;
        this.up.push(frame);
        continue;
      }
      let args: string[];
      try {
        args = commandArgs(frame);
      } catch {
        this.unpaired = true;
        this.up.push(frame);
        continue;
      }
      const command = toCommand(args, this.id);
      const trigger = this.unpaired ? undefined : this.context.takeTrigger(command);
      if (!this.unpaired) this.awaiting.push({ command, trigger });
      if (endsPairing(command)) this.unpaired = true;
      const onCommand = trigger?.spec.onCommand;
      this.up.push(frame, {
        ...(onCommand && {
          action: async (): Promise<Verdict> => {
            await this.context.runHook("onCommand", command, () => onCommand(command));
            return "deliver";
          },
        }),
      });
    }
  }

  private fromNode(chunk: Buffer): void {
    for (const frame of this.replies.push(chunk)) {
      if (this.replies.broken) this.unpaired = true;
      if (this.unpaired || isPush(frame)) {
        this.down.push(frame);
        continue;
      }
      const awaiting = this.awaiting.shift();
      if (!awaiting?.trigger) {
        this.down.push(frame);
        continue;
      }
      this.replyFor(frame, awaiting.command, awaiting.trigger);
    }
  }

  private replyFor(frame: Buffer, command: ProxyCommand, trigger: ArmedTrigger): void {
    const reply = describeFrame(frame);
    const action = trigger.spec.reply ?? "deliver";
    const holdMs = typeof action === "object" ? action.holdMs : 0;
    const endHold =
      holdMs > 0 ? this.context.noteReply("reply-held", command, reply, holdMs) : undefined;
    this.down.push(frame, {
      holdMs,
      action: async (): Promise<Verdict> => {
        const onReply = trigger.spec.onReply;
        if (onReply) await this.context.runHook("onReply", command, () => onReply(command, reply));
        endHold?.();
        if (action === "swallow") {
          this.context.noteReply("reply-swallowed", command, reply);
          this.down.mute();
          return "drop";
        }
        if (action === "reset") {
          this.context.noteReply("reset-after-command", command, reply);
          return "reset";
        }
        return "deliver";
      },
    });
  }
}
