/**
 * What a POST /v1/ids asks for: the requests refused before their body is
 * read, and the count of IDs its body asks for.
 */
import type { IncomingMessage } from "node:http";
import { HttpError } from "./http-error.js";

/** `{"count": n}`, or an empty body for one ID; 400 naming what is wrong otherwise. */
export function countOf(body: string, max: number): number {
  if (body.trim() === "") return 1;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch (error) {
    throw new HttpError(400, "bad_json", `the body is not JSON (${(error as Error).message})`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new HttpError(400, "bad_body", 'expected a JSON object such as {"count": 10}');
  }
  for (const field of Object.keys(parsed)) {
    if (field !== "count") {
      throw new HttpError(
        400,
        "bad_body",
        `unknown field ${JSON.stringify(field)}: the only field is "count"`,
      );
    }
  }
  const count = "count" in parsed ? (parsed as { count: unknown }).count : 1;
  if (typeof count !== "number" || !Number.isInteger(count) || count < 1 || count > max) {
    // A number as the client wrote it: 1e400 parses to Infinity, which
    // JSON.stringify would show as null.
    const given =
      typeof count === "number"
        ? `${countAsWritten(body) ?? String(count)}${Number.isFinite(count) ? "" : " (not a finite number)"}`
        : JSON.stringify(count);
    throw new HttpError(
      400,
      "bad_count",
      `"count" is ${given}: expected an integer from 1 to ${max}`,
    );
  }
  return count;
}

/**
 * What POST /v1/ids refuses before reading the body: a query string (only
 * the body is read: `?count=5` would silently give one ID) and a
 * compressed body (it would be reported as bad JSON).
 */
export function requestRefusal(req: IncomingMessage): HttpError | undefined {
  const url = req.url ?? "";
  const query = url.indexOf("?");
  if (query >= 0) {
    const text = url.slice(query);
    const shown = text.length > 80 ? `${text.slice(0, 80)}…` : text;
    return new HttpError(
      400,
      "bad_query",
      `the query string ${JSON.stringify(shown)} is not read: POST /v1/ids reads only its JSON body, such as {"count": 10}`,
    );
  }
  const encoding = req.headers["content-encoding"];
  if (encoding !== undefined && encoding.trim().toLowerCase() !== "identity") {
    return new HttpError(
      415,
      "unsupported_encoding",
      `Content-Encoding ${JSON.stringify(encoding)} is not supported: send the JSON body uncompressed`,
    );
  }
  return undefined;
}

/** The last `"count": <number>` of a body as written, or undefined when it is not found. */
function countAsWritten(body: string): string | undefined {
  let last: string | undefined;
  for (const match of body.matchAll(/"count"\s*:\s*(-?[0-9][0-9.eE+-]*)/g)) last = match[1];
  return last;
}
