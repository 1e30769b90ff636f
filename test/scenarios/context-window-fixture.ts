import type { ScriptedTurn, ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { DEFAULT_BUDGETS } from "../../shared/domain/budgets.ts";
import { estimateCounter } from "../../shared/engine/window/tokens.ts";
import { requestTokens } from "../../shared/engine/window/window.ts";
import type { LlmMessage, LlmRequest } from "../../shared/ports/llm.ts";
import { isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/** A leaf that calls a tool many times, and checks on every model request it gets (context-window*.test.ts). */
export const COUNTER = [
  {
    name: "Counter",
    id: "counter",
    purpose: "Count the words of every text, one by one",
    tools: ["word_count"],
  },
];
export const CONTEXT_TOKENS = 6_000;
export const ANSWER_TOKENS = 1_000;
export const BUDGET = CONTEXT_TOKENS - ANSWER_TOKENS;
export const settings = {
  contextTokens: CONTEXT_TOKENS,
  answerTokens: ANSWER_TOKENS,
  defaultBudgets: { ...DEFAULT_BUDGETS, maxTurns: 400, maxTokens: 100_000_000, maxCostUsd: 1_000 },
};

/** The number of the newest call in a request (its id is `call-<n>`), 0 when there is none. */
export const newestCall = (r: LlmRequest): number => {
  const last = r.messages.filter((m) => m.role === "assistant").at(-1);
  const id = last?.role === "assistant" ? last.toolCalls?.[0]?.id : undefined;
  return id ? Number(id.split("-")[1]) : 0;
};

/** Every call answered once, right after its assistant message; no result without its call. */
export function pairsHold(messages: readonly LlmMessage[]): boolean {
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] as LlmMessage;
    if (m.role === "tool") return false;
    if (m.role !== "assistant") continue;
    for (const c of m.toolCalls ?? []) {
      const next = messages[++i];
      if (next?.role !== "tool" || next.toolCallId !== c.id) return false;
    }
  }
  return true;
}

export interface Seen {
  requests: LlmRequest[];
  maxTokens: number;
  problems: string[];
}

/** The leaf calls word_count `calls` times (every 10th text long enough to be stubbed), then answers. */
export function countingScript(calls: number, seen: Seen): ScriptFunction {
  return (r): ScriptedTurn => {
    if (isPlan(r))
      return planOf({
        name: "Count words",
        purpose: "Count the words of each text",
        budgets: { maxTurns: 400 },
      });
    if (isEvaluation(r)) return pass();
    const { signal: _signal, ...rest } = r;
    const copy = structuredClone(rest) as LlmRequest;
    seen.requests.push(copy);
    const tokens = requestTokens(estimateCounter.count, r);
    seen.maxTokens = Math.max(seen.maxTokens, tokens);
    const n = newestCall(r);
    const at = `request ${seen.requests.length} (after call ${n})`;
    if (tokens > BUDGET) seen.problems.push(`${at}: ${tokens} tokens`);
    const first = r.messages[0];
    if (first?.role !== "user" || !first.content.startsWith("# Task: Count words"))
      seen.problems.push(`${at}: the task prompt is not first`);
    if (!pairsHold(r.messages))
      seen.problems.push(`${at}: a tool result without its call, or a call without result`);
    const lastMsg = r.messages.at(-1);
    if (n > 0 && (lastMsg?.role !== "tool" || lastMsg.toolCallId !== `call-${n}`))
      seen.problems.push(`${at}: the newest turn is not last`);
    if (n >= calls) return { content: `counted ${n} texts` };
    const text = `text ${n + 1}: ${"lorem ipsum dolor ".repeat((n + 1) % 10 === 0 ? 60 : 8)}`;
    return { toolCalls: [{ id: `call-${n + 1}`, name: "word_count", arguments: { text } }] };
  };
}
