import { createHash } from "node:crypto";

/** A Lua script with its SHA1 computed once, sent with EVALSHA and loaded with EVAL on NOSCRIPT. */
export class LuaScript {
  readonly name: string;
  readonly source: string;
  readonly sha1: string;

  constructor(name: string, source: string) {
    this.name = name;
    this.source = source;
    this.sha1 = createHash("sha1").update(source).digest("hex");
  }
}

export function isNoScriptError(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith("NOSCRIPT");
}
