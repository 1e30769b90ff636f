import type * as z from "zod";
import { answerRegexProblem } from "../../shared/domain/ask-question.ts";
import type { InteractionResource, InteractionResponseSchema } from "../../shared/domain/resources.ts";
import { heading, note, printable } from "./render.ts";

/**
 * A question to the person at the terminal (a plan to approve, a risky call to allow, a task to
 * assign), the same for a local run and a remote one: its title, description and content, its
 * options numbered. `--yes` takes the default option; the answer is read from `answers` (stdin's
 * lines): an option's number, id or label, or for a yes-or-no question (allow or deny, run or
 * cancel) y, yes, n or no, in any case (matchOption). A plan to approve can be edited (e): `edit`
 * opens it in the person's editor and gives back the checked plan, or says how else to edit it, and
 * nothing (the question is asked again). A free answer (an `input` question, or a `composite` one's text that names no option) is
 * held to the question's regex here too, and asked again when it does not match. Undefined when
 * stdin ends without an answer, or gives MAX_UNFIT answers in a row that fit nothing (a script
 * piping the wrong thing, such as `yes`, would otherwise be asked for ever).
 */
export const MAX_UNFIT = 10;
export type Question = Pick<InteractionResource, "display"> & {
  options?: InteractionResource["options"];
  kind?: InteractionResource["kind"];
  purpose?: InteractionResource["purpose"];
  validation?: InteractionResource["validation"];
};
export type Answer = z.input<typeof InteractionResponseSchema>;
type Option = NonNullable<Question["options"]>[number];

/** Edits a plan to approve: the edited plan (JSON text, checked), or undefined to ask again. */
export type PlanEditor = (plan: unknown, out: NodeJS.WritableStream) => Promise<string | undefined>;

/**
 * The option ids of the engine's yes-or-no questions: a risky call's approve / deny
 * (engine/turn/approvals.ts), a plan's approve / reject (engine/steps/planner.ts).
 */
const YES_IDS = new Set(["approve"]);
const NO_IDS = new Set(["deny", "reject"]);
const YES_WORDS = new Set(["y", "yes"]);
const NO_WORDS = new Set(["n", "no"]);
const EDIT_WORDS = new Set(["e", "edit"]);

/** The yes and the no option of a yes-or-no question (one of each among its options), else none. */
function yesNo(options: readonly Option[]): { yes: Option; no: Option } | undefined {
  const yes = options.filter((o) => YES_IDS.has(o.id));
  const no = options.filter((o) => NO_IDS.has(o.id));
  return yes.length === 1 && no.length === 1 ? { yes: yes[0] as Option, no: no[0] as Option } : undefined;
}

/**
 * The option a typed answer names: its number (1-based), its id, its label or id in any case, or,
 * when the question is a yes-or-no one, y / yes / n / no in any case. Undefined when it names none.
 */
export function matchOption(options: readonly Option[], typed: string): Option | undefined {
  const text = typed.trim();
  if (!text) return undefined;
  if (/^\d+$/.test(text)) return options[Number(text) - 1];
  const lower = text.toLowerCase();
  const named =
    options.find((o) => o.id === text) ??
    options.find((o) => o.id.toLowerCase() === lower || o.label.toLowerCase() === lower);
  if (named) return named;
  const pair = yesNo(options);
  if (!pair) return undefined;
  return YES_WORDS.has(lower) ? pair.yes : NO_WORDS.has(lower) ? pair.no : undefined;
}

export async function ask(
  i: Question,
  yes: boolean,
  answers: AsyncIterator<string>,
  out: NodeJS.WritableStream = process.stdout,
  editPlan?: PlanEditor,
): Promise<Answer | undefined> {
  out.write(`\n${heading(`? ${printable(i.display.title)}`)}\n`);
  if (i.display.description) out.write(`${printable(i.display.description, true)}\n`);
  if (i.display.content !== undefined)
    out.write(`${note(printable(JSON.stringify(i.display.content, null, 2).slice(0, 2000), true))}\n`);
  const options = i.options ?? [];
  for (const [n, o] of options.entries())
    out.write(`  ${n + 1}) ${printable(o.label)} [${printable(o.id)}]\n`);
  const fallback = options.find((o) => o.isDefault) ?? options[0];
  if (yes && fallback) {
    out.write(`> ${fallback.id} (--yes)\n`);
    return { selectedOptionId: fallback.id };
  }
  const free = !options.length || i.kind === "composite";
  const pair = yesNo(options);
  // A plan to approve, with its "Run it" option: an edited plan is sent with that option chosen.
  const editable = i.purpose === "approve_plan" && pair !== undefined && editPlan !== undefined;
  const extra = `${pair ? `, y (${printable(pair.yes.label)}) or n (${printable(pair.no.label)})` : ""}${
    editable ? ", e to edit the plan" : ""
  }`;
  for (let unfit = 0; ; unfit++) {
    if (unfit === MAX_UNFIT) {
      out.write(`${MAX_UNFIT} answers in a row fit none of what was asked: no answer taken.\n`);
      return undefined;
    }
    out.write(
      !options.length
        ? "Your answer: "
        : free
          ? `Choose 1-${options.length} or an id${extra}, or write your own answer: `
          : `Choose 1-${options.length} or an id${extra}: `,
    );
    const next = await answers.next();
    if (next.done) return undefined;
    const text = next.value.trim();
    const chosen = matchOption(options, text);
    if (chosen) return { selectedOptionId: chosen.id };
    if (editable && EDIT_WORDS.has(text.toLowerCase())) {
      const edited = await editPlan(i.display.content, out);
      if (edited !== undefined) return { selectedOptionId: pair.yes.id, inputValue: edited };
      unfit = -1; // an edit that was not sent is not an answer that fit nothing
      continue;
    }
    if (free) {
      const regex = i.validation?.regex;
      const problem =
        !text && i.validation?.required
          ? "An answer is required."
          : regex && text
            ? answerRegexProblem(regex, text)
            : undefined;
      if (!problem && (text || i.kind === "input")) return { inputValue: text };
      out.write(`${printable(problem ?? "An answer is needed.")}\n`);
      continue;
    }
    out.write(`"${text}" is not one of the choices.\n`);
  }
}
