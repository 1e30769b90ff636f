import { type AskQuestion, AskQuestionSchema, askKindOf, askOptionId } from "../../domain/ask-question.ts";
import { formatIssues, type InteractionResource, type ToolCall } from "../../domain/resources.ts";
import type { ToolDescriptor, ToolResult } from "../../ports/tools.ts";
import type { EngineDeps } from "../context.ts";
import {
  announceStored,
  type InteractionRequest,
  interactionMeta,
  requestInteraction,
} from "../interactions.ts";

/**
 * The `ask_person` tool: an assistant asks a person a question (request_info) and its task waits in
 * `awaiting_user` with nothing running, exactly as for a risky call's approval: the step that meets
 * the call asks and ends; the answer (from any channel: Engine.respond) sends the resume command,
 * whose turn step finds the question answered and gives the model the answer as the call's result.
 *
 * The engine's step handles the call itself on every runtime (it waits on a person, not on a
 * function): the tool's descriptor says so (`engine: "ask_person"`), and the call never reaches the
 * tool service (locally) or the tool function (AWS).
 *
 * One call asks once: the question is named after the call's place (`ask-<turn>-<k>`), so a step
 * driven again (a duplicate command, a crash and the watchdog) finds it and asks nothing new. A
 * question the model got wrong (no title, too many options, a regex that could hang) is not asked:
 * the model reads why, as the call's error result, and may ask again in its next turn.
 */
export const isAskPerson = (d: ToolDescriptor | undefined): boolean => d?.engine === "ask_person";

export async function askPerson(
  deps: EngineDeps,
  taskId: string,
  name: string,
  call: ToolCall,
): Promise<"waiting" | ToolResult> {
  const asked = await deps.resources.getAs("uip.Interaction", interactionMeta(taskId, name).id);
  if (!asked) {
    const parsed = AskQuestionSchema.safeParse(call.arguments);
    if (!parsed.success)
      return {
        content:
          `Nothing was asked: the question is not valid (${formatIssues(parsed.error).join("; ")}). ` +
          `Fix it and call ${call.name} again.`,
        isError: true,
      };
    await requestInteraction(deps, taskId, name, requestOf(parsed.data));
    return "waiting";
  }
  if (asked.status === "pending") {
    await announceStored(deps, asked); // in case a crash came before the task waited
    return "waiting";
  }
  if (asked.status === "expired")
    return { content: `Nobody answered "${asked.display.title}": go on without the answer.`, isError: true };
  return { content: answerText(asked) };
}

function requestOf(q: AskQuestion): InteractionRequest {
  return {
    kind: askKindOf(q),
    purpose: "request_info",
    display: { title: q.title, ...(q.description ? { description: q.description } : {}) },
    ...(q.options ? { options: q.options.map((label, i) => ({ id: askOptionId(i), label })) } : {}),
    ...(q.validation ? { validation: q.validation } : {}),
  };
}

/** What the model sees: who answered, and the option they chose or the text they wrote (JSON). */
export function answerText(i: InteractionResource): string {
  const r = i.response;
  const option = r?.selectedOptionId ? i.options?.find((o) => o.id === r.selectedOptionId) : undefined;
  return JSON.stringify({
    question: i.display.title,
    answeredBy: r?.actor ?? "unknown",
    ...(option ? { option: { id: option.id, label: option.label } } : { text: r?.inputValue ?? "" }),
    ...(r?.comment ? { comment: r.comment } : {}),
  });
}
