import { addUsage, type Usage, ZERO_USAGE } from "../domain/budgets.ts";
import { ancestors, lastElement } from "../domain/urn.ts";
import { ConflictError } from "../errors.ts";
import type { LlmUsage } from "../ports/llm.ts";
import type { EngineDeps } from "./context.ts";

/**
 * Usage (turns, tokens, cost) per task, rolled up to every ancestor task in the same transaction,
 * so each level of the tree can be held to its own budget.
 */
const usageKey = (taskId: string) => `usage#${taskId}`;

export async function usageOf(deps: EngineDeps, taskId: string): Promise<Usage> {
  return (await deps.state.get<Usage>(usageKey(taskId)))?.data ?? ZERO_USAGE;
}

export function costOf(deps: EngineDeps, usage: LlmUsage): number {
  const p = deps.settings.pricePer1kTokens;
  return (usage.inputTokens * p.input + usage.outputTokens * p.output) / 1000;
}

/** Adds one LLM call's usage to the task (turn counted) and to each ancestor task (tokens and cost only). */
export async function recordUsage(
  deps: EngineDeps,
  taskId: string,
  llm: LlmUsage,
  countTurn: boolean,
): Promise<void> {
  const delta: Usage = {
    turns: 0,
    inputTokens: llm.inputTokens,
    outputTokens: llm.outputTokens,
    costUsd: costOf(deps, llm),
  };
  const chain = [
    taskId,
    ...ancestors(taskId)
      .filter((u) => lastElement(u).type === "Task")
      .reverse(),
  ];
  for (let attempt = 1; ; attempt++) {
    const current = await Promise.all(chain.map((id) => deps.state.get<Usage>(usageKey(id))));
    const updatedAt = deps.clock().toISOString();
    try {
      await deps.state.transact(
        chain.map((id, i) => ({
          op: "put" as const,
          record: {
            key: usageKey(id),
            kind: "usage",
            updatedAt,
            data: addUsage(
              current[i]?.data ?? ZERO_USAGE,
              i === 0 && countTurn ? { ...delta, turns: 1 } : delta,
            ),
          },
          expectedVersion: current[i]?.version ?? 0,
        })),
      );
      return;
    } catch (e) {
      if (!(e instanceof ConflictError) || attempt >= 50) throw e;
      // Siblings finishing together contend for their ancestors' records: back off a little.
      await new Promise((r) => setTimeout(r, Math.random() * attempt));
    }
  }
}
