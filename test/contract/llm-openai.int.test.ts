/**
 * The Llm contract on the OpenAI-compatible adapter, with real `fetch` against the fake chat server
 * (test/peers/fake-openai.ts), plus the quirks of real servers (Ollama, vLLM, LM Studio) the adapter
 * tolerates, retries, and error mapping.
 */
import { createServer } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  OpenAiCompatibleLlm,
  type OpenAiCompatibleLlmOptions,
} from "../../shared/adapters/llm/openai-compatible-llm.ts";
import {
  ArborError,
  ModelError,
  ThrottledError,
  UnavailableError,
  ValidationError,
} from "../../shared/kernel/errors.ts";
import type { LlmMessage, LlmRequest } from "../../shared/ports/llm.ts";
import { type ChatWireRequest, FakeOpenAi } from "../peers/fake-openai.ts";
import { type BackendRequest, collect, llmContract, weatherTool } from "./llm.contract.ts";

const MODEL = "llama3.1:8b";

llmContract("OpenAI-compatible (fake chat server, JSON and SSE)", async (script) => {
  const fake = new FakeOpenAi(script);
  const { baseUrl } = await fake.start();
  return {
    llm: new OpenAiCompatibleLlm({ baseUrl, model: MODEL, sleep: async () => {} }),
    received: () => fake.calls.map((c) => decodeChat(c.body)),
    cleanup: () => fake.stop(),
  };
});

const ask = (content: string): LlmRequest => ({ messages: [{ role: "user", content }] });
const weather = { toolCalls: [{ name: "get_weather", arguments: { city: "Lagos", days: 2 } }] };

