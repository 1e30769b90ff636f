import type { ScriptedTurn } from "../../shared/adapters/llm/scripted-llm.ts";
import type { ConverseWireRequest } from "./fake-bedrock.ts";

/**
 * A script for the fake Bedrock server that plays the engine's model: the plan when the planner
 * forces `create_plan`, a passing evaluation when the supervisor forces `report_evaluation`, and
 * for every other request (a leaf's turns) what `leaf` says, given the leaf's prompt and the text
 * of the first tool result in the conversation, if there is one.
 */
export interface PlanningScript {
  plan: Record<string, unknown>;
  /** The evaluation's reason; with `answer`, the parent's answer too. */
  evaluation: { reason: string; answer?: string };
  leaf: (turn: { prompt: string; toolResult: string | undefined }) => ScriptedTurn;
}

export function planningModel(script: PlanningScript): (request: ConverseWireRequest) => ScriptedTurn {
  return (request) => {
    const forced = request.toolConfig?.toolChoice?.tool?.name;
    if (forced === "create_plan") return { toolCalls: [{ name: "create_plan", arguments: script.plan }] };
    if (forced === "report_evaluation")
      return {
        toolCalls: [{ name: "report_evaluation", arguments: { passed: true, ...script.evaluation } }],
      };
    const messages = request.messages ?? [];
    const result = messages.flatMap((m) => m.content ?? []).find((b) => b.toolResult)?.toolResult;
    return script.leaf({
      prompt: messages[0]?.content?.[0]?.text ?? "",
      toolResult: result ? (result.content?.[0]?.text ?? "?") : undefined,
    });
  };
}
