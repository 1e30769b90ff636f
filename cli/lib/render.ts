import { styleText } from "node:util";
import type { TaskStatus } from "../../shared/domain/task-state.ts";
import type { Runtime } from "../../shared/runtime/runtime.ts";

/** Terminal rendering for people: headings, notes, task trees. Colours only on a TTY. */
const colour = process.stdout.isTTY === true && !("NO_COLOR" in process.env);
const paint = (style: Parameters<typeof styleText>[0], text: string) =>
  colour ? styleText(style, text) : text;

export const heading = (text: string): string => paint("bold", text);

/**
 * Text from elsewhere (a model's plan, a tool's name, a remote Arbor's answer) made safe to print:
 * control characters (ESC and the rest of C0 and C1, DEL) and the bidirectional overrides are
 * shown as U+FFFD, so nothing it holds can move the cursor, hide or restyle what follows, or
 * reorder a line: what a person approves is what they read. `keepLines` keeps newlines and tabs.
 */
export function printable(text: string, keepLines = false): string {
  let out = "";
  for (const ch of text) out += unsafe(ch.codePointAt(0) as number, keepLines) ? "\uFFFD" : ch;
  return out;
}

const unsafe = (c: number, keepLines: boolean): boolean =>
  (c < 0x20 && !(keepLines && (c === 0x0a || c === 0x09))) ||
  (c >= 0x7f && c <= 0x9f) ||
  c === 0x061c ||
  c === 0x200e ||
  c === 0x200f ||
  (c >= 0x202a && c <= 0x202e) ||
  (c >= 0x2066 && c <= 0x2069);

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
