import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";

/**
 * The layering of ARCHITECTURE.md (.dependency-cruiser.cjs): no import circle, no arrow pointing
 * up, SDKs only at the edges. Violations that were there when the check came in are listed in
 * .dependency-cruiser-known-violations.json; the list only shrinks: a new violation fails, and so
 * does an entry that was fixed and not taken off the list.
 */
const ROOT = join(import.meta.dirname, "../..");
const CONFIG = join(ROOT, ".dependency-cruiser.cjs");
const KNOWN = join(ROOT, ".dependency-cruiser-known-violations.json");
const run = promisify(execFile);

interface Violation {
  from: string;
  to: string;
  rule: { name: string };
}

async function cruise(cwd: string, paths: string[], extra: string[] = []): Promise<Violation[]> {
  const bin = join(ROOT, "node_modules/dependency-cruiser/bin/dependency-cruiser.mjs");
  const argv = [bin, ...paths, "--config", CONFIG, "--output-type", "json", ...extra];
  // Exits 1 when there are violations: the JSON on stdout says which.
  const out = await run(process.execPath, argv, { cwd, maxBuffer: 64 * 2 ** 20 }).catch(
    (e: { stdout?: string }) => ({ stdout: e.stdout ?? "" }),
  );
  const result = JSON.parse(out.stdout) as { summary: { violations: Violation[] } };
  return result.summary.violations;
}

const key = (v: Violation) =>
  `${v.rule.name}: ${v.from} -> ${v.to.replace(/^.*node_modules\//, "node_modules/")}`;

describe("layers", () => {
  const scratch = mkdtempSync(join(tmpdir(), "arbor-layers-"));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it("the tree has no violation beyond the known ones, and every known one is still there", async () => {
    const found = (await cruise(ROOT, ["shared", "functions", "cli", "infra"])).map(key).sort();
    const known = (JSON.parse(readFileSync(KNOWN, "utf8")) as Violation[]).map(key).sort();
    const fresh = found.filter((v) => !known.includes(v));
    const fixed = known.filter((v) => !found.includes(v));
    expect(fresh, "new violations of the layering (ARCHITECTURE.md, .dependency-cruiser.cjs)").toEqual([]);
    expect(fixed, "fixed: take them off .dependency-cruiser-known-violations.json").toEqual([]);
  }, 120_000);

  it("catches an upward import, a circle, an adapter reaching into the engine and an SDK in the core", async () => {
    const file = (path: string, text: string) => {
      mkdirSync(dirname(join(scratch, path)), { recursive: true });
      writeFileSync(join(scratch, path), text);
    };
    file("shared/domain/task.ts", 'import { step } from "../engine/step.ts";\nexport const task = step;\n');
    file(
      "shared/engine/step.ts",
      'import { task } from "../domain/task.ts";\nexport const step = () => task;\n',
    );
    file(
      "shared/adapters/local/store.ts",
      'import { step } from "../../engine/step.ts";\nexport const s = step;\n',
    );
    file(
      "shared/engine/cloud.ts",
      'import { S3Client } from "@aws-sdk/client-s3";\nexport const c = S3Client;\n',
    );
    mkdirSync(join(scratch, "node_modules/@aws-sdk/client-s3"), { recursive: true });
    writeFileSync(
      join(scratch, "node_modules/@aws-sdk/client-s3/package.json"),
      '{"name":"@aws-sdk/client-s3","main":"index.js"}',
    );
    writeFileSync(
      join(scratch, "node_modules/@aws-sdk/client-s3/index.js"),
      "exports.S3Client = class {};\n",
    );
    const found = (await cruise(scratch, ["shared"])).map(key);
    expect(found).toEqual(
      expect.arrayContaining([
        "domain-is-pure: shared/domain/task.ts -> shared/engine/step.ts",
        "no-circular: shared/domain/task.ts -> shared/engine/step.ts",
        "adapters-implement-ports: shared/adapters/local/store.ts -> shared/engine/step.ts",
        "cloud-sdks-at-the-edges: shared/engine/cloud.ts -> node_modules/@aws-sdk/client-s3/index.js",
      ]),
    );
  }, 120_000);
});
