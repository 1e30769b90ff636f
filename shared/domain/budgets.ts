import type { Budgets } from "./resources.ts";

/**
 * Budgets are inherited down the tree: a child may ask for less than its parent, never more.
 * Usage is rolled up to every ancestor, so each level can be checked against its own limits.
 */
/** Every budget, set. */
export type Limits = { [K in keyof Budgets]-?: NonNullable<Budgets[K]> };

export const DEFAULT_BUDGETS: Limits = {
  maxDepth: 4,
  maxFanOut: 12,
  maxTasks: 200,
  maxTurns: 12,
  maxTokens: 2_000_000,
  maxCostUsd: 20,
  maxCorrectiveRounds: 2,
  maxWallMs: 30 * 60_000,
};

export function inheritBudgets(parent: Budgets, child: Budgets | undefined): Budgets {
  const out: Budgets = { ...parent };
  for (const [k, v] of Object.entries(child ?? {}) as [keyof Budgets, number | undefined][]) {
    if (v === undefined) continue;
    const p = parent[k];
    out[k] = p === undefined ? v : Math.min(p, v);
  }
  return out;
}

export interface Usage {
  turns: number;
  inputTokens: number;
  outputTokens: number;
  /** Of the known costs only (model-catalogue.ts). */
  costUsd: number;
  /** Model calls whose model has no price: while any, the cost is a lower bound, shown as unknown. */
  unpricedCalls: number;
}

export const ZERO_USAGE: Usage = { turns: 0, inputTokens: 0, outputTokens: 0, costUsd: 0, unpricedCalls: 0 };

export const addUsage = (a: Usage, b: Usage): Usage => ({
  turns: a.turns + b.turns,
  inputTokens: a.inputTokens + b.inputTokens,
  outputTokens: a.outputTokens + b.outputTokens,
  costUsd: a.costUsd + b.costUsd,
  unpricedCalls: a.unpricedCalls + b.unpricedCalls,
});

/** The first budget `usage` has reached, or undefined. Turns count for the task itself only. */
export function exceeded(
  budgets: Budgets,
  usage: Usage,
  own: boolean,
): { budget: keyof Budgets; limit: number; used: number } | undefined {
  const tokens = usage.inputTokens + usage.outputTokens;
  if (own && budgets.maxTurns !== undefined && usage.turns >= budgets.maxTurns)
    return { budget: "maxTurns", limit: budgets.maxTurns, used: usage.turns };
  if (budgets.maxTokens !== undefined && tokens >= budgets.maxTokens)
    return { budget: "maxTokens", limit: budgets.maxTokens, used: tokens };
  if (budgets.maxCostUsd !== undefined && usage.costUsd >= budgets.maxCostUsd)
    return { budget: "maxCostUsd", limit: budgets.maxCostUsd, used: usage.costUsd };
  return undefined;
}

/**
 * A cost as a person reads it: "$0.0042", "$1.25"; "cost unknown" when a model without a price
 * answered every call, "$0.12 + unknown" when it answered some.
 */
export function costText(usage: Pick<Usage, "costUsd" | "unpricedCalls">): string {
  const cost = usage.costUsd;
  if (usage.unpricedCalls > 0 && cost === 0) return "cost unknown";
  const dollars =
    cost === 0 ? "$0" : cost < 0.01 ? `$${Number(cost.toPrecision(2)).toString()}` : `$${cost.toFixed(2)}`;
  return usage.unpricedCalls > 0 ? `${dollars} + unknown` : dollars;
}
