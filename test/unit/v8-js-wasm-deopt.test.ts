import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

// `arbor serve` died of a V8 fatal error after 2,000-3,000 requests on Node 20: a lazy deopt of a
// function waiting on an inlined JS-to-Wasm call that returns a JS value (Cedar's policy call).
// shared/cli/v8-flags.mjs turns that inlining off; the fixture makes the crash happen in a second.
const ROOT = join(import.meta.dirname, "../..");
const FIXTURE = join(ROOT, "test/fixtures/v8/cedar-lazy-deopt.mjs");
const FLAGS = join(ROOT, "shared/cli/v8-flags.mjs");
const V8_11 = process.versions.v8.startsWith("11.");

interface Outcome {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
}

async function runFixture(nodeArgs: readonly string[]): Promise<Outcome> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [...nodeArgs, FIXTURE], {
      cwd: ROOT,
      env: { ...process.env, NODE_OPTIONS: "" },
      timeout: 120_000,
    });
    return { code: 0, signal: null, stdout, stderr };
  } catch (error) {
    const e = error as { code?: number | null; signal?: string | null; stdout?: string; stderr?: string };
    return { code: e.code ?? null, signal: e.signal ?? null, stdout: e.stdout ?? "", stderr: e.stderr ?? "" };
  }
}

describe("the V8 flags of the arbor command", () => {
  it("keep a process alive through a lazy deopt around Cedar's Wasm call", async () => {
    const outcome = await runFixture(["--import", FLAGS]);
    expect(outcome.stderr).not.toContain("unreachable code");
    expect(outcome).toMatchObject({ code: 0, signal: null });
    expect(outcome.stdout).toBe("survived 70000\n");
  });

  it("are needed: on V8 11 the same process without them dies in the deoptimizer", async () => {
    const outcome = await runFixture([]);
    if (V8_11) {
      // If this starts passing, the Node in use no longer has the bug: see v8-flags.mjs.
      expect(outcome.signal).not.toBeNull();
      expect(outcome.stderr).toContain("unreachable code");
      expect(outcome.stderr).toContain("DoComputeBuiltinContinuation");
    } else {
      expect(outcome.stdout).toBe("survived 70000\n");
    }
  });

  it("are set by bin.mjs before anything else is imported", async () => {
    const bin = await readFile(join(ROOT, "shared/cli/bin.mjs"), "utf8");
    const firstImport = /^import\s.*$/m.exec(bin)?.[0];
    expect(firstImport).toBe('import "./v8-flags.mjs";');
  });
});
