import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * docs/architecture.md's table of ports names every port of shared/ports/, and every suite or test
 * it names for a port exists: a port added without its adapters and its contract in the table fails.
 */
const ROOT = join(import.meta.dirname, "../../..");
const doc = readFileSync(join(ROOT, "docs/architecture.md"), "utf8");
const rows = doc.split("\n").filter((l) => /^\| .*`shared\/ports\/[\w-]+\.ts`/.test(l));

describe("the ports table of docs/architecture.md", () => {
  it("has a row for every port, with its contract suite", () => {
    const ports = readdirSync(join(ROOT, "shared/ports")).filter((f) => f.endsWith(".ts"));
    const listed = rows.map((r) => /`shared\/ports\/([\w-]+\.ts)`/.exec(r)?.[1]);
    expect([...listed].sort()).toEqual([...ports].sort());
    for (const row of rows) {
      const suite = row.split("|")[4] ?? "";
      const named = [...suite.matchAll(/`((?:test|policies)\/[\w./-]+)`/g)].map((m) => m[1] as string);
      expect(named.length, `a suite for ${row.slice(0, 60)}`).toBeGreaterThan(0);
      for (const path of named) expect(existsSync(join(ROOT, path)), path).toBe(true);
    }
  });
});
