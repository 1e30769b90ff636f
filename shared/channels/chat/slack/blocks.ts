import type { KnownBlock, SectionBlock } from "@slack/types";
import type { TaskStatus } from "../../../domain/task-state.ts";
import { capabilitiesOf } from "../../../notify/chat/snapshot.ts";
import type { ChatRender, ThreadQuestion, ThreadSnapshot, ThreadTask } from "../../../notify/chat/types.ts";
import { usageLine } from "../../../notify/chat/usage-line.ts";

/**
 * Block Kit for a thread: the progress message, a question (buttons, or a button opening a
 * modal), an answered question, the answer. Pure: snapshot in, `{ text, payload: { blocks } }` out.
 * How to drive it:
 *
 *   progressBlocks(snapshot); questionBlocks(question, snapshot); answerBlocks(snapshot);
 *   parseOptionValue(action.value)   // { urn, optionId } of an ACTION_OPTION button
 *   parseOpenValue(action.value)     // { urn, mode } of an ACTION_OPEN button (modals.ts)
 *
 * Every text a person, a tool or the model wrote is escaped (`esc`), the message's top-level
 * `text` too (what notifications show, mobile ones only): a title or an answer saying `<!channel>`
 * or `<https://evil|a link>` pings or links nobody.
 *
 * Slack's limits kept here: a section's text at most 3000 characters, a message at most 50
 * blocks, a button's value at most 2000 characters (an interaction URN is at most 1000, an
 * option id 100: they always fit, so no value is ever mapped through a store).
 */
export const ACTION_OPTION = "arbor.option";
export const ACTION_OPEN = "arbor.open";
export const SECTION_CHARS = 3000;
export const MAX_BLOCKS = 50;
const TEXT_CHARS = 3000;
/** Questions with more options than this are answered in a modal (a static select). */
export const MAX_BUTTONS = 5;

const STATUS_EMOJI: Record<TaskStatus, string> = {
  open: ":white_circle:",
  in_progress: ":large_blue_circle:",
  awaiting_user: ":raising_hand:",
  done: ":white_check_mark:",
  failed: ":x:",
  canceled: ":black_square_for_stop:",
};
const STATE_LABEL: Record<ThreadSnapshot["state"], string> = {
  working: ":hourglass_flowing_sand: Working",
  "input-required": ":raising_hand: Waiting for an answer",
  completed: ":white_check_mark: Done",
  failed: ":x: Failed",
  canceled: ":black_square_for_stop: Canceled",
};

/** Slack's mrkdwn escapes (https://api.slack.com/reference/surfaces/formatting#escaping). */
export const esc = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/**
 * The Markdown a model answers in, as Slack's mrkdwn shows it: escaped, headings and `**bold**` as
 * `*bold*`, `[text](https://...)` as a link. Lists and code blocks read the same in both.
 */
export function mrkdwn(markdown: string): string {
  return esc(markdown)
    .replace(/^#{1,6}[ \t]+(.+)$/gm, "*$1*")
    .replace(/\*\*([^*\n]+)\*\*/g, "*$1*")
    .replace(/__([^_\n]+)__/g, "*$1*")
    .replace(/\[([^\]\n]+)\]\((https?:\/\/[^\s)|]+)\)/g, "<$2|$1>");
}

export const cut = (text: string, max: number) => (text.length <= max ? text : `${text.slice(0, max - 1)}…`);

const section = (text: string): SectionBlock => ({
  type: "section",
  text: { type: "mrkdwn", text: cut(text, SECTION_CHARS) },
});
const context = (text: string): KnownBlock => ({
  type: "context",
  elements: [{ type: "mrkdwn", text: cut(text, SECTION_CHARS) }],
});

