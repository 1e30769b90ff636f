/**
 * undici's Agent and fetch as an ESM module of named exports, for `import()` (guard.ts loads it at the
 * first guarded call). The package is CommonJS: imported lazily by name from a bundle split into
 * chunks (infra/constructs/function-bundle.ts), it would be a chunk with a default export only, and
 * `fetch` would be undefined; re-exported here by name, the chunk has them.
 */
export { Agent, fetch } from "undici";
