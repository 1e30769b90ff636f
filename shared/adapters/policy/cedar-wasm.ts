/**
 * Cedar's wasm module as an ESM module of named exports, for `import()` (cedar-policy-engine.ts loads
 * it at the first decision). The package is CommonJS: imported lazily by name from a bundle split into
 * chunks (infra/constructs/function-bundle.ts), it would be a chunk with a default export only, and
 * its functions would be undefined; re-exported here by name, the chunk has them.
 */
export { preparsePolicySet, statefulIsAuthorized } from "@cedar-policy/cedar-wasm/nodejs";
