import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { httpEditHelp, type PlanEditing, planEditor } from "../../../../cli/lib/edit-plan.ts";

/**
 * The terminal's plan editor with a real editor: a small script run as $VISUAL / $EDITOR (through
 * the shell, as git runs one), which edits the file as EDIT_MODE says and logs what it was given.
 */
const EDITOR_SCRIPT = `
import { appendFileSync, readFileSync, writeFileSync } from "node:fs";
const file = process.argv[2];
const text = readFileSync(file, "utf8");
appendFileSync(process.env.EDIT_LOG, JSON.stringify({ file, text, who: process.env.WHO }) + "\\n");
const plan = JSON.parse(text);
switch (process.env.EDIT_MODE) {
  case "valid": plan.subtasks = [{ name: "Only this" }]; break;
  case "invalid-then-valid":
    if (plan.subtasks.some((s) => s.name === "")) plan.subtasks = plan.subtasks.filter((s) => s.name !== "");
    else plan.subtasks[0].name = "";
    break;
  case "not-json": writeFileSync(file, "{ not json"); process.exit(0);
  case "fail": process.exit(3);
}
if (process.env.EDIT_MODE !== "same") writeFileSync(file, JSON.stringify(plan, null, 2));
`;

const PLAN = { name: "Plan", subtasks: [{ name: "A" }, { name: "B" }] };
let dir: string;
let script: string;
let log: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-edit-test-"));
  script = join(dir, "edit.mjs");
  log = join(dir, "edits.log");
  await writeFile(script, EDITOR_SCRIPT);
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const editorCommand = (who = "editor") => `WHO=${who} "${process.execPath}" "${script}"`;

async function edit(env: NodeJS.ProcessEnv, times = 1) {
  await rm(log, { force: true });
  const out = new PassThrough();
  let printed = "";
  out.on("data", (c: Buffer) => {
    printed += c.toString();
  });
  const editing: PlanEditing = {
    env: { PATH: process.env.PATH, EDIT_LOG: log, ...env },
    budgets: {},
    howElse: "Set one and run again.",
  };
  const editor = planEditor(editing);
  const results: (string | undefined)[] = [];
  for (let i = 0; i < times; i++) results.push(await editor(PLAN, out));
  const seen = existsSync(log)
    ? (await readFile(log, "utf8"))
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as { file: string; text: string; who: string })
    : [];
  return { results, printed, seen };
}

describe("editing a plan in $VISUAL / $EDITOR", () => {
  it("opens the plan as JSON, and gives back the checked edit", async () => {
    const r = await edit({ EDITOR: editorCommand(), EDIT_MODE: "valid" });
    expect(r.seen).toHaveLength(1);
    expect(JSON.parse(r.seen[0]?.text as string)).toEqual(PLAN);
    expect(r.seen[0]?.file).toMatch(/plan\.json$/);
    expect(JSON.parse(r.results[0] as string)).toEqual({ name: "Plan", subtasks: [{ name: "Only this" }] });
    expect(r.printed).toContain("The edited plan is sent with your approval.");
    // The file was the editor's only while it ran.
    expect(existsSync(r.seen[0]?.file as string)).toBe(false);
  });

  it("takes VISUAL before EDITOR", async () => {
    const r = await edit({
      VISUAL: editorCommand("visual"),
      EDITOR: editorCommand("editor"),
      EDIT_MODE: "valid",
    });
    expect(r.seen.map((s) => s.who)).toEqual(["visual"]);
  });

  it("refuses an edit the engine would refuse, says why, and opens that edit again next time", async () => {
    const r = await edit({ EDITOR: editorCommand(), EDIT_MODE: "invalid-then-valid" }, 2);
    expect(r.results[0]).toBeUndefined();
    expect(r.printed).toContain("The edited plan is not valid:");
    expect(r.printed).toMatch(/subtasks.*0.*name/);
    expect(r.printed).toContain("Nothing was sent; e opens your edit again");
    // The second edit starts from the first one (the empty name), not from the plan shown.
    expect(JSON.parse(r.seen[1]?.text as string).subtasks[0].name).toBe("");
    expect(JSON.parse(r.results[1] as string)).toEqual({ name: "Plan", subtasks: [{ name: "B" }] });
  });

  it("refuses what is not JSON, as the HTTP answer does", async () => {
    const r = await edit({ EDITOR: editorCommand(), EDIT_MODE: "not-json" });
    expect(r.results).toEqual([undefined]);
    expect(r.printed).toContain("The edited plan is not valid JSON.");
  });

  it("sends nothing when the plan is left as it was, or the editor fails", async () => {
    const same = await edit({ EDITOR: editorCommand(), EDIT_MODE: "same" });
    expect(same.results).toEqual([undefined]);
    expect(same.printed).toContain("The plan is unchanged.");
    const failed = await edit({ EDITOR: editorCommand(), EDIT_MODE: "fail" });
    expect(failed.results).toEqual([undefined]);
    expect(failed.printed).toContain("The editor ended with 3: the plan is not changed.");
  });

  it("says how else to edit when no editor is set", async () => {
    const r = await edit({ EDITOR: "", VISUAL: " " });
    expect(r.results).toEqual([undefined]);
    expect(r.printed).toContain("No editor is set (VISUAL or EDITOR). Set one and run again.");
  });

  it("leaves Ctrl-C to the editor while it runs, and gives it back after", async () => {
    const mine = () => undefined;
    process.on("SIGINT", mine);
    try {
      const before = process.listeners("SIGINT");
      await edit({ EDITOR: editorCommand(), EDIT_MODE: "valid" });
      expect(process.listeners("SIGINT")).toEqual(before);
    } finally {
      process.off("SIGINT", mine);
    }
  });
});

describe("the HTTP answer that takes an edited plan", () => {
  it("names the interaction's answer route at the remote Arbor, URN encoded", () => {
    const urn = "cld:common.Tenant.acme/common.Conversation.c/common.Message.m/plan.Task.t/uip.Interaction.i";
    const help = httpEditHelp("https://arbor.example.com/", urn);
    expect(help).toContain(`'https://arbor.example.com/v1/interactions/${encodeURIComponent(urn)}/answer'`);
    expect(help).toContain('selectedOptionId:"approve",inputValue:');
  });
});
