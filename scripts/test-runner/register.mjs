// Loaded into every test process by scripts/run-tests.mjs (`--import`):
// Node 20 cannot give each test a default timeout (its --test-timeout
// bounds a whole file), so imports of "node:test" resolve to a copy whose
// tests and hooks get REDQUORUM_TEST_TIMEOUT_MS unless they set their own.
import { register } from "node:module";

register("./resolve-node-test.mjs", import.meta.url);