/** Lines packed into as few sections as fit, at most `maxBlocks`; the last says what was left out. */
function packed(lines: readonly string[], maxBlocks: number, leftOut: (n: number) => string): SectionBlock[] {
  const out: string[] = [];
  let current = "";
  let used = 0;
  for (const line of lines) {
    const piece = cut(line, SECTION_CHARS - 100);
    if (current.length + piece.length + 1 > SECTION_CHARS - 100) {
      if (out.length + 1 >= maxBlocks) break;
      out.push(current);
      current = "";
    }
    current = current ? `${current}\n${piece}` : piece;
    used++;
  }
  if (used < lines.length) current = `${current}\n${leftOut(lines.length - used)}`;
  if (current) out.push(current);
  return out.map(section);
}

/** Text split into sections of at most 3000 characters, at most `maxBlocks` of them. */
function chunked(text: string, maxBlocks: number, wrap: (s: string) => string = (s) => s): SectionBlock[] {
  const room = SECTION_CHARS - 20;
  const out: SectionBlock[] = [];
  for (let i = 0; i < text.length && out.length < maxBlocks; i += room) {
    const last = out.length === maxBlocks - 1 && i + room < text.length;
    out.push(section(wrap(last ? `${text.slice(i, i + room - 1)}…` : text.slice(i, i + room))));
  }
  return out;
}

const taskLine = (t: ThreadTask) =>
  `${"\u2003".repeat(Math.min(t.depth, 8))}${STATUS_EMOJI[t.status]} ${esc(t.title)}${
    t.assistant ? ` · _${esc(t.assistant)}_` : ""
  }`;

/** Where the whole request is read (the task URN, the HTTP API's path). */
const whereToRead = (s: ThreadSnapshot) =>
  `Request \`${s.rootTaskUrn}\` · HTTP API: \`GET /v1/tasks/${encodeURIComponent(s.rootTaskUrn)}\``;

export function progressBlocks(s: ThreadSnapshot): ChatRender {
  const blocks: KnownBlock[] = [section(`*${esc(cut(s.title, 500))}*\n${STATE_LABEL[s.state]}`)];
  const more = s.taskCount - s.tasks.length;
  blocks.push(
    ...packed(s.tasks.map(taskLine), MAX_BLOCKS - 3, (n) => `…and ${n + Math.max(0, more)} more tasks`),
  );
  if (s.truncated && more > 0 && blocks.length < MAX_BLOCKS - 1)
    blocks.push(context(`${more} more tasks are not shown: read the whole tree over the HTTP API`));
  blocks.push(context(s.usage ? `${usageLine(s.usage)} · ${whereToRead(s)}` : whereToRead(s)));
  return {
    text: cut(esc(`${s.title}: ${STATE_LABEL[s.state].replace(/^:[a-z_]+: /, "")}`), TEXT_CHARS),
    payload: { blocks },
  };
}

/** Who answered, as Slack shows a person: a mention for a Slack user, else the Arbor actor id. */
export function answerer(by: string, name?: string): string {
  const slack = /^user_slack\.[A-Z0-9]+\.([A-Z0-9]+)$/.exec(by);
  if (slack) return `<@${slack[1]}>`; // Slack shows the person's own name
  return name ? `*${esc(name)}*` : `\`${esc(by)}\``;
}

