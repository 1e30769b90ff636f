import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { arborCli } from "../support/arbor-process.ts";

/** `arbor run` as a person uses it: a real process, answers typed on stdin. */
let dataDir: string;

const arbor = (args: string[], stdin: string, env: Record<string, string> = {}) =>
  arborCli(args, { ...process.env, ARBOR_DATA_DIR: dataDir, NO_COLOR: "1", ...env }, stdin);

describe("arbor run", () => {
  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "arbor-run-"));
  });
  afterEach(() => rm(dataDir, { recursive: true, force: true }));

  it("runs the offline example: the tree as it changes, the approval asked on stdin, the answer", async () => {
    const { code, stdout: out, stderr: err } = await arbor(["run", "--example", "offsite"], "2\n1\n");
    expect(err).toBe("");
    expect(out).toMatch(/\? Allow send_email\?/);
    expect(out).toContain("Choose 1-2 or an id, y (Allow) or n (Deny): ");
    expect(out).toMatch(/✓ Shortlist venues: done/);
    expect(out).toMatch(/\? Invite the team: awaiting_user/);
    expect(out).toMatch(/✓ Plan the offsite \[done\] event-planner \d\.\d\d, \d+ tok/);
    expect(out).toMatch(/^[│ ] {2}[├└]─ ✓ Plan a team dinner \[done\]/m);
    expect(out).toMatch(/^Answer$/m);
    expect(code).toBe(0);
  }, 60_000);

  it("takes y for Allow, in any case, and records it as the approval", async () => {
    const { code, stdout: out } = await arbor(["run", "--example", "offsite"], "Y\n");
    expect(out).toMatch(/\? Allow send_email\?/);
    expect(out).not.toMatch(/is not one of the choices/);
    expect(code).toBe(0);
    const ls = await arbor(["ls", "--all"], "");
    const urn = /(cld:\S+\/uip\.Interaction\.\S+)$/m.exec(ls.stdout)?.[1];
    const got = await arbor(["get", urn as string], "");
    expect(JSON.parse(got.stdout)).toMatchObject({
      purpose: "confirm_risky_action",
      status: "answered",
      response: { selectedOptionId: "approve" },
    });
  }, 60_000);

  it("edits a lazy plan in $EDITOR: a refused edit is shown and opened again, the accepted one runs", async () => {
    // The editor: first it empties the second subtask's name (a plan the engine refuses), then,
    // given that edit back, drops that subtask: the plan runs its logistics only.
    const editor = join(dataDir, "edit-plan.mjs");
    await writeFile(
      editor,
      `import { readFileSync, writeFileSync } from "node:fs";
const file = process.argv[2];
const plan = JSON.parse(readFileSync(file, "utf8"));
if (plan.subtasks[1]?.name === "") plan.subtasks = [plan.subtasks[0]];
else plan.subtasks[1].name = "";
writeFileSync(file, JSON.stringify(plan, null, 2));
`,
    );
    const {
      code,
      stdout: out,
      stderr: err,
    } = await arbor(["run", "--example", "offsite", "--lazy"], "e\ne\n", {
      EDITOR: `"${process.execPath}" "${editor}"`,
      VISUAL: "",
    });
    expect(err).toBe("");
    expect(out).toContain("y (Run it) or n (Cancel), e to edit the plan: ");
    expect(out).toMatch(/The edited plan is not valid:\n\s+subtasks\.1\.name: Too small/);
    expect(out).toContain("Nothing was sent; e opens your edit again");
    expect(out).toContain("The edited plan is sent with your approval.");
    expect(out).toMatch(/✓ Plan the offsite \[done\]/);
    expect(out).toMatch(/^└─ ✓ Logistics \[done\]/m);
    // Agenda is in the plan shown, never in the tree that ran; nothing asked to send an email.
    expect(out).not.toMatch(/[○◐✓?] Agenda/);
    expect(out).not.toContain("Allow send_email?");
    expect(code).toBe(0);
  }, 60_000);

  it("without an editor, says how to edit the plan; n cancels it", async () => {
    const { code, stdout: out } = await arbor(["run", "--example", "offsite", "--lazy"], "e\nno\n", {
      EDITOR: "",
      VISUAL: "",
    });
    expect(out).toContain(
      "No editor is set (VISUAL or EDITOR). Run again with one, e.g. EDITOR=nano arbor run --lazy",
    );
    expect(out).toContain('POST /v1/interactions/<urn>/answer {"selectedOptionId":"approve","inputValue":');
    expect(out).toMatch(/The request canceled/);
    expect(code).toBe(1);
  }, 60_000);

  it("cancels when stdin ends before the question is answered", async () => {
    const { code, stdout: out } = await arbor(["run", "--example", "offsite"], "");
    expect(out).toMatch(/No answer; canceling\. Rerun with --yes/);
    expect(out).toMatch(/The request canceled/);
    expect(code).toBe(1);
  }, 60_000);

  it("says how to configure a model when none is", async () => {
    const { code, stderr: err } = await arbor(["run", "plan my week"], "", { ARBOR_MODEL_PROVIDER: "" });
    expect(code).toBe(2);
    expect(err).toMatch(/No model is configured/);
    expect(err).toMatch(/ARBOR_MODEL_PROVIDER=bedrock/);
    expect(err).toMatch(/ARBOR_OPENAI_BASE_URL=http:\/\/localhost:11434\/v1/);
    expect(err).toMatch(/arbor run --example offsite/);
  }, 60_000);

  it("talks to an OpenAI-compatible endpoint when configured, and says clearly when it cannot reach it", async () => {
    const { code, stdout: out } = await arbor(["run", "plan my week"], "", {
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
