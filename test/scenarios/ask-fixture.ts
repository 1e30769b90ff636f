import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import type { AssistantDefinition } from "../../shared/engine/engine.ts";
import type { LlmRequest } from "../../shared/ports/llm.ts";
import { isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * An assistant that asks a person (the `ask_person` tool) and a scripted model for it: the leaf asks
 * `question` first; once it has the answer (the tool's result), it answers with what it was told.
 */
export const CLERK: AssistantDefinition[] = [
  {
    name: "Clerk",
    id: "clerk",
    purpose: "Book meetings, asking a person when something is missing",
    tools: ["ask_person", "calculator"],
  },
];

export const DATE_QUESTION = {
  title: "Which date should the offsite be on?",
  description: "Give it as YYYY-MM-DD.",
  validation: { regex: "^\\d{4}-\\d{2}-\\d{2}$", required: true },
};

export const COLOUR_QUESTION = {
  title: "Which colour for the badges?",
  options: ["Red", "Blue", "Green"],
  freeAnswer: true,
  validation: { regex: "^[A-Za-z ]+$" },
};

/** The tool results the leaf's model calls saw, in order (what `ask_person` gave back). */
export const toolResults = (r: LlmRequest) =>
  r.messages.flatMap((m) =>
    m.role === "tool" ? [{ content: m.content ?? "", isError: m.isError === true }] : [],
  );

export function askingScript(question: Record<string, unknown>, seen: string[] = []): ScriptFunction {
  return (r) => {
    if (isPlan(r)) return planOf({ name: "Book the offsite", purpose: "Book the team offsite" });
    if (isEvaluation(r)) return pass();
    const results = toolResults(r);
    const last = results.at(-1);
    if (!last) return { toolCalls: [{ name: "ask_person", arguments: question }] };
    seen.push(last.content);
    if (last.isError) return { content: `could not ask: ${last.content}` };
    const answer = JSON.parse(last.content) as {
      text?: string;
      option?: { label: string };
      answeredBy: string;
    };
    return { content: `booked: ${answer.option?.label ?? answer.text} (told by ${answer.answeredBy})` };
  };
}
