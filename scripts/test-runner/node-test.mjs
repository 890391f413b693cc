// node:test with a default timeout on every test and hook (register.mjs):
// a test that hangs fails after REDQUORUM_TEST_TIMEOUT_MS instead of
// holding its file, and so the whole run, until something kills it.
// Suites get none (their timeout would bound all their tests together).
import * as nodeTest from "node:test";

const timeout = Number(process.env.REDQUORUM_TEST_TIMEOUT_MS);
if (!Number.isSafeInteger(timeout) || timeout <= 0) {
  throw new Error(
    `REDQUORUM_TEST_TIMEOUT_MS must be a positive integer of milliseconds, got ${JSON.stringify(process.env.REDQUORUM_TEST_TIMEOUT_MS)}`,
  );
}

/** `(name?, options?, fn?)` with `timeout` in the options unless they set one. */
function withTimeout(args) {
  const at = typeof args[0] === "string" ? 1 : 0;
  const options = args[at];
  if (options !== null && typeof options === "object") {
    if (options.timeout !== undefined) return args;
    return [...args.slice(0, at), { ...options, timeout }, ...args.slice(at + 1)];
  }
  return [...args.slice(0, at), { timeout }, ...args.slice(at)];
}

function wrapTest(original) {
  const wrapped = (...args) => original(...withTimeout(args));
  for (const variant of ["skip", "todo", "only"]) {
    wrapped[variant] = (...args) => original[variant](...withTimeout(args));
  }
  return wrapped;
}

function wrapHook(original) {
  return (fn, options) => original(fn, { ...options, timeout: options?.timeout ?? timeout });
}

export const test = wrapTest(nodeTest.test);
export const it = wrapTest(nodeTest.it);
export const describe = nodeTest.describe;
export const suite = nodeTest.suite;
export const before = wrapHook(nodeTest.before);
export const after = wrapHook(nodeTest.after);
export const beforeEach = wrapHook(nodeTest.beforeEach);
export const afterEach = wrapHook(nodeTest.afterEach);
export const { mock, run, skip, todo, only } = nodeTest;
export default test;