describe("OpenAiCompatibleLlm", () => {
  const fake = new FakeOpenAi();
  let delays: number[];
  let ids: number;
  const llm = (options: Partial<OpenAiCompatibleLlmOptions> = {}) =>
    new OpenAiCompatibleLlm({
      baseUrl: fake.baseUrl,
      model: MODEL,
      sleep: async (ms) => {
        delays.push(ms);
      },
      retryDelayMs: (attempt) => attempt * 100,
      newId: () => `gen_${++ids}`,
      ...options,
    });

  beforeAll(() => fake.start());
  afterAll(() => fake.stop());
  beforeEach(() => {
    fake.reset([{ content: "fine" }]);
    delays = [];
    ids = 0;
  });

  it.each([false, true])(
    "accepts arguments sent as an object instead of a JSON string (stream: %s)",
    async (stream) => {
      fake.reset([weather]);
      fake.quirks = { objectArguments: true };
      const request = { ...ask("weather"), tools: [weatherTool] };
      const response = stream
        ? (await collect(llm().stream(request))).response
        : await llm().complete(request);
      expect(response.toolCalls).toEqual([
        { id: "call_0_0", name: "get_weather", arguments: { city: "Lagos", days: 2 } },
      ]);
    },
  );

  it.each([false, true])("generates ids for tool calls without one (stream: %s)", async (stream) => {
    fake.reset([
      { toolCalls: [...weather.toolCalls, { name: "get_weather", arguments: { city: "Accra" } }] },
    ]);
    fake.quirks = { omitToolCallIds: true, omitIndex: stream };
    const request = { ...ask("weather"), tools: [weatherTool] };
    const response = stream ? (await collect(llm().stream(request))).response : await llm().complete(request);
    expect(response.toolCalls.map((c) => [c.id, c.arguments.city])).toEqual([
      ["gen_1", "Lagos"],
      ["gen_2", "Accra"],
    ]);
  });

  it("says tool_use when a server reports finish_reason stop next to tool calls, and 0 usage when it reports none", async () => {
    fake.reset([weather, weather]);
    fake.quirks = { finishReason: "stop", omitUsage: true };
    const request = { ...ask("weather"), tools: [weatherTool] };
    const completed = await llm().complete(request);
    const streamed = (await collect(llm().stream(request))).response;
    for (const r of [completed, streamed]) {
      expect(r.stopReason).toBe("tool_use");
      expect(r.usage).toEqual({ inputTokens: 0, outputTokens: 0 });
    }
  });

  it("keeps a tool call written as JSON text in content as text", async () => {
    const text = '{"name": "get_weather", "arguments": {"city": "Lagos"}}';
    fake.reset([{ content: text }]);
    const response = await llm().complete({ ...ask("weather"), tools: [weatherTool] });
    expect(response).toMatchObject({ content: text, toolCalls: [], stopReason: "end_turn" });
  });

  it("maps finish_reason length to max_tokens", async () => {
    fake.reset([{ content: "cut sh", stopReason: "max_tokens" }]);
    expect((await llm().complete(ask("long"))).stopReason).toBe("max_tokens");
  });

  it("sends the chat shape: required tool_choice, JSON-string arguments, tool_call_id, stream_options, bearer key", async () => {
    fake.reset([{ content: "ok" }]);
    await collect(
      llm({ apiKey: "sk-test" }).stream({
        tools: [weatherTool],
        toolChoice: "any",
        messages: [
          { role: "user", content: "q" },
          { role: "assistant", toolCalls: [{ id: "a1", name: "get_weather", arguments: { city: "X" } }] },
          { role: "tool", toolCallId: "a1", content: "no such city", isError: true },
        ],
      }),
    );
    const [call] = fake.calls;
    expect(call?.headers.authorization).toBe("Bearer sk-test");
    expect(call?.body).toMatchObject({
      model: MODEL,
      stream: true,
      stream_options: { include_usage: true },
      tool_choice: "required",
      tools: [{ type: "function", function: { name: "get_weather", parameters: weatherTool.parameters } }],
      messages: [
        { role: "user", content: "q" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "a1", type: "function", function: { name: "get_weather", arguments: '{"city":"X"}' } },
          ],
        },
        { role: "tool", tool_call_id: "a1", content: "Error: no such city" },
      ],
    });
  });

  it("retries 429 and 503, then succeeds", async () => {
    fake.failNext(1, 429, "Rate limit reached");
    fake.failNext(1, 503, "Server busy");
    expect((await llm().complete(ask("hi"))).content).toBe("fine");
    expect(fake.calls.map((c) => c.status)).toEqual([429, 503, 200]);
    expect(delays).toEqual([100, 200]);
  });

  it("ends persistent 429 in ThrottledError after maxAttempts requests, streams included", async () => {
    fake.failNext(3, 429, "Rate limit reached for requests");
    const out = llm({ maxAttempts: 3 }).complete(ask("hi"));
    await expect(out).rejects.toBeInstanceOf(ThrottledError);
    await expect(out).rejects.toThrow(/Rate limit reached.*3 attempt/);
    expect(fake.calls).toHaveLength(3);
    fake.failNext(2, 429);
    await expect(collect(llm({ maxAttempts: 2 }).stream(ask("hi")))).rejects.toBeInstanceOf(ThrottledError);
  });

  it("maps 400 to ValidationError with the server's message, without retrying", async () => {
    fake.failNext(1, 400, "'messages' must contain at least one message.");
    const out = llm().complete(ask("hi"));
    await expect(out).rejects.toBeInstanceOf(ValidationError);
    await expect(out).rejects.toThrow(/'messages' must contain at least one message/);
    expect(fake.calls).toHaveLength(1);
  });

  it("maps 404 to a CONFIG error that names the model and how to pull it, and 500 to UnavailableError", async () => {
    fake.failNext(1, 404, "model 'llama3.1:8b' not found");
    await expect(llm().complete(ask("hi"))).rejects.toMatchObject({
      code: "CONFIG",
      message: expect.stringMatching(/ollama pull llama3.1:8b/),
    });
    fake.failNext(1, 500, "boom");
    await expect(llm().complete(ask("hi"))).rejects.toBeInstanceOf(UnavailableError);
  });

  it("maps arguments that are not JSON to ModelError", async () => {
    fake.reset([weather]);
    fake.quirks = { objectArguments: true };
    const bad = new OpenAiCompatibleLlm({
      baseUrl: fake.baseUrl,
      model: MODEL,
      fetch: async (url, init) => {
        const res = await fetch(url, init);
        const json = (await res.json()) as {
          choices: { message: { tool_calls: { function: { arguments: unknown } }[] } }[];
        };
        const call = json.choices[0]?.message.tool_calls[0];
        if (call) call.function.arguments = "{city: Lagos";
        return new Response(JSON.stringify(json), {
          status: 200,
          headers: { "content-type": "application/json" },
        });
      },
    });
    await expect(bad.complete({ ...ask("x"), tools: [weatherTool] })).rejects.toBeInstanceOf(ModelError);
  });

  it("streams a JSON answer when the server ignores stream: true", async () => {
    const json = new OpenAiCompatibleLlm({
      baseUrl: fake.baseUrl,
      model: MODEL,
      fetch: (url, init) =>
        fetch(url, { ...init, body: JSON.stringify({ ...JSON.parse(String(init?.body)), stream: false }) }),
    });
    const { text, response } = await collect(json.stream(ask("hi")));
    expect(text).toBe("fine");
    expect(response.content).toBe("fine");
  });
});

