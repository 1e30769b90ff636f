import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * Every file a doc or a comment names exists: after a move, a stale path in the README or in a
 * comment sends a newcomer nowhere. Docs (Markdown, YAML, JSON) are read whole; code only in its
 * comments (a test's strings may name files it makes). A path is rooted (`shared/engine/...`,
 * `cli/...`, or `../shared/...` relative to the file) or short, relative to shared/ (`engine/steps/...`); a
 * bare name in a comment (`direct.ts`) must be the name of some file of the project.
 */
const ROOT = join(import.meta.dirname, "../../..");
const tracked = execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard"], {
  cwd: ROOT,
  encoding: "utf8",
})
  .trim()
  .split("\n")
  .filter((f) => existsSync(join(ROOT, f)));
const TOPS = [
  "shared",
  "cli",
  "functions",
  "infra",
  "test",
  "policies",
  "examples",
  "bench",
  "scripts",
  "docs",
];
const SHARED = [
  "engine",
  "tools",
  "channels",
  "runtime",
  "notify",
  "store",
  "kernel",
  "adapters",
  "domain",
  "ports",
];
const EXT = "(?:ts|mjs|cjs|md|json|rego|cedar|yaml|yml)";
const rooted = new RegExp(
  `(?<![\\w.@/-])((?:\\.{1,2}/)*)((?:${TOPS.join("|")})/[\\w./-]*[\\w-]\\.${EXT})(?![\\w/-])`,
  "g",
);
const short = new RegExp(
  `(?<![\\w.@/-])((?:${SHARED.join("|")}|graph|outbound|protocols)/[\\w./-]*[\\w-]\\.(?:ts|mjs))(?![\\w/-])`,
  "g",
);
const bare = /(?<![\w./@-])([a-z0-9][a-z0-9-]*\.(?:ts|mjs))(?![\w/-])/g;
const names = new Set(tracked.map((f) => f.split("/").pop()));
const isCode = (f: string) => /\.(ts|mjs|cjs)$/.test(f);
const commentLines = (text: string) => text.split("\n").filter((l) => /^\s*(\/\/|\*|\/\*)/.test(l));

function missingIn(file: string, text = readFileSync(join(ROOT, file), "utf8")): string[] {
  const lines = isCode(file) ? commentLines(text) : text.split("\n");
  const missing: string[] = [];
  for (const line of lines) {
    for (const [, dots, path] of line.matchAll(rooted)) {
      const p = dots ? normalize(join(dirname(file), `${dots}${path}`)) : (path as string);
      if (!existsSync(join(ROOT, p))) missing.push(`${file}: ${dots}${path}`);
    }
    for (const [, path] of line.matchAll(short))
      if (!existsSync(join(ROOT, "shared", path as string)) && !existsSync(join(ROOT, path as string)))
        missing.push(`${file}: ${path}`);
    if (isCode(file))
      for (const [, name] of line.matchAll(bare)) if (!names.has(name)) missing.push(`${file}: ${name}`);
  }
  return missing;
}

describe("files named in docs and comments", () => {
  it("exist", () => {
    const files = tracked.filter((f) => /\.(ts|mjs|cjs|md|yaml|yml)$/.test(f) || f === "package.json");
    expect(files.flatMap((f) => missingIn(f))).toEqual([]);
  });

  it("a stale one is caught: rooted, relative, short (under shared/) and bare", () => {
    const comment = [
      "// shared/engine/nowhere.ts and engine/steps/nowhere.ts",
      "// and a name no file has: nowhere.ts; but direct.ts and shared/engine/turn/direct.ts are there",
    ].join("\n");
    expect(missingIn("shared/engine/probe.ts", comment)).toEqual([
      "shared/engine/probe.ts: shared/engine/nowhere.ts",
      "shared/engine/probe.ts: engine/steps/nowhere.ts",
      "shared/engine/probe.ts: nowhere.ts",
    ]);
    expect(missingIn("docs/probe.md", "See [the turn](../shared/engine/turn/gone.ts).")).toEqual([
      "docs/probe.md: ../shared/engine/turn/gone.ts",
    ]);
  });
});
