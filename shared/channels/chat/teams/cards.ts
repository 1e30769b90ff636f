import type { InteractionResource } from "../../../domain/resources.ts";
import { answeredBy, capabilitiesOf, questionOf } from "../../../notify/chat/snapshot.ts";
import type { ChatRender, ThreadQuestion, ThreadSnapshot, ThreadTask } from "../../../notify/chat/types.ts";
import { usageLine } from "../../../notify/chat/usage-line.ts";

/**
 * What Arbor shows in Teams: Adaptive Cards (1.5, which Teams renders, with Action.Execute of
 * the Universal Actions model). How to drive it:
 *
 *   progressCard(snapshot)        // the request's state and tree (status, title, assistant)
 *   questionCard(question, title) // waiting: buttons / a choice set / a text input, and a refresh
 *                                 // block so whoever opens it sees how it stands; answered: who
 *                                 // answered what, no actions
 *   answerCard(snapshot)          // the answer (cut, saying where the whole of it is), or why it failed
 *   asRender(card, text)          // the ChatRender the surface posts: { text, payload: { attachments } }
 *   threadQuestion(interaction)   // an interaction resource as a ThreadQuestion (the invoke's refreshed card)
 *
 * Every Action.Execute carries `{ interaction: <URN> }` in its data (and `option` for a button);
 * the inputs' values (`choice`, `value`) come back merged into it. Verbs: `arbor.answer`,
 * `arbor.refresh`.
 */
export const ANSWER_VERB = "arbor.answer";
export const REFRESH_VERB = "arbor.refresh";
export const CARD_CONTENT_TYPE = "application/vnd.microsoft.card.adaptive";
/** Teams takes messages up to about 28 KB: what a card shows of an answer or of arguments. */
export const MAX_CARD_TEXT = 16_000;
/** At most this many options are buttons; more are a choice set. */
const MAX_BUTTONS = 5;

export type Card = Record<string, unknown>;

const card = (body: unknown[], extra: Record<string, unknown> = {}): Card => ({
  type: "AdaptiveCard",
  $schema: "http://adaptivecards.io/schemas/adaptive-card.json",
  version: "1.5",
  body,
  ...extra,
});

const text = (t: string, extra: Record<string, unknown> = {}) => ({
  type: "TextBlock",
  text: t,
  wrap: true,
  ...extra,
});

/**
 * Text as people and assistants wrote it. TextBlocks read a small Markdown subset (no HTML, no
 * images, links only), and whether a backslash escape is honoured differs between Teams clients:
 * text is shown as written rather than risk showing arguments with stray backslashes.
 */
const plain = (t: string) => t;

const cut = (t: string, max: number) => (t.length <= max ? t : `${t.slice(0, max)}…`);

const STATUS: Record<ThreadTask["status"], string> = {
  open: "⏳ waiting",
  in_progress: "▶️ working",
  awaiting_user: "❓ needs an answer",
  done: "✅ done",
  failed: "❌ failed",
  canceled: "⛔ canceled",
};

const STATE: Record<ThreadSnapshot["state"], string> = {
  working: "Working",
  "input-required": "Waiting for an answer",
  completed: "Done",
  failed: "Failed",
  canceled: "Canceled",
};

export function progressCard(s: ThreadSnapshot): Card {
  const rows = s.tasks.map((t) =>
    text(
      `${"\u2003".repeat(Math.min(t.depth, 6))}${STATUS[t.status]} · ${plain(cut(t.title, 200))}` +
        (t.assistant ? ` · _${plain(cut(t.assistant, 80))}_` : ""),
      { spacing: "None", size: "Small" },
    ),
  );
  return card([
    text(plain(cut(s.title, 300)), { weight: "Bolder", size: "Medium" }),
    text(
      `**${STATE[s.state]}** · ${s.taskCount} task${s.taskCount === 1 ? "" : "s"}` +
        (s.usage ? ` · ${usageLine(s.usage)}` : ""),
      { isSubtle: true },
    ),
    ...rows,
    ...(s.truncated
      ? [text(`… and ${s.taskCount - s.tasks.length} more`, { isSubtle: true, size: "Small" })]
      : []),
    ...(s.reason ? [text(plain(cut(s.reason, 1000)), { color: "Attention" })] : []),
  ]);
}

const contentText = (q: ThreadQuestion) => {
  const content = q.display.content;
  if (content === undefined) return undefined;
  const raw = typeof content === "string" ? content : JSON.stringify(content, null, 2);
  return raw.length <= MAX_CARD_TEXT
    ? raw
    : `${raw.slice(0, MAX_CARD_TEXT)}\n[cut at ${MAX_CARD_TEXT} of ${raw.length} characters: the whole of it is in the question ${q.urn}]`;
};

