// Module resolution hook (see register.mjs): "node:test" → node-test.mjs,
// except for node-test.mjs itself, which wraps the real module.
const wrapper = new URL("./node-test.mjs", import.meta.url).href;

export function resolve(specifier, context, nextResolve) {
  if (specifier === "node:test" && context.parentURL !== wrapper) {
    return { url: wrapper, shortCircuit: true };
  }
  return nextResolve(specifier, context);
}
