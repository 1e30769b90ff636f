import { describe, expect, it } from "vitest";
import { ScriptedLlm, toolCall } from "../../shared/adapters/llm/scripted-llm.ts";
import { ArborError } from "../../shared/kernel/errors.ts";
import type { LlmRequest } from "../../shared/ports/llm.ts";
import { collect, llmContract } from "./llm.contract.ts";

llmContract("ScriptedLlm", async (script) => {
  const llm = new ScriptedLlm(script);
  return {
    llm,
    received: () => llm.calls.map((c) => ({ ...c, model: c.model ?? "scripted" })),
    cleanup: async () => {},
  };
});

const ask = (content: string): LlmRequest => ({ messages: [{ role: "user", content }] });

describe("ScriptedLlm", () => {
  it("answers from a function of the request and the call index", async () => {
    const llm = new ScriptedLlm((request, i) => ({
      content: `#${i}: ${request.messages.at(-1)?.content ?? ""}`,
    }));
    expect((await llm.complete(ask("a"))).content).toBe("#0: a");
    expect((await llm.complete(ask("b"))).content).toBe("#1: b");
  });

  it("says which call ran out of script and what the user asked", async () => {
    const llm = new ScriptedLlm([{ content: "one" }]);
    await llm.complete(ask("first"));
    expect(llm.remaining).toBe(0);
    const out = llm.complete(ask("What about the second?"));
    await expect(out).rejects.toBeInstanceOf(ArborError);
    await expect(out).rejects.toThrow(/call #1 .*"What about the second\?"/);
  });

  it("numbers generated tool call ids call_<n>, keeps given ones, and reports tool_use", async () => {
    const llm = new ScriptedLlm([
      { toolCalls: [toolCall("a", { x: 1 }), toolCall("b")] },
      { toolCalls: [toolCall("c", {}, "mine"), toolCall("d")] },
    ]);
    const first = await llm.complete(ask("go"));
    const second = await llm.complete(ask("again"));
    expect(first.toolCalls.map((c) => c.id)).toEqual(["call_1", "call_2"]);
    expect(second.toolCalls.map((c) => c.id)).toEqual(["mine", "call_3"]);
    expect(first.toolCalls[1]).toEqual({ id: "call_2", name: "b", arguments: {} });
    expect(first.stopReason).toBe("tool_use");
  });

  it("records deep copies of the requests it received, without the signal", async () => {
    const llm = new ScriptedLlm([{ content: "ok" }]);
    const request: LlmRequest = { ...ask("original"), signal: new AbortController().signal };
    await llm.complete(request);
    (request.messages[0] as { content: string }).content = "mutated later";
    expect(llm.calls[0]?.messages[0]?.content).toBe("original");
    expect(llm.calls[0]).not.toHaveProperty("signal");
  });

  it("counts about four characters per token when the turn gives no usage", async () => {
    const llm = new ScriptedLlm([{ content: "12345678" }]);
    const response = await llm.complete({ system: "abcd", messages: [{ role: "user", content: "efgh" }] });
    expect(response.usage.outputTokens).toBe(2);
    expect(response.usage.inputTokens).toBeGreaterThanOrEqual(2);
  });

  it("waits latencyMs plus the turn's delayMs, with the injected sleep", async () => {
    const waits: number[] = [];
    const llm = new ScriptedLlm([{ content: "slow", delayMs: 5 }, { content: "fast" }], {
      latencyMs: 10,
      sleep: async (ms) => {
        waits.push(ms);
      },
    });
    await llm.complete(ask("1"));
    await llm.complete(ask("2"));
    expect(waits).toEqual([15, 10]);
  });

  it("stops waiting when the request is aborted", async () => {
    const llm = new ScriptedLlm([{ content: "never", delayMs: 10_000 }]);
    const controller = new AbortController();
    const out = llm.complete({ ...ask("x"), signal: controller.signal });
    controller.abort(new Error("caller gave up"));
    await expect(out).rejects.toThrow("caller gave up");
  });

  it("streams text in a few chunks, then tool calls, then done", async () => {
    const llm = new ScriptedLlm([
      {
        content: "one two three four five six",
        toolCalls: [toolCall("t", { a: 1 })],
        stopReason: "max_tokens",
      },
    ]);
    const { events, response } = await collect(llm.stream(ask("go")));
    expect(events.map((e) => e.type)).toEqual(["text", "text", "text", "tool_call", "done"]);
    expect(response.stopReason).toBe("max_tokens");
  });
});