/** A question: waiting (with its actions and a refresh block) or answered (who answered what). */
export function questionCard(q: ThreadQuestion, requestTitle?: string): Card {
  const shown = contentText(q);
  const head = [
    ...(requestTitle ? [text(plain(cut(requestTitle, 300)), { isSubtle: true, size: "Small" })] : []),
    text(plain(q.display.title), { weight: "Bolder", size: "Medium" }),
    ...(q.display.description ? [text(plain(q.display.description))] : []),
    ...(q.binding ? [text(`Tool: \`${plain(q.binding.tool)}\``, { size: "Small" })] : []),
    ...(shown !== undefined
      ? [
          {
            type: "Container",
            style: "emphasis",
            items: [text(plain(shown), { fontType: "Monospace", size: "Small" })],
          },
        ]
      : []),
  ];
  if (q.answered)
    return card([
      ...head,
      text(
        `✔️ Answered by **${plain(q.answered.byName ?? q.answered.by)}**${capabilitiesOf(q.answered)}: ${plain(cut(q.answered.summary, 500))}`,
        {
          color: "Good",
        },
      ),
    ]);
  const data = { interaction: q.urn };
  const options = q.options ?? [];
  const body: unknown[] = [...head];
  const actions: unknown[] = [];
  const submit = (title: string) => ({
    type: "Action.Execute",
    title,
    verb: ANSWER_VERB,
    data,
    style: "positive",
  });
  if ((q.kind === "confirm" || q.kind === "select") && options.length > 0 && options.length <= MAX_BUTTONS) {
    for (const o of options)
      actions.push({
        type: "Action.Execute",
        title: cut(o.label, 60),
        verb: ANSWER_VERB,
        data: { ...data, option: o.id },
        ...(o.style === "primary"
          ? { style: "positive" }
          : o.style === "danger"
            ? { style: "destructive" }
            : {}),
      });
  } else {
    // A composite question: a choice set and a text, either one (both or neither: the engine refuses).
    const composite = q.kind === "composite";
    if (options.length > 0) {
      const preset = options.find((o) => o.isDefault)?.id;
      body.push({
        type: "Input.ChoiceSet",
        id: "choice",
        style: "compact",
        isRequired: !composite,
        errorMessage: "Choose one",
        ...(composite ? { label: "Choose one…", placeholder: "(or write your own answer below)" } : {}),
        choices: options.map((o) => ({ title: cut(o.label, 200), value: o.id })),
        ...(preset && !composite ? { value: preset } : {}),
      });
    }
    if (options.length === 0 || composite)
      body.push({
        type: "Input.Text",
        id: "value",
        isMultiline: q.purpose !== "request_info",
        isRequired: !composite && (q.validation?.required ?? q.kind === "input"),
        ...(composite ? { label: "…or your own answer" } : {}),
        ...(q.validation?.regex
          ? { regex: q.validation.regex, errorMessage: `Must match ${q.validation.regex}` }
          : {}),
        placeholder: "Your answer",
      });
    actions.push(submit(options.length > 0 ? "Answer" : "Send"));
  }
  return card(body, {
    actions,
    refresh: { action: { type: "Action.Execute", title: "Refresh", verb: REFRESH_VERB, data } },
  });
}

/** The answer, cut to what a card holds, or how the request ended without one. */
export function answerCard(s: ThreadSnapshot): Card {
  if (s.state !== "completed")
    return card([
      text(`${s.state === "failed" ? "❌ Failed" : "⛔ Canceled"}: ${plain(s.title)}`, { weight: "Bolder" }),
      ...(s.reason ? [text(plain(cut(s.reason, 2000)))] : []),
    ]);
  const answer = s.answer ?? "";
  const whole = answer.length <= MAX_CARD_TEXT;
  return card([
    text(plain(cut(s.title, 300)), { weight: "Bolder", isSubtle: true, size: "Small" }),
    // The answer is the assistants' Markdown: shown as Markdown.
    text(whole ? answer : answer.slice(0, MAX_CARD_TEXT)),
    ...(whole
      ? []
      : [
          text(
            `[cut at ${MAX_CARD_TEXT} of ${answer.length} characters: the whole answer is at GET /v1/tasks/${s.rootTaskUrn} or \`arbor show ${s.rootTaskUrn}\`]`,
            { isSubtle: true, size: "Small" },
          ),
        ]),
  ]);
}

export const asRender = (c: Card, fallback: string): ChatRender => ({
  text: cut(fallback, 1000),
  payload: { attachments: [{ contentType: CARD_CONTENT_TYPE, content: c }] },
});

/** What was chosen or written, short (an option's label, the text cut). */
export function answerSummary(
  q: Pick<InteractionResource, "options">,
  r: { selectedOptionId?: string | undefined; inputValue?: string | undefined },
): string {
  const label = r.selectedOptionId
    ? (q.options?.find((o) => o.id === r.selectedOptionId)?.label ?? r.selectedOptionId)
    : undefined;
  const value = r.inputValue !== undefined ? cut(r.inputValue, 200) : undefined;
  return [label, value].filter((x) => x !== undefined).join(": ") || "(answered)";
}

/** An interaction resource as a thread shows it (answered: who and what, from its response). */
export function threadQuestion(i: InteractionResource): ThreadQuestion {
  return {
    ...questionOf(i),
    ...(i.status === "answered" && i.response
      ? { answered: { ...answeredBy(i.response), summary: answerSummary(i, i.response) } }
      : {}),
  };
}
