import { defineConfig } from "tsup";

export default defineConfig({
  entry: ["src/index.ts"],
  format: ["esm", "cjs"],
  // stripInternal: members tagged @internal (Lock's and Redlock's plumbing)
  // stay out of the published .d.ts.
  dts: { compilerOptions: { stripInternal: true } },
  sourcemap: true,
  clean: true,
  target: "node20",
  platform: "node",
});
