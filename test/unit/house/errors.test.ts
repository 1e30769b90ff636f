import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * Every error product code throws is an ArborError (shared/kernel/errors.ts), with a code that the
 * one table of shared/kernel/error-edges.ts maps at every edge: no bare `new Error(...)` (nor
 * TypeError, RangeError...), and no error class of its own that does not extend ArborError.
 * A new product folder gets its root in ROOTS.
 */
const ROOT = join(import.meta.dirname, "../../..");
const ROOTS = ["shared", "functions", "infra", "cli"];

/**
 * The classes that extend a built-in error, each with its reason.
 *   ArborError: the one application error base.
 *   SimulatedCrash: the fault injector's simulated process death (shared/engine/context.ts). It must
 *   not be an ArborError: no edge, step or handler may map, tell or record it as an outcome; it has
 *   to run out like an unexpected crash.
 */
const ALLOWED_CLASSES = new Set(["ArborError", "SimulatedCrash"]);

/** The errors JavaScript has built in; the ones product code must not make itself. */
const BUILT_IN = "(?:Error|TypeError|RangeError|SyntaxError|ReferenceError|EvalError|URIError)";
const BARE = new RegExp(`\\bnew ${BUILT_IN}\\(`, "g");
const OWN_CLASS = new RegExp(`\\bclass\\s+(\\w+)\\s+extends\\s+${BUILT_IN}\\b`, "g");

const files = execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard", ...ROOTS], {
  cwd: ROOT,
  encoding: "utf8",
})
  .trim()
  .split("\n")
  .filter((f) => /\.(ts|mts|mjs|js|cjs)$/.test(f) && !/\.test\.ts$/.test(f) && existsSync(join(ROOT, f)))
  // The console's script runs in a browser, where no edge maps an ArborError: it shows its errors itself.
  .filter((f) => f !== "shared/channels/console/assets/console.js");

function findings(file: string): string[] {
  const lines = readFileSync(join(ROOT, file), "utf8").split("\n");
  const found: string[] = [];
  lines.forEach((line, i) => {
    if (/^\s*(\/\/|\*|\/\*)/.test(line)) return; // a comment may name what not to do
    for (const m of line.matchAll(BARE)) found.push(`${file}:${i + 1}: ${m[0]}`);
    for (const m of line.matchAll(OWN_CLASS))
      if (!ALLOWED_CLASSES.has(m[1] as string)) found.push(`${file}:${i + 1}: ${m[0]}`);
  });
  return found;
}

describe("errors in product code", () => {
  it("reads the product's files", () => {
    expect(files.length).toBeGreaterThan(100);
    expect(files).toContain("shared/kernel/errors.ts");
  });

  it("are ArborErrors: no bare new Error(...), no error class of its own but the allowed ones", () => {
    expect(files.flatMap(findings)).toEqual([]);
  });

  it("catches what it is there to catch", () => {
    const probe = (text: string) =>
      text
        .split("\n")
        .flatMap((line) => [
          ...[...line.matchAll(BARE)].map((m) => m[0]),
          ...[...line.matchAll(OWN_CLASS)]
            .filter((m) => !ALLOWED_CLASSES.has(m[1] as string))
            .map((m) => m[0]),
        ]);
    expect(probe('throw new Error("x");')).toEqual(["new Error("]);
    expect(probe("return new TypeError(`x`);")).toEqual(["new TypeError("]);
    expect(probe("export class HttpFailure extends Error {")).toHaveLength(1);
    expect(probe("export class SimulatedCrash extends Error {")).toEqual([]);
    expect(probe("export class SettingsError extends ConfigError {}")).toEqual([]);
    expect(probe("throw new ValidationError(`x`);")).toEqual([]);
  });
});
