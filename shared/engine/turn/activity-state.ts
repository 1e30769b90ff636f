import { type Message, type TaskState, withMeta } from "../../domain/resources.ts";
import { wholeCharacters } from "../../domain/text.ts";
import type { ScopedMessage } from "../../ports/tools.ts";
import type { EngineDeps } from "../context.ts";

/**
 * A task's state (seed 004): what calls with `_outputPath` stored. Each path is one `plan.State`
 * resource under the task, named by its path (`<task>/plan.State.<hash of task + path>`), so a
 * path is written in place, the same call writing it again writes the same document, and the
 * whole state is one prefix listing. Paths are flat keys: `state.a` and `state.a.b` are two
 * entries. Later turns see the state in the system prompt (stateNote), bounded.
 */

/** The most entries the model is shown, and the most characters of each value and of all. */
export const STATE_NOTE_ENTRIES = 50;
export const STATE_NOTE_VALUE_CHARS = 1000;
export const STATE_NOTE_CHARS = 8000;

export interface StateWrite {
  taskId: string;
  path: string;
  value: unknown;
  source: TaskState["source"];
  collapsedFrom?: string;
}

export async function writeState(deps: EngineDeps, w: StateWrite): Promise<TaskState> {
  const entry: TaskState = {
    meta: { ...withMeta({ type: "plan.State", name: w.path, parent: w.taskId }), type: "plan.State" },
    path: w.path,
    value: w.value ?? null,
    source: w.source,
    ...(w.collapsedFrom ? { collapsedFrom: w.collapsedFrom } : {}),
  };
  await deps.resources.put(entry);
  deps.faults?.hit("after-write", "state");
  return entry;
}

/** Every entry of a task's state, by path. */
export async function readState(deps: EngineDeps, taskId: string): Promise<TaskState[]> {
  const entries = (await deps.resources.children(taskId, "plan.State")) as TaskState[];
  return entries.sort((a, b) => a.path.localeCompare(b.path));
}

const shown = (value: unknown, max: number) => {
  const text = JSON.stringify(value ?? null); // as JSON: "3" and 3 read apart
  const kept = wholeCharacters(text, max);
  return text.length > max ? `${text.slice(0, kept)}… [${text.length - kept} more characters]` : text;
};

/**
 * The task's state as a note for the system prompt: one line per path, values and the whole cut to
 * size; empty when there is no state.
 */
export async function stateNote(deps: EngineDeps, taskId: string): Promise<string> {
  const entries = await readState(deps, taskId);
  if (entries.length === 0) return "";
  const lines = entries
    .slice(0, STATE_NOTE_ENTRIES)
    .map((e) => `- ${e.path} = ${shown(e.value, STATE_NOTE_VALUE_CHARS)}`);
  if (entries.length > STATE_NOTE_ENTRIES)
    lines.push(`- [${entries.length - STATE_NOTE_ENTRIES} more entries]`);
  let text = `\n\n# Task state\nWhat calls with _outputPath stored so far:\n${lines.join("\n")}`;
  if (text.length > STATE_NOTE_CHARS)
    text = `${text.slice(0, wholeCharacters(text, STATE_NOTE_CHARS))}\n[state cut to fit]`;
  return text;
}

/** The most messages an activity is given, and the most characters of each. */
export const SCOPE_MESSAGES = 20;
export const SCOPE_MESSAGE_CHARS = 4000;

const TURN = /^turn-(\d{4,})(?:-tool-(\d+))?$/;

/**
 * The messages a task scopes in for an activity called in turn `turn`: its prompt, then every
 * earlier turn with its results, then the calling turn itself (not its results: those may still be
 * coming). The same whenever it is asked, so a fire-and-forget activity run later gets what the
 * turn saw. The last SCOPE_MESSAGES, each cut to SCOPE_MESSAGE_CHARS.
 */
export async function scopedMessages(
  deps: EngineDeps,
  taskId: string,
  turn: number,
): Promise<ScopedMessage[]> {
  const messages = (await deps.resources.children(taskId, "common.Message")) as Message[];
  const order = (m: Message): [number, number] | undefined => {
    if (m.meta.name === "prompt") return [0, -1];
    const hit = TURN.exec(m.meta.name);
    if (!hit) return undefined;
    const n = Number(hit[1]);
    const k = hit[2] === undefined ? -1 : Number(hit[2]);
    if (n > turn || (n === turn && k >= 0)) return undefined;
    return [n, k];
  };
  const picked = messages
    .flatMap((m) => {
      const at = order(m);
      return at ? [{ m, at }] : [];
    })
    .sort((a, b) => a.at[0] - b.at[0] || a.at[1] - b.at[1])
    .map(({ m }) => toScoped(m));
  return picked.slice(-SCOPE_MESSAGES);
}

function toScoped(m: Message): ScopedMessage {
  const calls = m.toolCalls?.length
    ? `\n[calls: ${m.toolCalls.map((c) => `${c.name} ${JSON.stringify(c.arguments)}`).join("; ")}]`
    : "";
  const content = `${m.content ?? ""}${calls}`.trim();
  return {
    role: m.role === "system" ? "user" : m.role,
    content:
      content.length > SCOPE_MESSAGE_CHARS
        ? `${content.slice(0, wholeCharacters(content, SCOPE_MESSAGE_CHARS))}…`
        : content,
    urn: m.meta.id,
  };
}
