import type { KnownBlock, ModalView } from "@slack/types";
import { answerRegexProblem } from "../../../domain/ask-question.ts";
import type { InteractionResource } from "../../../domain/resources.ts";
import type { InteractionResponse } from "../../../engine/interactions.ts";
import { cut, esc, type ModalMode } from "./blocks.ts";

/**
 * The modal a question is answered in (an `input` or `composite` question, a choice among more
 * options than fit as buttons, an edited plan), and reading what was submitted. How to drive it:
 *
 *   const view = answerModal(interaction, mode, { urn, channel, threadTs });   // views.open
 *   const read = readSubmission(interaction, mode, payload.view.state.values);
 *   if ("errors" in read) return c.json({ response_action: "errors", errors: read.errors });
 *
 * The interaction's URN rides in `private_metadata` (at most 3000 characters; a URN is at most
 * 1000). A value that fails the question's `validation` (required, regex) is refused in the modal,
 * on its field, before the engine is asked; the engine checks again.
 */
export const MODAL_CALLBACK = "arbor.answer";
export const CHOICE_BLOCK = "arbor.choice";
export const VALUE_BLOCK = "arbor.value";
const INPUT_MAX = 3000;

export interface ModalMeta {
  urn: string;
  mode: ModalMode;
  channel?: string | undefined;
  threadTs?: string | undefined;
}

export function parseModalMeta(raw: unknown): ModalMeta | undefined {
  if (typeof raw !== "string" || raw.length > 3000) return undefined;
  try {
    const m = JSON.parse(raw) as Partial<ModalMeta>;
    if (typeof m.urn !== "string" || (m.mode !== "input" && m.mode !== "select" && m.mode !== "edit"))
      return undefined;
    return {
      urn: m.urn,
      mode: m.mode,
      ...(typeof m.channel === "string" ? { channel: m.channel } : {}),
      ...(typeof m.threadTs === "string" ? { threadTs: m.threadTs } : {}),
    };
  } catch {
    return undefined;
  }
}

const plain = (text: string, max = 75) => ({ type: "plain_text" as const, text: cut(text, max) });

export function answerModal(i: InteractionResource, meta: ModalMeta): ModalView {
  const blocks: KnownBlock[] = [
    {
      type: "section",
      text: {
        type: "mrkdwn",
        text: cut(
          `*${esc(i.display.title)}*${i.display.description ? `\n${esc(i.display.description)}` : ""}`,
          3000,
        ),
      },
    },
  ];
  const options = i.options ?? [];
  const composite = i.kind === "composite";
  if (meta.mode !== "edit" && options.length > 0)
    blocks.push({
      type: "input",
      block_id: CHOICE_BLOCK,
      label: plain(composite ? "Choose one…" : "Choose"),
      // A composite question: an option or a text of one's own, either one (readSubmission).
      optional: composite,
      element: {
        type: "static_select",
        action_id: "choice",
        options: options.slice(0, 100).map((o) => ({ text: plain(o.label), value: o.id })),
      },
    });
  if (meta.mode === "edit" || i.kind === "input" || i.kind === "composite") {
    const plan = meta.mode === "edit" ? JSON.stringify(i.display.content ?? {}, null, 2) : undefined;
    blocks.push({
      type: "input",
      block_id: VALUE_BLOCK,
      label: plain(
        meta.mode === "edit" ? "The plan (JSON)" : composite ? "…or your own answer" : "Your answer",
      ),
      optional: meta.mode !== "edit" && !i.validation?.required && i.kind !== "input",
      element: {
        type: "plain_text_input",
        action_id: "value",
        multiline: true,
        max_length: INPUT_MAX,
        ...(plan !== undefined && plan.length <= INPUT_MAX ? { initial_value: plan } : {}),
      },
      ...(i.validation?.regex ? { hint: plain(`Must match ${i.validation.regex}`, 2000) } : {}),
    });
  }
  return {
    type: "modal",
    callback_id: MODAL_CALLBACK,
    private_metadata: JSON.stringify(meta),
    title: plain(meta.mode === "edit" ? "Edit the plan" : "Answer", 24),
    submit: plain(meta.mode === "edit" ? "Run it" : "Send", 24),
    close: plain("Cancel", 24),
    blocks,
  };
}

type StateValues = Record<
  string,
  Record<string, { value?: string | null; selected_option?: { value?: string } | null }>
>;

export function readSubmission(
  i: InteractionResource,
  meta: ModalMeta,
  values: unknown,
): { response: InteractionResponse } | { errors: Record<string, string> } {
  const state = (typeof values === "object" && values !== null ? values : {}) as StateValues;
  const choice = state[CHOICE_BLOCK]?.choice?.selected_option?.value ?? undefined;
  const value = state[VALUE_BLOCK]?.value?.value ?? undefined;
  const errors: Record<string, string> = {};
  if (meta.mode === "edit") {
    // Only a plan's approval is edited: an "edit" form naming any other question (its metadata not
    // the one Arbor set) would otherwise answer it with its first option (a risky call's "Allow").
    if (i.purpose !== "approve_plan" || i.kind !== "confirm")
      return {
        errors: { [VALUE_BLOCK]: "This form does not fit the question: answer it with its own buttons" },
      };
    if (!value) errors[VALUE_BLOCK] = "Give the plan as JSON, or close this and press the plan's own buttons";
    else {
      try {
        JSON.parse(value);
      } catch {
        errors[VALUE_BLOCK] = "That is not valid JSON";
      }
    }
    const approve = (i.options ?? []).find((o) => o.id === "approve") ?? i.options?.[0];
    if (Object.keys(errors).length > 0) return { errors };
    return {
      response: { ...(approve ? { selectedOptionId: approve.id } : {}), inputValue: value as string },
    };
  }
  const options = i.options ?? [];
  if (options.length > 0 && (i.kind === "select" || i.kind === "confirm") && !choice)
    errors[CHOICE_BLOCK] = "Choose one";
  if (choice !== undefined && !options.some((o) => o.id === choice))
    errors[CHOICE_BLOCK] = "Choose one of the options shown";
  const v = i.validation;
  if (i.kind === "input" && v?.required && !value) errors[VALUE_BLOCK] = "An answer is required";
  if (i.kind === "composite" && (choice !== undefined) === Boolean(value)) {
    const why = value
      ? "Choose an option or write your own answer, not both"
      : "Choose an option or write your own answer";
    errors[value ? VALUE_BLOCK : CHOICE_BLOCK] = why;
  }
  // The same bounded check as the engine's (a regex that could hang is never run).
  const problem = v?.regex && value ? answerRegexProblem(v.regex, value) : undefined;
  if (problem)
    errors[VALUE_BLOCK] = cut(
      problem.startsWith("input must match") ? `Must match ${v?.regex}` : problem,
      2000,
    );
  if (Object.keys(errors).length > 0) return { errors };
  return {
    response: { ...(choice ? { selectedOptionId: choice } : {}), ...(value ? { inputValue: value } : {}) },
  };
}
