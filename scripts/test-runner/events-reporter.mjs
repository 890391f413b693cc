// node:test reporter for scripts/run-tests.mjs's summary: one JSON line per
// test result (full name "suite > test", pass or fail, a failure's first
// error line) appended to the file REDQUORUM_TEST_EVENTS names. Written
// synchronously, so a process forced to exit right after its last test
// (--test-force-exit) loses no line; it yields nothing to its destination.
import { appendFileSync } from "node:fs";

export default async function* events(source) {
  const path = process.env.REDQUORUM_TEST_EVENTS;
  const names = [];
  for await (const event of source) {
    const { type, data } = event;
    if (type === "test:start") {
      names.length = data.nesting;
      names.push(data.name);
      continue;
    }
    if (type !== "test:pass" && type !== "test:fail") continue;
    names.length = data.nesting;
    const record = {
      name: [...names, data.name].join(" > "),
      ok: type === "test:pass",
      ms: Math.round(data.details?.duration_ms ?? 0),
    };
    if (data.details?.type === "suite") record.suite = true;
    if (data.skip !== undefined || data.todo !== undefined) record.skipped = true;
    if (type === "test:fail") {
      record.kind = data.details?.error?.failureType;
      record.error = describe(data.details?.error);
    }
    if (path) appendFileSync(path, `${JSON.stringify(record)}\n`);
  }
  yield "";
}

/** The first line of what went wrong (and the next one when the first only introduces it: "…equal:"). */
function describe(error) {
  const cause = error?.cause;
  if (error?.failureType === "hookFailed" && cause) return `${error.message}: ${firstLine(cause)}`;
  return firstLine(cause && error?.failureType === "testCodeFailure" ? cause : error);
}

function firstLine(error) {
  const text = String(error?.message ?? error ?? "unknown error");
  const lines = text
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "");
  const first = lines[0] ?? text;
  return first.endsWith(":") && lines[1] ? `${first} ${lines[1]}` : first;
}
