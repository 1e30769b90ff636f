import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { estimateCounter, tokenCounter } from "../../../../shared/engine/window/tokens.ts";
import {
  buildWindow,
  messageTokens,
  requestTokens,
  type WindowInput,
  type WindowTurn,
} from "../../../../shared/engine/window/window.ts";
import { fitTokens } from "../../../../shared/engine/window/window-context.ts";
import type { LlmMessage } from "../../../../shared/ports/llm.ts";

/** No lone surrogate (half a character outside the BMP). */
const wellFormed = (s: string) =>
  !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);

const count = estimateCounter.count;
const TASK = "cld:common.Tenant.t/common.Conversation.c/plan.Task.a";

const turnArb = (n: number): fc.Arbitrary<WindowTurn> =>
  fc
    .record({
      content: fc.option(fc.string({ maxLength: 200 }), { nil: undefined }),
      calls: fc.array(
        fc.record({
          args: fc.string({ maxLength: 1500 }),
          result: fc.option(fc.tuple(fc.nat(6000), fc.constantFrom("r", "é", "word ")), {
            nil: undefined,
            freq: 12,
          }),
          isError: fc.boolean(),
        }),
        { minLength: 1, maxLength: 3 },
      ),
    })
    .map(({ content, calls }) => {
      const urn = `${TASK}/common.Message.turn-${String(n).padStart(4, "0")}`;
      return {
        n,
        urn,
        ...(content ? { content } : {}),
        toolCalls: calls.map((c, k) => ({ id: `call-${n}-${k}`, name: "tool_x", arguments: { q: c.args } })),
        results: calls.map((c, k) =>
          c.result
            ? {
                urn: `${urn}-tool-${k}`,
                toolCallId: `call-${n}-${k}`,
                content: c.result[1].repeat(c.result[0]),
                ...(c.isError ? { isError: true } : {}),
              }
            : undefined,
        ),
      };
    });

const inputArb: fc.Arbitrary<WindowInput> = fc
  .record({
    turns: fc
      .integer({ min: 0, max: 25 })
      .chain((k) => fc.tuple(...Array.from({ length: k }, (_, i) => turnArb(i + 1)))),
    fromTurn: fc.integer({ min: 1, max: 30 }),
    budget: fc.integer({ min: 500, max: 40_000 }),
    prompt: fc.string({ maxLength: 2000 }),
  })
  .map(({ turns, fromTurn, budget, prompt }) => ({
    system: "You are tester.",
    prompt,
    tools: [{ name: "tool_x", description: "does x", parameters: { type: "object" } }],
    turns,
    fromTurn,
    budget,
    count,
  }));

/** What the request needs at least: fixed part, the note, the newest turn without its results' text, room for cut notes. */
function minimum(input: WindowInput): number {
  const fixed = requestTokens(count, {
    system: input.system,
    messages: [{ role: "user", content: input.prompt }],
    tools: input.tools,
  });
  const sendable = input.turns.filter((t) => t.n >= input.fromTurn);
  const newest = sendable.at(-1);
  const skeleton = newest
    ? messageTokens(count, {
        role: "assistant",
        content: newest.content ?? "",
        toolCalls: newest.toolCalls ?? [],
      }) +
      (newest.toolCalls ?? []).reduce(
        (s, c) => s + messageTokens(count, { role: "tool", toolCallId: c.id, content: "" }) + 150,
        0,
      )
    : 0;
  return fixed + 200 + skeleton;
}

function pairsHold(messages: readonly LlmMessage[]): boolean {
  // Every call answered exactly once, right after its assistant message; no result without its call.
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] as LlmMessage;
    if (m.role === "tool") return false; // results are consumed below, after their call
    if (m.role !== "assistant") continue;
    for (const c of m.toolCalls ?? []) {
      const next = messages[++i];
      if (next?.role !== "tool" || next.toolCallId !== c.id) return false;
    }
  }
  return true;
}

