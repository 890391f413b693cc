/**
 * Builds histories by hand for the checkers' tests: one call per operation
 * (its invocation and completion), faults and samples, sorted by time on
 * `build()` the way readHistory sorts a file.
 */

import type { HistoryEvent, OpEvent, OpName } from "../history.js";

export interface Completion {
  /** Default "ok"; "none" leaves the operation without a completion (the process died). */
  readonly type?: "ok" | "fail" | "info" | "none";
  readonly value?: Record<string, unknown>;
  readonly code?: string;
  /** On "ok": the process's last timer turn before the record (history.ts). */
  readonly timerTurnMs?: number;
}

export class HistoryBuilder {
  private readonly events: HistoryEvent[] = [];
  private readonly opIds = new Map<string, number>();

  op(
    process: string,
    op: OpName,
    resource: string | undefined,
    span: readonly [number, number],
    args: Record<string, unknown> | undefined,
    completion: Completion = {},
  ): this {
    const opId = this.opIds.get(process) ?? 0;
    this.opIds.set(process, opId + 1);
    const base = { kind: "op" as const, process, opId, op, resource };
    this.events.push({ ...base, type: "invoke", timeMs: span[0], value: args });
    const type = completion.type ?? "ok";
    if (type === "none") return this;
    const done: OpEvent = { ...base, type, timeMs: span[1] };
    if (type === "ok") {
      const { timerTurnMs } = completion;
      this.events.push({
        ...done,
        value: completion.value,
        ...(timerTurnMs === undefined ? {} : { timerTurnMs }),
      });
    } else {
      const code = completion.code ?? (type === "fail" ? "ERR_QUORUM" : "ERR_TIMEOUT");
      this.events.push({ ...done, error: { code, message: `${code} in a test` } });
    }
    return this;
  }

  /** An acquire returning at span[1], valid until `validUntilMs` (default: span[1] + 1000). */
  acquire(
    process: string,
    resource: string,
    span: readonly [number, number],
    options: {
      fence?: number | string;
      validUntilMs?: number;
      type?: Completion["type"];
      timerTurnMs?: number;
    } = {},
  ): this {
    const value: Record<string, unknown> = { validUntilMs: options.validUntilMs ?? span[1] + 1000 };
    if (options.fence !== undefined) value.fence = String(options.fence);
    const { type, timerTurnMs } = options;
    return this.op(process, "acquire", resource, span, {}, { type, value, timerTurnMs });
  }

  release(process: string, resource: string, span: readonly [number, number]): this {
    return this.op(process, "release", resource, span, {});
  }

  /** A hold: acquire at start (returning immediately) and release at end. */
  hold(process: string, resource: string, startMs: number, endMs: number, fence?: number): this {
    return this.acquire(process, resource, [startMs - 1, startMs], { fence }).release(
      process,
      resource,
      [endMs, endMs + 1],
    );
  }

  use(
    process: string,
    resource: string,
    span: readonly [number, number],
    completion: Completion = {},
  ): this {
    return this.op(process, "use", resource, span, {}, completion);
  }

  read(process: string, resource: string, span: readonly [number, number], value: number): this {
    return this.op(process, "read", resource, span, {}, { value: { value } });
  }

  write(
    process: string,
    resource: string,
    span: readonly [number, number],
    value: number,
    options: { fence?: number; type?: Completion["type"]; code?: string } = {},
  ): this {
    const args: Record<string, unknown> = { value };
    if (options.fence !== undefined) args.fence = String(options.fence);
    return this.op(process, "write", resource, span, args, {
      type: options.type,
      code: options.code,
    });
  }

  ids(
    process: string,
    span: readonly [number, number],
    ids: ReadonlyArray<number | bigint> | "fail" | "info" | "none",
  ): this {
    if (typeof ids === "string")
      return this.op(process, "ids", undefined, span, { count: 1 }, { type: ids });
    return this.op(
      process,
      "ids",
      undefined,
      span,
      { count: ids.length },
      { value: { ids: ids.map(String) } },
    );
  }

  fault(fault: string, target: string, startMs: number, endMs?: number): this {
    const faultId = this.events.filter((e) => e.kind === "fault" && e.phase === "start").length;
    this.events.push({ kind: "fault", phase: "start", faultId, fault, target, timeMs: startMs });
    if (endMs !== undefined) {
      this.events.push({ kind: "fault", phase: "end", faultId, fault, target, timeMs: endMs });
    }
    return this;
  }

  sample(process: string, timeMs: number, values: Record<string, number>): this {
    this.events.push({ kind: "sample", process, timeMs, values });
    return this;
  }

  build(): HistoryEvent[] {
    return [...this.events].sort((a, b) => a.timeMs - b.timeMs);
  }
}
