import { afterEach, describe, expect, it } from "vitest";
import type { ScriptedTurn } from "../../shared/adapters/llm/scripted-llm.ts";
import { ValidationError } from "../../shared/kernel/errors.ts";
import type {
  Llm,
  LlmMessage,
  LlmRequest,
  LlmResponse,
  LlmStreamEvent,
  LlmToolSpec,
} from "../../shared/ports/llm.ts";

/**
 * The one contract every Llm adapter passes. `setup(script)` wires the adapter to a backend that
 * answers with the script's turns in order: the ScriptedLlm itself, the fake Bedrock server (real
 * AWS SDK client), the fake OpenAI-compatible server (real fetch).
 *
 * `received()` is what the backend got, read back from the provider's own wire shape into the
 * port's terms (the peers decode Converse / chat-completions bodies strictly), so a case that
 * asserts on it checks that the adapter spoke the provider's language.
 */
export interface BackendRequest extends Omit<LlmRequest, "signal"> {
  /** The model the backend was asked for. */
  model: string;
}

export interface LlmFixture {
  llm: Llm;
  received(): BackendRequest[];
  cleanup(): Promise<void>;
}

export type LlmContractSetup = (script: ScriptedTurn[]) => Promise<LlmFixture>;

export const weatherTool: LlmToolSpec = {
  name: "get_weather",
  description: "Current weather and forecast for a city.",
  parameters: {
    type: "object",
    properties: {
      city: { type: "string" },
      days: { type: "integer", minimum: 1, maximum: 7 },
      units: { type: "object", properties: { temperature: { enum: ["C", "F"] } } },
      tags: { type: "array", items: { type: "string" } },
    },
    required: ["city"],
    additionalProperties: false,
  },
};

export const searchTool: LlmToolSpec = {
  name: "web-search",
  description: "Searches the web.",
  parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
};

const ask = (content: string): LlmMessage => ({ role: "user", content });

/** All events of a stream; fails unless exactly one "done" comes, and last. */
export async function collect(stream: AsyncIterable<LlmStreamEvent>): Promise<{
  events: LlmStreamEvent[];
  text: string;
  response: LlmResponse;
}> {
  const events: LlmStreamEvent[] = [];
  for await (const e of stream) events.push(e);
  const done = events.filter((e) => e.type === "done");
  expect(done).toHaveLength(1);
  expect(events.at(-1)?.type).toBe("done");
  const last = events.at(-1) as Extract<LlmStreamEvent, { type: "done" }>;
  const text = events.map((e) => (e.type === "text" ? e.delta : "")).join("");
  return { events, text, response: last.response };
}

