import { type Usage, ZERO_USAGE } from "../domain/budgets.ts";
import { ancestors, lastElement } from "../domain/urn.ts";
import type { LlmUsage } from "../ports/llm.ts";
import type { EngineDeps } from "./context.ts";

/**
 * Usage (turns, tokens, cost) per task, rolled up to every ancestor task in the same transaction,
 * so each level of the tree can be held to its own budget.
 */
const usageKey = (taskId: string) => `usage#${taskId}`;

export async function usageOf(deps: Pick<EngineDeps, "state">, taskId: string): Promise<Usage> {
  return { ...ZERO_USAGE, ...(await deps.state.get<Partial<Usage>>(usageKey(taskId)))?.data };
}

export function costOf(deps: EngineDeps, usage: LlmUsage): number {
  const p = deps.settings.pricePer1kTokens;
  return (usage.inputTokens * p.input + usage.outputTokens * p.output) / 1000;
}

/**
 * Adds one LLM call's usage to the task (turn counted) and to each ancestor task (tokens and cost
 * only), in one transaction of counter adds: siblings counting into the same parent at the same
 * moment never conflict.
 */
export async function recordUsage(
  deps: EngineDeps,
  taskId: string,
  llm: LlmUsage,
  countTurn: boolean,
): Promise<void> {
  const amounts: Record<keyof Usage, number> = {
    turns: 0,
    inputTokens: llm.inputTokens,
    outputTokens: llm.outputTokens,
    costUsd: costOf(deps, llm),
  };
  const chain = [taskId, ...ancestors(taskId).filter((u) => lastElement(u).type === "Task")];
  const updatedAt = deps.clock().toISOString();
  await deps.state.transact(
    chain.map((id, i) => ({
      op: "add" as const,
      key: usageKey(id),
      kind: "usage",
      updatedAt,
      amounts: i === 0 && countTurn ? { ...amounts, turns: 1 } : amounts,
    })),
  );
}
