/** Reading a POST body, bounded in size. */
import type { IncomingMessage } from "node:http";
import { HttpError } from "./http-error.js";

/** The request body as text, refused with 413 once it passes `maxBytes` (also when Content-Length says so up front). */
export function readBody(req: IncomingMessage, maxBytes: number): Promise<string> {
  const tooLarge = () =>
    new HttpError(413, "body_too_large", `the body is larger than ${maxBytes} bytes, the limit`);
  const declared = Number(req.headers["content-length"]);
  if (declared > maxBytes) {
    req.resume();
    return Promise.reject(tooLarge());
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        req.removeAllListeners("data");
        req.resume();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    });
    req.once("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.once("error", reject);
    // A client gone mid-body: settle, so nothing waits for an end that never comes.
    req.once("close", () => {
      if (!req.complete) reject(new HttpError(400, "aborted", "the request ended before its body"));
    });
  });
}
