import { afterEach, describe, expect, it } from "vitest";
import type { ScriptedTurn, ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { DEFAULT_BUDGETS } from "../../shared/domain/budgets.ts";
import { type FaultInjector, type FaultPoint, SimulatedCrash } from "../../shared/engine/context.ts";
import { estimateCounter } from "../../shared/engine/tokens.ts";
import { requestTokens } from "../../shared/engine/window.ts";
import type { LlmMessage, LlmRequest } from "../../shared/ports/llm.ts";
import { Harness, PERSON } from "./engine-harness.ts";
import { isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * A long inner loop stays within its token window: the scripted model asks for a tool 199 times,
 * then answers; every request it gets is counted with the engine's counter (the scripted model's
 * family: the estimate) and checked: within the budget, the task's prompt first, the newest turn
 * present, every tool result after its call.
 */
const COUNTER = [
  {
    name: "Counter",
    id: "counter",
    purpose: "Count the words of every text, one by one",
    tools: ["word_count"],
  },
];
const CONTEXT_TOKENS = 6_000;
const ANSWER_TOKENS = 1_000;
const BUDGET = CONTEXT_TOKENS - ANSWER_TOKENS;
const settings = {
  contextTokens: CONTEXT_TOKENS,
  answerTokens: ANSWER_TOKENS,
  defaultBudgets: { ...DEFAULT_BUDGETS, maxTurns: 400, maxTokens: 100_000_000, maxCostUsd: 1_000 },
};

/** The number of the newest call in a request (its id is `call-<n>`), 0 when there is none. */
const newestCall = (r: LlmRequest): number => {
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

interface Seen {
  requests: LlmRequest[];
  maxTokens: number;
  problems: string[];
}

/** The leaf calls word_count `calls` times (every 10th text long enough to be stubbed), then answers. */
function countingScript(calls: number, seen: Seen): ScriptFunction {
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

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe("context windows of a long inner loop", () => {
  it("a 200-turn loop: every request within its budget, with the prompt, the newest turn and every pair", async () => {
    const seen: Seen = { requests: [], maxTokens: 0, problems: [] };
    h = await Harness.create({ script: countingScript(199, seen), assistants: COUNTER, settings });
    const { rootTaskId } = await h.submit("Count the words of 199 texts");
    await h.idle();
    const { view, output } = await h.engine.result(rootTaskId);
    expect(view?.status).toBe("done");
    expect(output).toContain("counted 199 texts");
    expect(seen.requests).toHaveLength(200);
    expect(seen.problems).toEqual([]);
    expect(seen.maxTokens).toBeLessThanOrEqual(BUDGET);
    // The window did its work: later requests leave turns out, with one note, and stub old arguments.
    const last = seen.requests.at(-1) as LlmRequest;
    expect(last.messages[1]?.content).toMatch(/^\[Context note: \d+ earlier turns are left out to fit/);
    const omitted = /"omitted":"\d+ characters of arguments; read cld:\S+\/common\.Message\.[0-9a-f]+"/;
    expect(omitted.test(JSON.stringify(last.messages))).toBe(true);
    expect(last.messages.filter((m) => m.role === "assistant").length).toBeGreaterThan(5);
    // Every turn is still stored: the window leaves turns out of the request, not out of the record.
    const stored = await h.rt.resources.children(rootTaskId, "common.Message");
    expect(stored.filter((m) => /^turn-\d{4}$/.test(m.meta.name))).toHaveLength(199);
  }, 120_000);

  it("a crash right after a model call in the middle of the loop: the re-driven step sends the same window", async () => {
    const seen: Seen = { requests: [], maxTokens: 0, problems: [] };
    let calls = 0;
    const crash: FaultInjector & { fired: boolean } = {
      fired: false,
      hit(point: FaultPoint, step: string) {
        if (this.fired || (point === "after-llm" && step === "turn" && ++calls === 60)) {
          this.fired = true;
          throw new SimulatedCrash(point, step);
        }
      },
    };
    h = await Harness.create({
      script: countingScript(80, seen),
      assistants: COUNTER,
      settings,
      bus: { maxAttempts: 1 },
      faults: crash,
    });
    const { rootTaskId } = await h.submit("Count the words of 80 texts");
    await h.idle();
    expect(crash.fired).toBe(true);
    const before = seen.requests.length;
    const crashed = seen.requests.at(-1) as LlmRequest;
    expect(newestCall(crashed)).toBe(59);
    await h.restart(); // a new process, no faults
    for (let round = 0; round < 10 && (await h.rt.tasks.view(rootTaskId))?.status !== "done"; round++) {
      h.advance(10 * 60_000); // past the turn claim's staleness
      await h.engine.watchdog(60_000);
      await h.idle();
    }
    expect((await h.engine.result(rootTaskId)).view?.status).toBe("done");
    const redriven = seen.requests[before] as LlmRequest;
    expect(newestCall(redriven)).toBe(59);
    expect(redriven).toEqual(crashed);
    expect(crashed.messages[1]?.content).toMatch(/^\[Context note: /); // the window was cutting then
    expect(seen.problems).toEqual([]);
  }, 120_000);
});
