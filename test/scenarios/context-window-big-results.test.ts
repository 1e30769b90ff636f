import { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import { afterEach, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { DEFAULT_BUDGETS } from "../../shared/domain/budgets.ts";
import { requestTokens } from "../../shared/engine/window/window.ts";
import type { LlmRequest } from "../../shared/ports/llm.ts";
import { newestCall, pairsHold } from "./context-window-fixture.ts";
import { Harness } from "./engine-harness.ts";
import { isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * A tool that returns about 1 MB every turn, plain English first and then CJK text and emoji with
 * `<|endoftext|>` among them, to an assistant on a GPT-4o id (counted with o200k): every model
 * request stays within its budget by the exact count, none carries half a character, and every
 * call goes with its result. (A count scaled from the text's start said a sixth of the tokens.)
 */
const CONTEXT_TOKENS = 32_000;
const ANSWER_TOKENS = 1_000;
const BUDGET = CONTEXT_TOKENS - ANSWER_TOKENS;
const TURNS = 6;
/** Emoji from the 4th character on, so a cut at an even count (2000, 1,000,000) falls inside one. */
const big = (n: number) =>
  `r${n} ${"🙂".repeat(1_500)}${"The venue list is long. ".repeat(3_000)}${Array.from(
    { length: 450_000 },
    (_, i) =>
      i % 97 === 0
        ? "<|endoftext|>"
        : i % 5 === 0
          ? "🙂"
          : String.fromCharCode(0x4e00 + ((i * 7919) % 20_000)),
  ).join("")}`;

const exact = (text: string) => {
  let sum = 0;
  for (let i = 0; i < text.length; i += 1000)
    sum += countTokens(text.slice(i, i + 1000), { disallowedSpecial: new Set() });
  return sum;
};
const wellFormed = (s: string) =>
  !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe("a tool that returns a megabyte every turn", () => {
  it("every request within its budget by the exact count, whole characters, every pair", async () => {
    const requests: LlmRequest[] = [];
    const script: ScriptFunction = (r) => {
      if (isPlan(r)) return planOf({ name: "Survey venues", purpose: "Read every venue list" });
      if (isEvaluation(r)) return pass();
      const { signal: _signal, ...rest } = r;
      requests.push(rest as LlmRequest);
      const n = newestCall(r);
      return n < TURNS
        ? { toolCalls: [{ id: `call-${n + 1}`, name: "venues", arguments: { page: n + 1 } }] }
        : { content: "read them all" };
    };
    let served = 0;
    h = await Harness.create({
      script,
      assistants: [
        {
          name: "Surveyor",
          id: "surveyor",
          purpose: "Read venue lists",
          tools: ["venues", "read_resource"],
          model: "gpt-4o",
        },
      ],
      settings: {
        electionThreshold: -1,
        contextTokens: CONTEXT_TOKENS,
        answerTokens: ANSWER_TOKENS,
        defaultBudgets: { ...DEFAULT_BUDGETS, maxTokens: 100_000_000, maxCostUsd: 1_000 },
      },
      toolsConfig: {
        tools: {
          read_resource: { kind: "builtin", function: "read_resource" },
          venues: {
            kind: "http",
            url: "https://venues.example.com/list",
            description: "A page of the venue list",
            parameters: { type: "object", properties: { page: { type: "number" } } },
          },
        },
      },
      fetch: async () => new Response(big(++served), { headers: { "content-type": "text/plain" } }),
    });
    const { rootTaskId } = await h.submit("Read every venue list");
    await h.idle();
    expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("done");
    expect(served).toBe(TURNS);
    expect(requests).toHaveLength(TURNS + 1);
    for (const [i, r] of requests.entries()) {
      expect(requestTokens(exact, r), `request ${i + 1}`).toBeLessThanOrEqual(BUDGET);
      expect(pairsHold(r.messages), `request ${i + 1}`).toBe(true);
      expect(
        r.messages.every((m) => wellFormed(m.content ?? "")),
        `request ${i + 1}`,
      ).toBe(true);
    }
    // The stored result is read on in whole characters from the offset the model was given, at any length.
    const told = requests[1]?.messages.find((m) => m.role === "tool")?.content ?? "";
    const [, urn, offset] = /read the rest with read_resource, urn (\S+), offset (\d+)\]/.exec(told) ?? [];
    expect(urn).toBeDefined();
    const read = (o: number, length: number) =>
      h?.engine.deps.tools.execute(
        "read_resource",
        { urn, offset: o, length },
        {
          taskId: rootTaskId,
          actor: "cld:common.Tenant.acme/common.Assistant.surveyor",
          callId: `read-${o}-${length}`,
          allowedTools: ["venues", "read_resource"],
        },
      );
    for (const [o, length] of [
      [Number(offset), 1],
      [Number(offset), 101],
      [4, 1],
      [5, 1],
      [5, 100],
    ] as const) {
      const piece = (await read(o, length))?.content ?? "";
      expect(wellFormed(piece), `${o} ${length}`).toBe(true);
      const next = Number(/read on with offset (\d+)\]$/.exec(piece)?.[1]);
      expect(next, `${o} ${length}`).toBeGreaterThan(o);
    }
  }, 240_000);
});
