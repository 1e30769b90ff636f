import { type Usage, ZERO_USAGE } from "../domain/budgets.ts";
import { costAt, type PriceOverrides, priceOf } from "../domain/model-catalogue.ts";
import { ancestors, lastElement } from "../domain/urn.ts";
import type { LlmResponse, LlmUsage } from "../ports/llm.ts";
import type { StateStore } from "../ports/state-store.ts";
import { childCountKey } from "../store/task-log.ts";

/**
 * Usage (turns, tokens, cost) per task, rolled up to every ancestor task in the same transaction,
 * so each level of the tree can be held to its own budget.
 *
 * A task's usage is its own counter (`usage#<task>`: its turns, its own calls) plus USAGE_SHARDS
 * counters its descendants add to (`usage#<task>#<n>`, n from a hash of the descendant), summed on
 * read. Without the shards every leaf of a tree added to the root's one item: on DynamoDB, two
 * transactions writing one item at the same moment conflict, and siblings spent their time
 * cancelling each other's writes and retrying (bench/usage-contention.ts measures it).
 */
export const USAGE_SHARDS = 8;

/** What pricing needs of the engine's dependencies (EngineDeps has it). */
interface UsageDeps {
  settings: { modelPrices: PriceOverrides };
}

const usageKey = (taskId: string) => `usage#${taskId}`;
const shardKey = (taskId: string, shard: number) => `usage#${taskId}#${shard}`;
/**
 * FNV-1a: spreads ids that differ in one character over every shard (a multiply-by-31 hash taken
 * modulo a power of two does not: 31 is -1 there, so "leaf12" and "leaf23" land together).
 * Queries cover every shard, so the shard an item was written to never needs to be found again.
 */
const shardOf = (id: string, shards = USAGE_SHARDS): number => {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193) >>> 0;
  return h % shards;
};

/**
 * The task's usage: its own counter, plus its shards when it has children. A task without any (a
 * leaf: most tasks) has no descendant to have added to a shard, and its child count (a consistent
 * read, written in the transaction that records each child) says so: its eight shards are not
 * read. Usage shards came after child counts, so every task with shards has a child count.
 */
export async function usageOf(deps: { state: StateStore }, taskId: string): Promise<Usage> {
  // The own counter beside the child count (each a round trip on DynamoDB): a leaf reads nothing more.
  const [counts, own] = await Promise.all([
    deps.state.get<{ created?: number }>(childCountKey(taskId)),
    deps.state.get<Partial<Usage>>(usageKey(taskId)),
  ]);
  const shards = counts?.data.created ? USAGE_SHARDS : 0;
  const parts = [
    own,
    ...(await Promise.all(
      Array.from({ length: shards }, (_, n) => deps.state.get<Partial<Usage>>(shardKey(taskId, n))),
    )),
  ];
  const sum: Usage = { ...ZERO_USAGE };
  for (const part of parts) {
    for (const field of Object.keys(sum) as (keyof Usage)[]) sum[field] += part?.data[field] ?? 0;
  }
  return sum;
}

/**
 * What one model call cost, at the price of the model that answered (the operator's, else the
 * catalogue's), or undefined when that model has no price: never another model's.
 */
export function costOf(deps: UsageDeps, model: string, usage: LlmUsage): number | undefined {
  const price = priceOf(model, deps.settings.modelPrices);
  return price ? costAt(price, usage) : undefined;
}

/**
 * Adds one LLM call's usage to the task (turn counted) and to each ancestor task (tokens and cost
 * only, into the ancestor's shard for this task), in one transaction of counter adds.
 */
export async function recordUsage(
  deps: UsageDeps & { state: StateStore; clock: () => Date },
  taskId: string,
  call: Pick<LlmResponse, "usage" | "model">,
  countTurn: boolean,
): Promise<void> {
  const llm = call.usage;
  const cost = costOf(deps, call.model, llm);
  const amounts: Record<keyof Usage, number> = {
    turns: 0,
    inputTokens: llm.inputTokens + (llm.cacheReadTokens ?? 0) + (llm.cacheWriteTokens ?? 0),
    outputTokens: llm.outputTokens,
    costUsd: cost ?? 0,
    unpricedCalls: cost === undefined ? 1 : 0,
  };
  const above = ancestors(taskId).filter((u) => lastElement(u).type === "Task");
  const shard = shardOf(taskId);
  const updatedAt = deps.clock().toISOString();
  await deps.state.transact([
    {
      op: "add" as const,
      key: usageKey(taskId),
      kind: "usage",
      updatedAt,
      amounts: countTurn ? { ...amounts, turns: 1 } : amounts,
    },
    ...above.map((id) => ({
      op: "add" as const,
      key: shardKey(id, shard),
      kind: "usage",
      updatedAt,
      amounts,
    })),
  ]);
}
