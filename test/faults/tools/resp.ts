/**
 * Just enough RESP (2 and 3) for the fault proxy: where one frame ends in a
 * byte stream, so that replies can be paired with the commands that caused
 * them, and a command's arguments, so that a trigger can recognise it. The
 * proxy forwards the original bytes; nothing here re-encodes a frame.
 */

/** The stream is not RESP: the proxy cannot pair replies with commands any more. */
export class RespProtocolError extends Error {
  override readonly name = "RespProtocolError";
}

/** Nesting deeper than this is not a Redis reply but a broken stream (and a stack guard). */
const depthMax = 64;

const lineTypes = new Set(["+", "-", ":", "_", ",", "(", "#"]);
const blobTypes = new Set(["$", "!", "="]);
const listTypes = new Set(["*", "~", ">"]);
const mapTypes = new Set(["%", "|"]);

/**
 * The offset just past the frame that starts at `start`, or `undefined` when
 * `buffer` does not hold all of it yet. With `inline`, a line that starts
 * with no RESP type byte is an inline command (`PING\r\n`, as redis-cli and
 * probes send it); servers never reply that way.
 */
export function frameEnd(
  buffer: Buffer,
  start: number,
  inline = false,
  depth = 0,
): number | undefined {
  if (depth > depthMax) throw new RespProtocolError(`frames nested deeper than ${depthMax}`);
  if (start >= buffer.length) return undefined;
  const type = String.fromCharCode(buffer[start]!);
  if (lineTypes.has(type)) return lineEnd(buffer, start);
  if (blobTypes.has(type)) {
    const header = readHeader(buffer, start);
    if (!header) return undefined;
    if (header.count < 0) return header.end; // $-1: null
    const end = header.end + header.count + 2;
    return end <= buffer.length ? end : undefined;
  }
  if (listTypes.has(type) || mapTypes.has(type)) {
    const header = readHeader(buffer, start);
    if (!header) return undefined;
    let offset = header.end;
    const items = mapTypes.has(type) ? header.count * 2 : header.count;
    for (let i = 0; i < items; i++) {
      const next = frameEnd(buffer, offset, false, depth + 1);
      if (next === undefined) return undefined;
      offset = next;
    }
    // An attribute (RESP3 `|`) annotates the reply that follows it: one unit.
    return type === "|" ? frameEnd(buffer, offset, false, depth + 1) : offset;
  }
  if (inline && depth === 0) {
    const newline = buffer.indexOf(10, start);
    return newline < 0 ? undefined : newline + 1;
  }
  throw new RespProtocolError(
    `unexpected byte 0x${buffer[start]!.toString(16).padStart(2, "0")} at the start of a frame`,
  );
}

function lineEnd(buffer: Buffer, start: number): number | undefined {
  const cr = buffer.indexOf("\r\n", start);
  return cr < 0 ? undefined : cr + 2;
}

/** `<type><integer>\r\n`: the integer and the offset after the line. */
function readHeader(buffer: Buffer, start: number): { count: number; end: number } | undefined {
  const end = lineEnd(buffer, start);
  if (end === undefined) return undefined;
  const text = buffer.toString("latin1", start + 1, end - 2);
  if (!/^-?\d+$/.test(text)) {
    throw new RespProtocolError(`bad length ${JSON.stringify(text)} after ${buffer[start]}`);
  }
  return { count: Number(text), end };
}

/**
 * Cuts a byte stream into whole frames, whatever the TCP chunking: feed it
 * chunks as they come, get back every frame completed so far, in order.
 */
export class RespSplitter {
  /** Why the stream stopped being parsed, if it did. */
  broken: RespProtocolError | undefined;
  private pending: Buffer = Buffer.alloc(0);
  private readonly inline: boolean;
  private readonly frameBytesMax: number;

  /**
   * @param options.inline accept inline commands (the client → server side).
   * @param options.frameBytesMax a frame still incomplete past this size is
   *   an error, not a buffer that grows forever. Default 64 MiB.
   */
  constructor(options: { inline?: boolean; frameBytesMax?: number } = {}) {
    this.inline = options.inline ?? false;
    this.frameBytesMax = options.frameBytesMax ?? 64 * 1024 * 1024;
  }

  /** Bytes received that do not make a whole frame yet. */
  get bufferedBytes(): number {
    return this.pending.length;
  }

  /**
   * Whole frames completed by `chunk`, in order. Once the stream turns out
   * not to be RESP (or a frame outgrows `frameBytesMax`), the rest comes
   * back as one last unparsed element, every later chunk as it is, and
   * `broken` says why: a proxy keeps forwarding and stops pairing.
   */
  push(chunk: Buffer): Buffer[] {
    if (this.broken) return [chunk];
    const buffer = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    const frames: Buffer[] = [];
    let offset = 0;
    try {
      for (;;) {
        const end = frameEnd(buffer, offset, this.inline);
        if (end === undefined) break;
        frames.push(buffer.subarray(offset, end));
        offset = end;
      }
      if (buffer.length - offset > this.frameBytesMax) {
        throw new RespProtocolError(
          `a frame is still incomplete after ${buffer.length - offset} bytes (max ${this.frameBytesMax})`,
        );
      }
    } catch (error) {
      if (!(error instanceof RespProtocolError)) throw error;
      this.broken = error;
      frames.push(buffer.subarray(offset));
      this.pending = Buffer.alloc(0);
      return frames;
    }
    this.pending = buffer.subarray(offset);
    return frames;
  }
}

/**
 * A command's arguments from one client frame: an array of bulk strings,
 * or an inline command. Arguments are decoded as UTF-8 (script bodies and
 * key names are text in redquorum; binary values only need to not throw).
 */
export function commandArgs(frame: Buffer): string[] {
  if (frame[0] !== 0x2a /* * */) {
    return frame.toString("utf8").trim().split(/\s+/).filter(Boolean);
  }
  const head = readHeader(frame, 0)!;
  const args: string[] = [];
  let offset = head.end;
  for (let i = 0; i < head.count; i++) {
    if (frame[offset] !== 0x24 /* $ */) {
      throw new RespProtocolError("a command is an array of bulk strings");
    }
    const bulk = readHeader(frame, offset)!;
    args.push(frame.toString("utf8", bulk.end, bulk.end + bulk.count));
    offset = bulk.end + bulk.count + 2;
  }
  return args;
}

/** One line for logs: the reply's type and the start of its first line (`-NOSCRIPT …`, `:1`). */
export function describeFrame(frame: Buffer, charsMax = 60): string {
  const cr = frame.indexOf("\r\n");
  const line = frame.toString("utf8", 0, cr < 0 ? frame.length : cr);
  return line.length > charsMax ? `${line.slice(0, charsMax)}…` : line;
}

/** Whether a reply frame is a RESP3 push (`>`): not the answer to any command. */
export function isPush(frame: Buffer): boolean {
  return frame[0] === 0x3e;
}

/** Encodes a command as clients do (tests and tools that talk to a node directly). */
export function encodeCommand(args: readonly string[]): Buffer {
  return Buffer.from(
    `*${args.length}\r\n${args.map((arg) => `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`).join("")}`,
  );
}
