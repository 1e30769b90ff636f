import { styleText } from "node:util";
import type { TaskStatus } from "../domain/task-state.ts";
import type { Runtime } from "../runtime/runtime.ts";

/** Terminal rendering for people: headings, notes, task trees. Colours only on a TTY. */
const colour = process.stdout.isTTY === true && !("NO_COLOR" in process.env);
const paint = (style: Parameters<typeof styleText>[0], text: string) =>
  colour ? styleText(style, text) : text;

export const heading = (text: string): string => paint("bold", text);
export const note = (text: string): string => paint("dim", text);

export const GLYPH: Record<TaskStatus, string> = {
  open: paint("gray", "○"),
  in_progress: paint("yellow", "◐"),
  awaiting_user: paint("magenta", "?"),
  done: paint("green", "✓"),
  failed: paint("red", "✗"),
  canceled: paint("gray", "⊘"),
};

/** Prints a task and its descendants (from the state store's parent index) as a tree. */
export async function printTaskTree(rt: Runtime, root: string, write: (line: string) => void): Promise<void> {
  const walk = async (taskId: string, prefix: string, last: boolean, top: boolean): Promise<void> => {
    const view = await rt.tasks.view(taskId);
    if (!view) return;
    const branch = top ? "" : last ? "└─ " : "├─ ";
    write(`${prefix}${branch}${GLYPH[view.status]} ${view.title} ${note(`[${view.status}]`)}`);
    const children = await rt.tasks.children(taskId);
    const nextPrefix = top ? "" : `${prefix}${last ? "   " : "│  "}`;
    for (const [i, child] of children.entries())
      await walk(child.taskId, nextPrefix, i === children.length - 1, false);
  };
  await walk(root, "", true, true);
}
