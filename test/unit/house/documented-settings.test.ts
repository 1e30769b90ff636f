import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * The settings table stays true: every ARBOR_* variable the configuration reads
 * (shared/runtime/config.ts and config/) is documented (README.md, docs/, the AWS and chat pages), and every ARBOR_*
 * variable the docs name is one Arbor reads. A setting added without a line, or a line left for a
 * setting that went, fails here.
 */
const ROOT = join(import.meta.dirname, "../../..");
const read = (path: string) => readFileSync(join(ROOT, path), "utf8");
const vars = (text: string) => new Set(text.match(/\bARBOR_[A-Z0-9_]+\b/g) ?? []);
const DOCS = [
  "README.md",
  ...readdirSync(join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
  "functions/README.md",
  "infra/README.md",
  "policies/README.md",
  "shared/channels/chat/CHAT-DEPLOY.md",
  "shared/channels/chat/slack/README.md",
  "shared/channels/chat/teams/README.md",
];

describe("the documented settings", () => {
  const documented = new Set(DOCS.flatMap((d) => [...vars(read(d))]));
  const schema = [
    "shared/runtime/config.ts",
    ...readdirSync(join(ROOT, "shared/runtime/config")).map((f) => `shared/runtime/config/${f}`),
  ]
    .map(read)
    .join("\n");
  // The keys of the configuration's environment schemas: `  ARBOR_...: z.` at the start of a line.
  const read_ = new Set([...schema.matchAll(/^\s+(ARBOR_[A-Z0-9_]+):/gm)].map((m) => m[1] as string));

  it("are every variable the configuration reads", () => {
    expect(read_.size).toBeGreaterThan(40);
    expect([...read_].filter((v) => !documented.has(v)).sort()).toEqual([]);
  });

  it("name only variables Arbor reads", () => {
    const code = ["shared", "cli", "functions", "infra"].flatMap((dir) =>
      readdirSync(join(ROOT, dir), { recursive: true, encoding: "utf8" })
        .filter((f) => /\.(ts|mjs)$/.test(f))
        .map((f) => read(join(dir, f))),
    );
    const inCode = new Set(code.flatMap((text) => [...vars(text)]));
    // Not a setting: the Slack app manifest's placeholder for the server's host (slack/README.md).
    const placeholders = new Set(["ARBOR_HOST"]);
    expect([...documented].filter((v) => !inCode.has(v) && !placeholders.has(v)).sort()).toEqual([]);
  });
});