describe("the context window (property-based)", () => {
  it("keeps the prompt first, every call with its result, the mark, and the newest turn; fits the budget when it can", () => {
    fc.assert(
      fc.property(inputArb, (input) => {
        const w = buildWindow(input);
        expect(w.messages[0]).toEqual({ role: "user", content: input.prompt });
        expect(pairsHold(w.messages)).toBe(true);
        expect(w.tokens).toBe(
          requestTokens(count, { system: input.system, messages: w.messages, tools: input.tools }),
        );
        const sendable = input.turns.filter((t) => t.n >= input.fromTurn);
        expect(w.cleared).toBe(input.turns.length - sendable.length);
        expect(w.whole + w.stubbed + w.dropped).toBe(sendable.length);
        const sentIds = new Set(
          w.messages.flatMap((m) => (m.role === "assistant" ? (m.toolCalls ?? []).map((c) => c.id) : [])),
        );
        for (const t of input.turns) {
          const ids = (t.toolCalls ?? []).map((c) => c.id);
          if (t.n < input.fromTurn) expect(ids.some((id) => sentIds.has(id))).toBe(false);
        }
        // The turns sent are the newest ones, in order, without gaps.
        const sentTurns = sendable.filter((t) => (t.toolCalls ?? []).some((c) => sentIds.has(c.id)));
        expect(sentTurns).toEqual(sendable.slice(sendable.length - sentTurns.length));
        const newest = sendable.at(-1);
        if (newest) {
          const last = w.messages.filter((m) => m.role === "assistant").at(-1);
          expect(last?.role === "assistant" && last.toolCalls).toEqual(newest.toolCalls);
          expect(last?.role === "assistant" ? last.content : undefined).toBe(newest.content);
        }
        if (w.dropped + w.cleared > 0) expect(w.messages[1]?.content).toMatch(/^\[Context note: /);
        if (input.budget >= minimum(input)) expect(w.tokens).toBeLessThanOrEqual(input.budget);
      }),
      { numRuns: 300 },
    );
  });

  it("is deterministic: the same transcript gives the same window", () => {
    fc.assert(
      fc.property(inputArb, (input) => {
        const copy = { ...structuredClone({ ...input, count: undefined }), count } as WindowInput;
        expect(buildWindow(copy)).toEqual(buildWindow(input));
      }),
      { numRuns: 100 },
    );
  });

  it("sends every turn after the mark whole, with no note, when the budget holds them all", () => {
    fc.assert(
      fc.property(inputArb, (input) => {
        const w = buildWindow({ ...input, budget: 10_000_000 });
        const sendable = input.turns.filter((t) => t.n >= input.fromTurn);
        expect([w.whole, w.stubbed, w.dropped]).toEqual([sendable.length, 0, 0]);
        expect(w.messages.some((m) => m.content?.startsWith("[Context note:"))).toBe(w.cleared > 0);
      }),
      { numRuns: 100 },
    );
  });
});

describe("the context window (examples)", () => {
  const turn = (n: number, result: string): WindowTurn => ({
    n,
    urn: `${TASK}/common.Message.turn-${String(n).padStart(4, "0")}`,
    toolCalls: [{ id: `c${n}`, name: "search", arguments: { q: `q${n}` } }],
    results: [
      {
        urn: `${TASK}/common.Message.turn-${String(n).padStart(4, "0")}-tool-0`,
        toolCallId: `c${n}`,
        content: result,
      },
    ],
  });
  const base = { system: "s", prompt: "the task", tools: [], fromTurn: 1, count };

  it("stubs older results with their size and URN, then leaves the oldest out with one note", () => {
    const turns = Array.from({ length: 40 }, (_, i) => turn(i + 1, "r".repeat(3000)));
    const w = buildWindow({ ...base, turns, budget: 6000 });
    expect(w.whole).toBeGreaterThan(0);
    expect(w.stubbed).toBeGreaterThan(0);
    expect(w.dropped).toBeGreaterThan(0);
    expect(w.messages[1]).toEqual({
      role: "user",
      content: `[Context note: ${w.dropped} earlier turns are left out to fit the context window (their messages are stored under this task and readable with read_resource).]`,
    });
    const stub = w.messages.find((m) => m.role === "tool" && m.content.startsWith("[result of search"));
    expect(stub?.content).toMatch(
      /left out to fit the context window: 3000 characters; read it with read_resource, urn cld:.*turn-\d{4}-tool-0\]/,
    );
    expect(w.tokens).toBeLessThanOrEqual(6000);
  });

  it("cuts the newest result when it alone does not fit, saying where to read on", () => {
    const w = buildWindow({ ...base, turns: [turn(1, "a".repeat(100_000))], budget: 2000 });
    const result = w.messages.at(-1);
    expect(result?.role).toBe("tool");
    expect(result?.content).toMatch(
      /\[cut to fit the context window: \d+ of 100000 characters shown; read the rest with read_resource, urn .*, offset \d+\]$/,
    );
    expect(w.tokens).toBeLessThanOrEqual(2000);
  });

  it("never cuts a result or a prompt between the two halves of a character", async () => {
    // Emoji are two UTF-16 units: a cut between them sends a lone surrogate, which is not text.
    for (const budget of [700, 701, 702, 1999, 2000, 2001]) {
      const w = buildWindow({ ...base, turns: [turn(1, "🙂".repeat(60_000))], budget });
      expect(
        w.messages.every((m) => wellFormed(m.content ?? "")),
        String(budget),
      ).toBe(true);
    }
    for (const model of ["scripted", "gpt-4o", "anthropic.claude-3-5-haiku-20241022-v1:0"]) {
      const counter = await tokenCounter(model);
      for (const max of [100, 101, 333, 1000]) {
        const cut = fitTokens(`# Task\n${"🙂x".repeat(20_000)}`, max, counter);
        expect(wellFormed(cut), `${model} ${max}`).toBe(true);
      }
    }
  });

  it("sends nothing before the mark and says the turns were removed on request", () => {
    const turns = [1, 2, 3, 4].map((n) => turn(n, "x"));
    const w = buildWindow({ ...base, turns, fromTurn: 4, budget: 10_000 });
    expect(w.cleared).toBe(3);
    expect(w.messages[1]?.content).toBe(
      "[Context note: 3 earlier turns were removed from this conversation on request.]",
    );
    expect(w.messages.slice(2).map((m) => m.role)).toEqual(["assistant", "tool"]);
    const cleared = buildWindow({ ...base, turns, fromTurn: 5, budget: 10_000 });
    expect(cleared.messages).toHaveLength(2);
  });

  it("answers a call without a stored result with a stub, so the request stays valid", () => {
    const t: WindowTurn = { ...turn(1, "x"), results: [undefined] };
    const w = buildWindow({ ...base, turns: [t], budget: 10_000 });
    expect(w.messages.at(-1)).toEqual({
      role: "tool",
      toolCallId: "c1",
      content: "[no result was recorded for this call]",
      isError: true,
    });
  });
});

