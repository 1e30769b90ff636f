import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";

/**
 * The layering of ARCHITECTURE.md (.dependency-cruiser.cjs): no import circle, no arrow pointing
 * up, SDKs only at the edges. `npm run lint:layers` says the same from the command line.
 */
const ROOT = join(import.meta.dirname, "../../..");
const CONFIG = join(ROOT, ".dependency-cruiser.cjs");
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

  it("the tree has no import circle, no arrow pointing up and no SDK outside the edges", async () => {
    const found = (await cruise(ROOT, ["shared", "functions", "cli", "infra"])).map(key);
    expect(found, "violations of the layering (ARCHITECTURE.md, .dependency-cruiser.cjs)").toEqual([]);
  }, 120_000);

  it("catches an upward import, a circle, an adapter reaching into the engine, an SDK in the core and a command loading its work at start", async () => {
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
    // A command file that loads its work at once (every start of the CLI would pay for it), and
    // one that loads it when it runs.
    file(
      "cli/commands/eager.ts",
      'import { step } from "../../shared/engine/step.ts";\nexport const e = step;\n',
    );
    file(
      "cli/commands/lazy.ts",
      'export const l = async () => (await import("../../shared/engine/step.ts")).step;\n',
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
    const found = (await cruise(scratch, ["shared", "cli"])).map(key);
    expect(found.filter((f) => f.includes("cli/commands/lazy.ts"))).toEqual([]);
    expect(found).toEqual(
      expect.arrayContaining([
        "domain-is-pure: shared/domain/task.ts -> shared/engine/step.ts",
        "no-circular: shared/domain/task.ts -> shared/engine/step.ts",
        "adapters-implement-ports: shared/adapters/local/store.ts -> shared/engine/step.ts",
        "cloud-sdks-at-the-edges: shared/engine/cloud.ts -> node_modules/@aws-sdk/client-s3/index.js",
        "cli-commands-load-lazily: cli/commands/eager.ts -> shared/engine/step.ts",
      ]),
    );
  }, 120_000);
});
