import type { z } from "zod";
import type { InteractionResource, InteractionResponseSchema } from "../domain/resources.ts";
import { heading, note, printable } from "./render.ts";

/**
 * A question to the person at the terminal (a plan to approve, a risky call to allow, a task to
 * assign), the same for a local run and a remote one: its title, description and content, its
 * options numbered. `--yes` takes the default option; the answer is read from `answers` (stdin's
 * lines). Undefined when stdin ends without an answer.
 */
export type Question = Pick<InteractionResource, "display"> & { options?: InteractionResource["options"] };
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
  for (;;) {
    out.write(options.length ? `Choose 1-${options.length} or an id: ` : "Your answer: ");
    const next = await answers.next();
    if (next.done) return undefined;
    const text = next.value.trim();
    if (!options.length) return { inputValue: text };
    const chosen = options[Number(text) - 1] ?? options.find((o) => o.id === text);
    if (chosen) return { selectedOptionId: chosen.id };
    out.write(`"${text}" is not one of the choices.\n`);
  }
}