describe("the task prompt's budget", () => {
  it("cuts a prompt over its budget to fit, with a note, for each counter", async () => {
    const text = `# Task: long\n${"context line with words and 12345 numbers\n".repeat(5_000)}`;
    for (const model of ["scripted", "gpt-4o", "anthropic.claude-3-5-haiku-20241022-v1:0"]) {
      const counter = await tokenCounter(model);
      const cut = fitTokens(text, 1_000, counter);
      expect(counter.count(cut)).toBeLessThanOrEqual(1_000);
      expect(cut.startsWith("# Task: long\n")).toBe(true);
      expect(cut.endsWith("\n[context cut to fit]")).toBe(true);
      expect(fitTokens("# Task: short", 1_000, counter)).toBe("# Task: short");
    }
  });

  it("a window counted with a real tokenizer stays within its budget", async () => {
    const counter = await tokenCounter("gpt-4o");
    const turns = Array.from({ length: 60 }, (_, i) => ({
      n: i + 1,
      urn: `${TASK}/common.Message.t${i + 1}`,
      toolCalls: [{ id: `c${i + 1}`, name: "search", arguments: { q: `query number ${i + 1}` } }],
      results: [
        {
          urn: `${TASK}/common.Message.r${i + 1}`,
          toolCallId: `c${i + 1}`,
          content: "a result line\n".repeat(80),
        },
      ],
    }));
    const w = buildWindow({
      system: "s",
      prompt: "the task",
      tools: [],
      turns,
      fromTurn: 1,
      budget: 8_000,
      count: (t) => counter.count(t),
    });
    expect(w.tokens).toBeLessThanOrEqual(8_000);
    expect(w.stubbed).toBeGreaterThan(0);
    expect(w.dropped).toBeGreaterThan(0);
  });
});
