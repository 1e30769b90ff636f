import type { z } from "zod";
import { answerRegexProblem } from "../domain/ask-question.ts";
import type { InteractionResource, InteractionResponseSchema } from "../domain/resources.ts";
import { heading, note, printable } from "./render.ts";

/**
 * A question to the person at the terminal (a plan to approve, a risky call to allow, a task to
 * assign), the same for a local run and a remote one: its title, description and content, its
 * options numbered. `--yes` takes the default option; the answer is read from `answers` (stdin's
 * lines). A free answer (an `input` question, or a `composite` one's text that names no option) is
 * held to the question's regex here too, and asked again when it does not match. Undefined when
 * stdin ends without an answer, or gives MAX_UNFIT answers in a row that fit nothing (a script
 * piping the wrong thing, such as `yes`, would otherwise be asked for ever).
 */
export const MAX_UNFIT = 10;
export type Question = Pick<InteractionResource, "display"> & {
  options?: InteractionResource["options"];
  kind?: InteractionResource["kind"];
  validation?: InteractionResource["validation"];
};
export type Answer = z.input<typeof InteractionResponseSchema>;

export async function ask(
  i: Question,
  yes: boolean,
  answers: AsyncIterator<string>,
  out: NodeJS.WritableStream = process.stdout,
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
  for (let unfit = 0; ; unfit++) {
    if (unfit === MAX_UNFIT) {
      out.write(`${MAX_UNFIT} answers in a row fit none of what was asked: no answer taken.\n`);
      return undefined;
    }
    out.write(
      !options.length
        ? "Your answer: "
        : free
          ? `Choose 1-${options.length} or an id, or write your own answer: `
          : `Choose 1-${options.length} or an id: `,
    );
    const next = await answers.next();
    if (next.done) return undefined;
    const text = next.value.trim();
    const chosen = options[Number(text) - 1] ?? options.find((o) => o.id === text);
    if (chosen) return { selectedOptionId: chosen.id };
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
