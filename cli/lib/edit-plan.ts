import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Interface } from "node:readline/promises";
import type { Budgets } from "../../shared/domain/resources.ts";
import type { PlanEditor } from "./ask.ts";
import { printable } from "./render.ts";

/**
 * Editing a plan to approve from the terminal: the plan is written as JSON (what the HTTP API
 * takes as the answer's `inputValue`) to a file of its own, opened in the person's editor
 * ($VISUAL, else $EDITOR, run by the shell as git runs it, so `code --wait` works), and read back
 * when the editor exits. The edit is checked as the engine checks every channel's answer (the
 * planner's checkEditedPlan, against `budgets`); a refused one is shown with its problems and
 * kept, so the next edit starts from it. Without an editor, `howElse` says how to edit it.
 */
export interface PlanEditing {
  env: NodeJS.ProcessEnv;
  /** The budgets the engine checks an edited plan against (a remote Arbor's own: unknown, so the defaults). */
  budgets: Budgets;
  /** What to do without an editor: how to set one, and the HTTP answer that takes an edit. */
  howElse: string;
  /** Stops and starts reading the terminal's input, so the editor alone reads it meanwhile. */
  pause?: () => void;
  resume?: () => void;
}

export function planEditor(editing: PlanEditing): PlanEditor {
  let kept: string | undefined; // the last edit that was refused: the next edit starts from it
  return async (plan, out) => {
    const editor = editing.env.VISUAL?.trim() || editing.env.EDITOR?.trim();
    if (!editor) {
      out.write(`No editor is set (VISUAL or EDITOR). ${editing.howElse}\n`);
      return undefined;
    }
    const shown = kept ?? `${JSON.stringify(plan, null, 2)}\n`;
    const dir = await mkdtemp(join(tmpdir(), "arbor-plan-"));
    const file = join(dir, "plan.json");
    try {
      await writeFile(file, shown, { mode: 0o600 });
      out.write(`Editing the plan in ${editor} (${file}); save and quit to go on.\n`);
      const status = await runEditor(editor, file, editing);
      if (status !== 0) {
        out.write(`The editor ended with ${status}: the plan is not changed.\n`);
        return undefined;
      }
      const text = await readFile(file, "utf8");
      if (!text.trim() || text === shown) {
        out.write(text.trim() ? "The plan is unchanged.\n" : "The file is empty: the plan is not changed.\n");
        return undefined;
      }
      const problems = await planProblems(text, editing.budgets);
      if (problems.length) {
        kept = text;
        out.write(
          `${printable(problems.join("\n"), true)}\nNothing was sent; e opens your edit again, or answer without it.\n`,
        );
        return undefined;
      }
      kept = undefined;
      out.write("The edited plan is sent with your approval.\n");
      return text;
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  };
}

/**
 * Pausing and resuming the terminal's lines around the editor; nothing once they have ended (stdin
 * closed: piped answers are all read at once), when readline refuses both.
 */
export function pausing(lines: Interface): Pick<PlanEditing, "pause" | "resume"> {
  let closed = false;
  lines.once("close", () => {
    closed = true;
  });
  return {
    pause: () => {
      if (!closed) lines.pause();
    },
    resume: () => {
      if (!closed) lines.resume();
    },
  };
}

/** Why the engine would refuse an edited plan, one line each; none when it would take it. */
export async function planProblems(text: string, budgets: Budgets): Promise<string[]> {
  const { checkEditedPlan } = await import("../../shared/engine/steps/planner.ts"); // the engine's own check, loaded when used
  const check = checkEditedPlan(text, budgets);
  if (check.ok) return [];
  return [`${check.message}${check.errors.length ? ":" : "."}`, ...check.errors.map((e) => `  ${e}`)];
}

/** The HTTP answer that approves a plan with an edit, for a person without an editor here. */
export function httpEditHelp(base: string, interactionUrn: string): string {
  return [
    "Edit the plan shown above into plan.json, and send it as the answer over HTTP:",
    `  node -p 'JSON.stringify({selectedOptionId:"approve",inputValue:require("fs").readFileSync("plan.json","utf8")})' |`,
    `    curl -s -H "Authorization: Bearer $ARBOR_KEY" -H "content-type: application/json" --data-binary @- \\`,
    `    '${base.replace(/\/+$/, "")}/v1/interactions/${encodeURIComponent(interactionUrn)}/answer'`,
    "(a 204 took it; then answer y here: the first answer stands). Or set VISUAL or EDITOR and run again.",
  ].join("\n");
}

/**
 * Runs the editor on the file, as git does (`sh -c '<editor> "$@"'`), with the terminal its own:
 * input reading paused, and Ctrl-C left to the editor (Arbor ignores it meanwhile, so it does not
 * cancel the request). Resolves with the exit status (a signal's name when one ended it).
 */
async function runEditor(editor: string, file: string, editing: PlanEditing): Promise<number | string> {
  const held = process.rawListeners("SIGINT") as ((...args: unknown[]) => void)[];
  const ignore = () => undefined;
  process.removeAllListeners("SIGINT");
  process.on("SIGINT", ignore);
  editing.pause?.();
  try {
    return await new Promise((resolve, reject) => {
      const child = spawn("sh", ["-c", `${editor} "$@"`, editor, file], {
        stdio: "inherit",
        env: editing.env,
      });
      child.once("error", reject);
      child.once("exit", (code, signal) => resolve(code ?? signal ?? 1));
    });
  } finally {
    editing.resume?.();
    process.off("SIGINT", ignore);
    for (const l of held) process.on("SIGINT", l);
  }
}