export function llmContract(name: string, setup: LlmContractSetup): void {
  describe(`Llm contract: ${name}`, () => {
    let fx: LlmFixture | undefined;
    const start = async (script: ScriptedTurn[]) => {
      fx = await setup(script);
      return fx;
    };
    afterEach(async () => {
      await fx?.cleanup();
      fx = undefined;
    });

    it("answers with text, end_turn and the backend's usage", async () => {
      const { llm, received } = await start([
        { content: "Hello from the model.", usage: { inputTokens: 11, outputTokens: 4 } },
      ]);
      const response = await llm.complete({ messages: [ask("Say hello")] });
      expect(response).toMatchObject({
        content: "Hello from the model.",
        toolCalls: [],
        stopReason: "end_turn",
        usage: { inputTokens: 11, outputTokens: 4 },
      });
      expect(response.model).toEqual(expect.any(String));
      expect(response.model.length).toBeGreaterThan(0);
      expect(received()).toHaveLength(1);
      expect(received()[0]?.messages).toEqual([ask("Say hello")]);
      expect(received()[0]?.tools ?? []).toEqual([]);
    });

    it("offers tools and returns tool calls with structured arguments", async () => {
      const args = {
        city: "Zürich",
        days: 3,
        units: { temperature: "C" },
        tags: ["a", "b"],
        exact: true,
        none: null,
      };
      const { llm, received } = await start([
        { toolCalls: [{ name: "get_weather", arguments: args, id: "tc_weather_1" }] },
        {
          toolCalls: [
            { name: "get_weather", arguments: { city: "Oslo" } },
            { name: "web-search", arguments: { q: "ski" } },
          ],
        },
      ]);
      const request: LlmRequest = { messages: [ask("Weather in Zürich?")], tools: [weatherTool, searchTool] };
      const first = await llm.complete(request);
      expect(first.stopReason).toBe("tool_use");
      expect(first.toolCalls).toEqual([{ id: "tc_weather_1", name: "get_weather", arguments: args }]);
      expect(received()[0]?.tools).toEqual([weatherTool, searchTool]);

      // Parallel calls without ids from the backend still get distinct, non-empty ids.
      const second = await llm.complete(request);
      expect(second.toolCalls.map((c) => [c.name, c.arguments])).toEqual([
        ["get_weather", { city: "Oslo" }],
        ["web-search", { q: "ski" }],
      ]);
      const ids = second.toolCalls.map((c) => c.id);
      expect(ids.every((id) => id.length > 0)).toBe(true);
      expect(new Set(ids).size).toBe(2);
    });

    it("sends a conversation with tool calls, a tool result and a failed tool result in the provider's shape", async () => {
      const { llm, received } = await start([{ content: "It is 21 °C in Zürich; the search failed." }]);
      const messages: LlmMessage[] = [
        ask("What is the weather in Zürich, and any news?"),
        {
          role: "assistant",
          content: "Let me look that up.",
          toolCalls: [
            { id: "tc_1", name: "get_weather", arguments: { city: "Zürich", units: { temperature: "C" } } },
            { id: "tc_2", name: "web-search", arguments: { q: "Zürich news" } },
          ],
        },
        { role: "tool", toolCallId: "tc_1", content: '{"temperature":21,"sky":"clear"}' },
        { role: "tool", toolCallId: "tc_2", content: "search backend timed out", isError: true },
        { role: "assistant", toolCalls: [{ id: "tc_3", name: "get_weather", arguments: { city: "Bern" } }] },
        { role: "tool", toolCallId: "tc_3", content: "18" },
        ask("Answer briefly."),
      ];
      const response = await llm.complete({ messages, tools: [weatherTool, searchTool] });
      expect(response.content).toBe("It is 21 °C in Zürich; the search failed.");
      const got = received()[0];
      expect(got?.messages).toEqual(messages);
      const failed = got?.messages.find((m) => m.role === "tool" && m.toolCallId === "tc_2");
      expect(failed).toMatchObject({ isError: true });
      const ok = got?.messages.find((m) => m.role === "tool" && m.toolCallId === "tc_1");
      expect(ok).not.toHaveProperty("isError", true);
    });

    it("passes toolChoice any and a named tool to the backend", async () => {
      const { llm, received } = await start([
        { toolCalls: [{ name: "web-search", arguments: { q: "x" } }] },
        { toolCalls: [{ name: "get_weather", arguments: { city: "Rome" } }] },
        { content: "plain" },
      ]);
      const base = { messages: [ask("Go")], tools: [weatherTool, searchTool] };
      await llm.complete({ ...base, toolChoice: "any" });
      await llm.complete({ ...base, toolChoice: { name: "get_weather" } });
      await llm.complete(base);
      const [any, named, none] = received();
      expect(any?.toolChoice).toBe("any");
      expect(named?.toolChoice).toEqual({ name: "get_weather" });
      expect([undefined, "auto"]).toContain(none?.toolChoice);
    });

    it("rejects a toolChoice naming a tool that is not offered, without calling the backend", async () => {
      const { llm, received } = await start([{ content: "never" }]);
      const bad = llm.complete({ messages: [ask("Go")], tools: [weatherTool], toolChoice: { name: "nope" } });
      await expect(bad).rejects.toBeInstanceOf(ValidationError);
      await expect(bad).rejects.toThrow(/nope/);
      expect(received()).toHaveLength(0);
    });

    it("sends the system prompt, maxTokens, temperature and the model override", async () => {
      const { llm, received } = await start([{ content: "ok" }, { content: "ok" }]);
      await llm.complete({
        system: "You are terse.",
        messages: [ask("Hi")],
        maxTokens: 256,
        temperature: 0.25,
      });
      const response = await llm.complete({ model: "other-model", messages: [ask("Hi")] });
      const [first, second] = received();
      expect(first).toMatchObject({ system: "You are terse.", maxTokens: 256, temperature: 0.25 });
      expect(second?.model).toBe("other-model");
      expect(second?.system).toBeUndefined();
      expect(response.model).toBe("other-model");
    });

    it("streams the same response as complete: text deltas concatenate to the content, tool calls, then done", async () => {
      const turn: ScriptedTurn = {
        content: "The answer is 42, as computed by the oracle after some thought.",
        toolCalls: [{ id: "tc_s1", name: "get_weather", arguments: { city: "Lima", tags: ["x"] } }],
        usage: { inputTokens: 30, outputTokens: 12 },
      };
      const { llm, received } = await start([turn, turn]);
      const request: LlmRequest = { messages: [ask("Stream please")], tools: [weatherTool] };
      const completed = await llm.complete(request);
      const streamed = await collect(llm.stream(request));
      expect(streamed.response).toEqual(completed);
      expect(streamed.text).toBe(completed.content);
      expect(streamed.events.filter((e) => e.type === "text").length).toBeGreaterThanOrEqual(1);
      const calls = streamed.events.flatMap((e) => (e.type === "tool_call" ? [e.call] : []));
      expect(calls).toEqual(completed.toolCalls);
      expect(streamed.response.usage).toEqual({ inputTokens: 30, outputTokens: 12 });
      expect(received()[1]?.messages).toEqual(request.messages);
    });

    it("streams a plain text answer", async () => {
      const { llm } = await start([{ content: "Just words, several of them, streamed in pieces." }]);
      const { text, response, events } = await collect(llm.stream({ messages: [ask("Talk")] }));
      expect(text).toBe("Just words, several of them, streamed in pieces.");
      expect(response).toMatchObject({ content: text, toolCalls: [], stopReason: "end_turn" });
      expect(events.some((e) => e.type === "tool_call")).toBe(false);
    });
  });
}
