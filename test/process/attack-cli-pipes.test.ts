import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { arborCli, arborEnv, BIN } from "../support/arbor-process.ts";

/**
 * `arbor` with its output piped into a reader that stops early, as people type it
 * (`arbor ls --all | head`, `arbor events <urn> | head -5`): the command ends quietly when the
 * reader goes away, with no stack trace and no failure of the pipeline (`set -o pipefail`).
 */
let dir: string;
let env: NodeJS.ProcessEnv;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-attack-pipes-"));
  env = arborEnv(join(dir, "data"));
  const demo = await arborCli(["demo"], env); // some resources to list
  expect(demo.code, demo.stderr).toBe(0);
  const run = await arborCli(["run", "--example", "offsite", "--yes"], env);
  expect(run.code, run.stderr).toBe(0);
}, 120_000);
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** `bash -o pipefail -c '<arbor> <args> | head -1'`: the pipeline's exit code and what arbor said on stderr. */
function piped(args: string): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    const script = `"${process.execPath}" "${BIN}" ${args} 2>"${dir}/stderr" | head -1 >/dev/null; code=$?; cat "${dir}/stderr" >&2; exit $code`;
    execFile("bash", ["-o", "pipefail", "-c", script], { env, timeout: 60_000 }, (error, _stdout, stderr) =>
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stderr }),
    );
  });
}

describe("arbor piped into a reader that stops early", () => {
  it("ends quietly: no EPIPE stack trace, and the pipeline does not fail", async () => {
    for (let i = 0; i < 3; i++) {
      const { code, stderr } = await piped("ls --all");
      expect(stderr).not.toMatch(/EPIPE|Unhandled|at .*\.ts:\d+/);
      expect(code, stderr).toBe(0);
    }
  }, 120_000);
});