function questionHead(q: ThreadQuestion): KnownBlock[] {
  const blocks: KnownBlock[] = [section(`:raising_hand: *${esc(q.display.title)}*`)];
  if (q.display.description) blocks.push(section(esc(q.display.description)));
  const content = q.display.content;
  if (content !== undefined && content !== null) {
    const shown = typeof content === "string" ? content : JSON.stringify(content, null, 2);
    // The exact arguments of a risky call are shown whole (split over sections), never summarised.
    blocks.push(...chunked(shown.replace(/```/g, "`\u200b``"), 20, (s) => `\`\`\`${s}\`\`\``));
  }
  if (q.binding)
    blocks.push(
      context(`Tool \`${esc(q.binding.tool)}\` · arguments hash \`${q.binding.argumentsHash.slice(0, 16)}\``),
    );
  return blocks;
}

export function optionValue(urn: string, optionId: string): string {
  return `${urn}\n${optionId}`;
}
export function parseOptionValue(value: unknown): { urn: string; optionId: string } | undefined {
  if (typeof value !== "string" || value.length > 2000) return undefined;
  const at = value.lastIndexOf("\n");
  if (at <= 0) return undefined;
  return { urn: value.slice(0, at), optionId: value.slice(at + 1) };
}

/** What a modal is for: a free value (input, composite), a choice among many, an edited plan. */
export type ModalMode = "input" | "select" | "edit";
export function openValue(urn: string, mode: ModalMode): string {
  return `${mode}\n${urn}`;
}
export function parseOpenValue(value: unknown): { urn: string; mode: ModalMode } | undefined {
  if (typeof value !== "string" || value.length > 2000) return undefined;
  const [mode, urn] = value.split("\n", 2);
  if ((mode === "input" || mode === "select" || mode === "edit") && urn) return { urn, mode };
  return undefined;
}

const BUTTON_STYLE = { primary: "primary", danger: "danger" } as const;

function questionActions(q: ThreadQuestion): KnownBlock {
  const options = q.options ?? [];
  const open = (label: string, mode: ModalMode) => ({
    type: "button" as const,
    action_id: `${ACTION_OPEN}.${mode}`,
    text: { type: "plain_text" as const, text: label },
    value: openValue(q.urn, mode),
  });
  const elements = [];
  if (q.kind === "input" || q.kind === "composite") elements.push(open("Answer…", "input"));
  else if (options.length > MAX_BUTTONS) elements.push(open("Choose…", "select"));
  else
    options.forEach((o, i) => {
      const style = o.style && o.style !== "default" ? { style: BUTTON_STYLE[o.style] } : {};
      elements.push({
        type: "button" as const,
        action_id: `${ACTION_OPTION}.${i}`,
        text: { type: "plain_text" as const, text: cut(o.label, 75) },
        value: optionValue(q.urn, o.id),
        ...style,
      });
    });
  if (q.purpose === "approve_plan" && q.kind === "confirm") elements.push(open("Edit the plan…", "edit"));
  return { type: "actions", block_id: "arbor.answer", elements };
}

export function questionBlocks(q: ThreadQuestion, s: ThreadSnapshot): ChatRender {
  const head = questionHead(q);
  const tail: KnownBlock[] = q.answered
    ? [
        section(
          q.answered.by.startsWith("system_")
            ? `:heavy_minus_sign: _${esc(cut(q.answered.summary, 1000))}_` // the request ended without it
            : `:ballot_box_with_check: ${answerer(q.answered.by, q.answered.byName)}${esc(capabilitiesOf(q.answered))} answered: *${esc(cut(q.answered.summary, 1000))}*`,
        ),
      ]
    : [questionActions(q), context(`Only the person who asked, or an admin, may answer · ${whereToRead(s)}`)];
  const blocks = [...head.slice(0, MAX_BLOCKS - tail.length), ...tail];
  const text = q.answered
    ? `${q.display.title}: answered by ${q.answered.byName ?? q.answered.by} (${q.answered.summary})`
    : `Question: ${q.display.title}`;
  return { text: cut(esc(text), TEXT_CHARS), payload: { blocks } };
}

export function answerBlocks(s: ThreadSnapshot): ChatRender {
  const where = context(whereToRead(s));
  if (s.state === "completed") {
    const answer = s.answer?.trim() || "(no answer text)";
    const text = mrkdwn(answer);
    const body = chunked(text, MAX_BLOCKS - 2);
    const whole = body.length * (SECTION_CHARS - 20) >= text.length;
    const blocks: KnownBlock[] = [...body];
    if (!whole) blocks.push(context("The answer is cut here: the whole of it is the request's output"));
    blocks.push(where);
    return { text: cut(esc(answer), TEXT_CHARS), payload: { blocks } };
  }
  const label = s.state === "canceled" ? ":black_square_for_stop: Canceled" : ":x: Failed";
  const text = `${label}${s.reason ? `: ${s.reason}` : ""}`;
  return {
    text: cut(esc(text.replace(/^:[a-z_]+: /, "")), TEXT_CHARS),
    payload: { blocks: [section(esc(text)), where] },
  };
}
