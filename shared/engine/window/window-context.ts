import type { Assistant } from "../../domain/resources.ts";
import { wholeCharacters } from "../../domain/text.ts";
import type { LlmToolSpec } from "../../ports/llm.ts";
import type { EngineDeps } from "../context.ts";
import { type TokenCounter, tokenCounter } from "./tokens.ts";
import { buildWindow, type Window, type WindowTurn } from "./window.ts";

/**
 * The engine's side of the context window: which budget, which counter, which mark (window.ts is
 * the pure part). Used by direct.ts for each model call of a leaf's inner loop, the same code on
 * both runtimes.
 *
 * - The model: the assistant's, else the engine's (`bedrock:anthropic.claude-...`, `scripted`);
 *   its family picks the counter (tokens.ts).
 * - The window: the assistant's limits.contextTokens, else settings.contextTokens.
 * - The request's budget: the window less room for the answer (settings.answerTokens, at most
 *   half the window).
 * - The mark (truncate / clear): read once at the start of each step of the loop, beside the
 *   transcript (direct.ts), so a mark is honoured from the next step: at once when the task waits
 *   for a person (the wait ends the step), else within turnStepMs. A step that starts a leaf reads
 *   none: nothing of its conversation exists yet to be marked.
 * - The task prompt: at most a quarter of the budget (promptBudget), so the turns always have room.
 */
export function modelOf(deps: Pick<EngineDeps, "llm">, assistant: Assistant): string {
  return assistant.model ?? deps.llm.id;
}

export function requestBudget(deps: Pick<EngineDeps, "settings">, assistant: Assistant): number {
  const window = assistant.limits.contextTokens ?? deps.settings.contextTokens;
  return window - Math.min(deps.settings.answerTokens, Math.floor(window / 2));
}

export const promptBudget = (deps: Pick<EngineDeps, "settings">, assistant: Assistant): number =>
  Math.floor(requestBudget(deps, assistant) / 4);

const warned = new WeakSet<TokenCounter>();
export async function counterFor(
  deps: Pick<EngineDeps, "llm" | "log">,
  assistant: Assistant,
): Promise<TokenCounter> {
  const counter = await tokenCounter(modelOf(deps, assistant));
  if (counter.problem && !warned.has(counter)) {
    warned.add(counter);
    deps.log.warn(counter.problem, { model: modelOf(deps, assistant) });
  }
  return counter;
}

/** The window of the next model request of `taskId`'s inner loop. */
export async function contextWindow(
  deps: EngineDeps,
  taskId: string,
  assistant: Assistant,
  request: {
    system: string;
    prompt: string;
    tools: readonly LlmToolSpec[];
    turns: readonly WindowTurn[];
    /** The conversation's mark (window-marks.ts), as the step read it when it began. */
    fromTurn: number;
  },
): Promise<Window> {
  const counter = await counterFor(deps, assistant);
  const budget = requestBudget(deps, assistant);
  const window = buildWindow({ ...request, budget, count: (t) => counter.count(t) });
  if (window.dropped + window.stubbed + window.cleared > 0 || window.tokens > budget)
    deps.log.debug("context window", {
      taskId,
      family: counter.family,
      budget,
      tokens: window.tokens,
      whole: window.whole,
      stubbed: window.stubbed,
      dropped: window.dropped,
      cleared: window.cleared,
    });
  return window;
}

/** `text` cut to `maxTokens` (its start, with a note), deterministically. */
export function fitTokens(text: string, maxTokens: number, counter: TokenCounter): string {
  if (counter.count(text) <= maxTokens) return text;
  const note = "\n[context cut to fit]";
  let kept = wholeCharacters(text, Math.min(text.length, maxTokens * 3));
  while (kept > 0 && counter.count(text.slice(0, kept) + note) > maxTokens)
    kept = wholeCharacters(text, Math.floor(kept * 0.85));
  return text.slice(0, kept) + note;
}
