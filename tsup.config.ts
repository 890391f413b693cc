import { defineConfig } from "tsup";

export default defineConfig([
  {
    // The library, and the node-redlock drop-in ("redquorum/node-redlock").
    entry: { index: "src/index.ts", "node-redlock": "src/compat/node-redlock.ts" },
    format: ["esm", "cjs"],
    // stripInternal: members tagged @internal (Lock's and Redlock's plumbing)
    // stay out of the published .d.ts.
    dts: { compilerOptions: { stripInternal: true } },
    sourcemap: true,
    clean: true,
    target: "node20",
    platform: "node",
  },
  {
    // The `redquorum` command line (package.json "bin"): ESM only, one file,
    // and the guard `redquorum lock` starts beside it (src/cli/guard.ts).
    entry: { cli: "src/cli/main.ts", "cli-guard": "src/cli/guard.ts" },
    format: ["esm"],
    banner: { js: "#!/usr/bin/env node" },
    sourcemap: true,
    target: "node20",
    platform: "node",
  },
]);
