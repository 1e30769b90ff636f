// V8 flags the `arbor` command sets for itself, first thing, before any code is optimised.
//
// --no-turbo-inline-js-wasm-calls, on V8 11 (Node 20; checked on 20.20.2, V8 11.3.244.8-node.38):
// TurboFan inlines a JS-to-Wasm call into the JS function that makes it. If that function is
// deoptimised lazily while the Wasm code runs (the Wasm code calls back into JS, and that JS
// invalidates an assumption the caller's optimised code made), V8 resumes it through a builtin
// continuation that only knows i32/i64/f32/f64 results. A Wasm function returning a JS value
// (externref) then kills the process: "Fatal error ... unreachable code" in
// Deoptimizer::DoComputeBuiltinContinuation (the UNREACHABLE is in
// Deoptimizer::TranslatedValueForWasmReturnKind). Cedar's wasm-bindgen glue
// (`@cedar-policy/cedar-wasm`, `statefulIsAuthorized`: externref in, externref out), called for
// every policy decision, is such a call: `arbor serve` died after 2,000-3,000 requests of
// `npm run bench:sustained`. Without the inlining, JS-to-Wasm calls go through the wrapper, which
// costs nothing next to Cedar's own work.
//
// test/unit/v8-js-wasm-deopt.test.ts makes the crash happen in a second: remove this flag
// when the Node versions Arbor supports (package.json "engines") no longer crash without it.
// V8 12 and later (Node 22+, the Lambda runtime) are left alone: the flag is not set there.
import { setFlagsFromString } from "node:v8";

/** The flags set in this process (empty when its V8 needs none). */
export const V8_WORKAROUND_FLAGS = process.versions.v8.startsWith("11.")
  ? ["--no-turbo-inline-js-wasm-calls"]
  : [];

for (const flag of V8_WORKAROUND_FLAGS) setFlagsFromString(flag);