describe("OpenAiCompatibleLlm without a server", () => {
  it("says which URL refused the connection and to check that the server runs", async () => {
    const port = await new Promise<number>((resolve) => {
      const srv = createServer().listen(0, "127.0.0.1", () => {
        const { port } = srv.address() as { port: number };
        srv.close(() => resolve(port));
      });
    });
    const llm = new OpenAiCompatibleLlm({ baseUrl: `http://127.0.0.1:${port}/v1`, model: MODEL });
    const out = llm.complete(ask("hi"));
    await expect(out).rejects.toBeInstanceOf(UnavailableError);
    await expect(out).rejects.toThrow(`http://127.0.0.1:${port}/v1/chat/completions (ECONNREFUSED)`);
    await expect(out).rejects.toThrow(/ollama serve/);
    await expect(collect(llm.stream(ask("hi")))).rejects.toBeInstanceOf(UnavailableError);
  });

  it("rejects a baseUrl that is not a URL at construction", () => {
    expect(() => new OpenAiCompatibleLlm({ baseUrl: "localhost:11434", model: MODEL })).toThrow(ArborError);
  });
});

/** What the server understood from a chat request, in the port's terms ("Error: " marks a failed tool). */
function decodeChat(body: ChatWireRequest): BackendRequest {
  const messages: LlmMessage[] = [];
  let system: string | undefined;
  for (const m of body.messages ?? []) {
    if (m.role === "system") system = m.content ?? "";
    else if (m.role === "user") messages.push({ role: "user", content: m.content ?? "" });
    else if (m.role === "tool") {
      const content = m.content ?? "";
      const failed = content.startsWith("Error: ");
      messages.push({
        role: "tool",
        toolCallId: m.tool_call_id ?? "",
        content: failed ? content.slice("Error: ".length) : content,
        ...(failed ? { isError: true } : {}),
      });
    } else {
      const toolCalls = (m.tool_calls ?? []).map((c) => ({
        id: c.id ?? "",
        name: c.function?.name ?? "",
        arguments: JSON.parse(String(c.function?.arguments)) as Record<string, unknown>,
      }));
      messages.push({
        role: "assistant",
        ...(m.content ? { content: m.content } : {}),
        ...(toolCalls.length ? { toolCalls } : {}),
      });
    }
  }
  const request: BackendRequest = { model: body.model ?? "", messages };
  if (system !== undefined) request.system = system;
  if (body.tools?.length) {
    request.tools = body.tools.map((t) => ({
      name: t.function?.name ?? "",
      description: t.function?.description ?? "",
      parameters: t.function?.parameters ?? {},
    }));
  }
  const choice = body.tool_choice;
  if (choice === "required") request.toolChoice = "any";
  else if (choice === "auto") request.toolChoice = "auto";
  else if (typeof choice === "object") request.toolChoice = { name: choice.function?.name ?? "" };
  if (body.max_tokens !== undefined) request.maxTokens = body.max_tokens;
  if (body.temperature !== undefined) request.temperature = body.temperature;
  return request;
}
