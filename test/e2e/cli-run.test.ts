import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

/** `arbor run` as a person uses it: a real process, answers typed on stdin. */
const bin = join(import.meta.dirname, "../../shared/cli/bin.mjs");
let dataDir: string;

function arbor(
  args: string[],
  stdin: string,
  env: Record<string, string> = {},
): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], {
      env: { ...process.env, ARBOR_DATA_DIR: dataDir, NO_COLOR: "1", ...env },
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => {
      out += d;
    });
    child.stderr.on("data", (d) => {
      err += d;
    });
    child.stdin.end(stdin);
    child.on("close", (code) => resolve({ code: code ?? -1, out, err }));
  });
}

describe("arbor run", () => {
  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "arbor-run-"));
  });
  afterEach(() => rm(dataDir, { recursive: true, force: true }));

  it("runs the offline example: the tree as it changes, the approval asked on stdin, the answer", async () => {
    const { code, out, err } = await arbor(["run", "--example", "offsite"], "2\n1\n");
    expect(err).toBe("");
    expect(out).toMatch(/\? Allow send_email\?/);
    expect(out).toMatch(/Choose 1-2 or an id: "2"|Choose 1-2 or an id: /);
    expect(out).toMatch(/✓ Shortlist venues: done/);
    expect(out).toMatch(/\? Invite the team: awaiting_user/);
    expect(out).toMatch(/✓ Plan the offsite \[done\] event-planner \d\.\d\d, \d+ tok/);
    expect(out).toMatch(/^[│ ] {2}[├└]─ ✓ Plan a team dinner \[done\]/m);
    expect(out).toMatch(/^Answer$/m);
    expect(code).toBe(0);
  }, 60_000);

  it("cancels when stdin ends before the question is answered", async () => {
    const { code, out } = await arbor(["run", "--example", "offsite"], "");
    expect(out).toMatch(/No answer; canceling\. Rerun with --yes/);
    expect(out).toMatch(/The request canceled/);
    expect(code).toBe(1);
  }, 60_000);

  it("says how to configure a model when none is", async () => {
    const { code, err } = await arbor(["run", "plan my week"], "", { ARBOR_MODEL_PROVIDER: "" });
    expect(code).toBe(2);
    expect(err).toMatch(/No model is configured/);
    expect(err).toMatch(/ARBOR_MODEL_PROVIDER=bedrock/);
    expect(err).toMatch(/ARBOR_OPENAI_BASE_URL=http:\/\/localhost:11434\/v1/);
    expect(err).toMatch(/arbor run --example offsite/);
  }, 60_000);

  it("talks to an OpenAI-compatible endpoint when configured, and says clearly when it cannot reach it", async () => {
    const { code, out } = await arbor(["run", "plan my week"], "", {
      ARBOR_MODEL_PROVIDER: "openai",
      ARBOR_MODEL: "llama3.1",
      ARBOR_OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
      ARBOR_MODEL_RETRY_MS: "1000", // how long it is tried before the request fails
    });
    expect(code).toBe(1);
    expect(out).toMatch(
      /The request failed\n.*could not be planned: Could not reach .*127\.0\.0\.1:9.*ollama serve/,
    );
  }, 60_000);
});
