import { defineConfig } from "tsup";

export default defineConfig([
  {
    entry: ["src/index.ts"],
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
    // The `redquorum` command line (package.json "bin"): ESM only, one file.
    entry: { cli: "src/cli/main.ts" },
    format: ["esm"],
    banner: { js: "#!/usr/bin/env node" },
    sourcemap: true,
    target: "node20",
    platform: "node",
  },
]);
