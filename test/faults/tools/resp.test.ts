import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { commandArgs, encodeCommand, frameEnd, RespProtocolError, RespSplitter } from "./resp.js";

/** Payload text rich in bytes that look like RESP (CR, LF, type bytes, digits, multi-byte). */
const tricky = fc.string({
  unit: fc.constantFrom("a", "\r", "\n", "\r\n", "$", "*", "3", "-", "é"),
});

/** Any RESP2/RESP3 frame a server can send, encoded; nesting bounded so runs stay fast. */
const frame: fc.Arbitrary<string> = fc.letrec<{ frame: string }>((tie) => ({
  frame: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.string({ unit: "grapheme-ascii" }).map((s) => `+${s.replace(/[\r\n]/g, "")}\r\n`),
    fc.string().map((s) => `-ERR ${s.replace(/[\r\n]/g, "")}\r\n`),
    fc.integer().map((n) => `:${n}\r\n`),
    fc.constant("_\r\n"),
    fc.constant("$-1\r\n"),
    fc.constant("*-1\r\n"),
    // Bulk payloads may hold CR, LF and bytes that look like headers.
    tricky.map((s) => `$${Buffer.byteLength(s)}\r\n${s}\r\n`),
    tricky.map((s) => `=${Buffer.byteLength(s) + 4}\r\ntxt:${s}\r\n`),
    fc
      .array(tie("frame"), { maxLength: 4 })
      .map((items) => `*${items.length}\r\n${items.join("")}`),
    fc
      .array(tie("frame"), { maxLength: 3 })
      .map((items) => `>${items.length}\r\n${items.join("")}`),
    fc
      .array(fc.tuple(tie("frame"), tie("frame")), { maxLength: 2 })
      .map((pairs) => `%${pairs.length}\r\n${pairs.flat().join("")}`),
  ),
})).frame;

/** Cuts `bytes` at the given points (any order, duplicates allowed). */
function split(bytes: Buffer, cuts: number[]): Buffer[] {
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  const chunks: Buffer[] = [];
  let last = 0;
  for (const point of [...points, bytes.length]) {
    chunks.push(bytes.subarray(last, point));
    last = point;
  }
  return chunks;
}

describe("RESP splitter", () => {
  it("any split of a valid stream gives the same frames", () => {
    fc.assert(
      fc.property(
        fc.array(frame, { minLength: 1, maxLength: 8 }),
        fc.array(fc.nat(), { maxLength: 20 }),
        (frames, cuts) => {
          const bytes = Buffer.from(frames.join(""));
          const splitter = new RespSplitter();
          const got = split(bytes, cuts).flatMap((chunk) => splitter.push(chunk));
          assert.deepEqual(
            got.map((f) => f.toString()),
            frames,
          );
          assert.equal(splitter.bufferedBytes, 0);
        },
      ),
      { numRuns: 500 },
    );
  });

  it("one byte at a time, a pipelined stream of commands and an inline one", () => {
    const stream = Buffer.concat([
      encodeCommand(["SET", "k", "a\r\nb"]),
      Buffer.from("PING\r\n"),
      encodeCommand(["EVALSHA", "abc", "1", "k"]),
    ]);
    const splitter = new RespSplitter({ inline: true });
    const frames = [...stream].flatMap((byte) => splitter.push(Buffer.from([byte])));
    assert.deepEqual(frames.map(commandArgs), [
      ["SET", "k", "a\r\nb"],
      ["PING"],
      ["EVALSHA", "abc", "1", "k"],
    ]);
  });

  it("an attribute and the reply it annotates are one frame", () => {
    const bytes = Buffer.from("|1\r\n+ttl\r\n:3\r\n:42\r\n+OK\r\n");
    assert.equal(frameEnd(bytes, 0), bytes.length - 5);
  });

  it("rejects bytes that are not RESP, naming the byte", () => {
    const splitter = new RespSplitter();
    assert.deepEqual(splitter.push(Buffer.from("+OK\r\nhello\r\n")).map(String), [
      "+OK\r\n",
      "hello\r\n",
    ]);
    assert.ok(splitter.broken instanceof RespProtocolError);
    assert.match(splitter.broken.message, /0x68/);
    // From then on, chunks pass as they are.
    assert.deepEqual(splitter.push(Buffer.from("x")).map(String), ["x"]);
    const badLength = new RespSplitter();
    badLength.push(Buffer.from("$x\r\n"));
    assert.match(String(badLength.broken?.message), /bad length/);
  });

  it("bounds a frame that never completes", () => {
    const splitter = new RespSplitter({ frameBytesMax: 16 });
    splitter.push(Buffer.from(`$100\r\n${"x".repeat(20)}`));
    assert.match(String(splitter.broken?.message), /incomplete/);
  });
});
