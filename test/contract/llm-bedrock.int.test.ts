/**
 * The Llm contract on the Bedrock adapter, with the real `BedrockRuntimeClient` talking to the fake
 * Bedrock server (test/peers/fake-bedrock.ts) over cleartext HTTP/2 (NodeHttp2Handler, this client's
 * default) and over HTTP/1.1 (NodeHttpHandler); plus what only this adapter does: retries, error mapping, and the
 * eventstream framing of ConverseStream.
 */
import { BedrockRuntimeClient, type BedrockRuntimeClientConfig } from "@aws-sdk/client-bedrock-runtime";
import { NodeHttp2Handler, NodeHttpHandler } from "@smithy/node-http-handler";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  BedrockLlm,
  type BedrockLlmOptions,
  bedrockClientConfig,
} from "../../shared/adapters/llm/bedrock-llm.ts";
import {
  ArborError,
  ModelError,
  ThrottledError,
  UnavailableError,
  ValidationError,
} from "../../shared/kernel/errors.ts";
import type { LlmMessage, LlmRequest, LlmToolCall } from "../../shared/ports/llm.ts";
import { type ConverseWireRequest, FakeBedrock } from "../peers/fake-bedrock.ts";
import { type BackendRequest, collect, llmContract, weatherTool } from "./llm.contract.ts";

const MODEL = "us.anthropic.claude-haiku-4-5-20251001-v1:0";
type Protocol = "h2" | "http1";

function client(endpoint: string, protocol: Protocol, extra: Partial<BedrockRuntimeClientConfig> = {}) {
  return new BedrockRuntimeClient({
    endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
    ...bedrockClientConfig,
    // This client's default handler is NodeHttp2Handler; HTTP/1.1 has to be asked for.
    requestHandler:
      protocol === "h2"
        ? new NodeHttp2Handler({ requestTimeout: 10_000 })
        : new NodeHttpHandler({ requestTimeout: 10_000 }),
    ...extra,
  });
}

for (const protocol of ["h2", "http1"] as const) {
  llmContract(
    `Bedrock (fake Bedrock over ${protocol === "h2" ? "HTTP/2 cleartext" : "HTTP/1.1"})`,
    async (script) => {
      const fake = new FakeBedrock(script);
      const { endpoint } = await fake.start({ protocol });
      const sdk = client(endpoint, protocol);
      return {
        llm: new BedrockLlm({ client: sdk, model: MODEL, sleep: async () => {} }),
        received: () =>
          fake.calls.map((c) => {
            expect(c.protocol).toBe(protocol);
            return decodeConverse(c.body, c.modelId);
          }),
        cleanup: async () => {
          sdk.destroy();
          await fake.stop();
        },
      };
    },
  );
}

const ask = (content: string): LlmRequest => ({ messages: [{ role: "user", content }] });

for (const protocol of ["h2", "http1"] as const) {
  describe(`BedrockLlm over ${protocol}`, () => {
    const fake = new FakeBedrock();
    let sdk: BedrockRuntimeClient;
    let delays: number[];
    const llm = (options: Partial<BedrockLlmOptions> = {}) =>
      new BedrockLlm({
        client: sdk,
        model: MODEL,
        sleep: async (ms) => {
          delays.push(ms);
        },
        retryDelayMs: (attempt) => attempt * 100,
        ...options,
      });

    beforeAll(async () => {
      const { endpoint } = await fake.start({ protocol });
      sdk = client(endpoint, protocol);
    });
    afterAll(async () => {
      sdk.destroy();
      await fake.stop();
    });
    beforeEach(() => {
      fake.reset([{ content: "fine", usage: { inputTokens: 3, outputTokens: 1 } }]);
      delays = [];
    });

    it("retries ThrottlingException twice, then succeeds; every request is counted once", async () => {
      fake.failNext(2, "throttling");
      const response = await llm().complete(ask("hi"));
      expect(response.content).toBe("fine");
      expect(fake.calls.map((c) => c.errorType ?? c.status)).toEqual([
        "ThrottlingException",
        "ThrottlingException",
        200,
      ]);
      expect(delays).toEqual([100, 200]);
    });

    it("retries ServiceUnavailableException and ModelNotReadyException too", async () => {
      fake.failNext(1, "serviceUnavailable");
      fake.failNext(1, "modelNotReady");
      expect((await llm().complete(ask("hi"))).content).toBe("fine");
      expect(fake.calls).toHaveLength(3);
    });

    it("ends persistent throttling in ThrottledError after maxAttempts requests", async () => {
      fake.failNext(10, "throttling", "Too many tokens, please wait before trying again.");
      const out = llm({ maxAttempts: 3 }).complete(ask("hi"));
      await expect(out).rejects.toBeInstanceOf(ThrottledError);
      await expect(out).rejects.toThrow(/Too many tokens.*3 attempt/);
      expect(fake.calls).toHaveLength(3);
      expect(delays).toHaveLength(2);
    });

    it("counts the SDK's own retries toward maxAttempts when the client retries by itself", async () => {
      const retrying = client(fake.endpoint, protocol, { maxAttempts: 2, retryMode: "standard" });
      try {
        fake.failNext(10, "throttling");
        const out = new BedrockLlm({ client: retrying, model: MODEL, maxAttempts: 4, sleep: async () => {} });
        await expect(out.complete(ask("hi"))).rejects.toBeInstanceOf(ThrottledError);
        expect(fake.calls).toHaveLength(4);
      } finally {
        retrying.destroy();
      }
    });

    it("maps ValidationException to ValidationError with Bedrock's message, without retrying", async () => {
      fake.failNext(1, "validation", "Malformed input request: #: extraneous key [foo] is not permitted");
      const out = llm().complete(ask("hi"));
      await expect(out).rejects.toBeInstanceOf(ValidationError);
      await expect(out).rejects.toThrow(/extraneous key \[foo\]/);
      expect(fake.calls).toHaveLength(1);
    });

    it("maps the fake's own validation (a conversation must start with a user message) to ValidationError", async () => {
      const out = llm().complete({ messages: [{ role: "assistant", content: "I speak first" }] });
      await expect(out).rejects.toThrow(/must start with a user message/);
      await expect(out).rejects.toBeInstanceOf(ValidationError);
    });

    it.each(["accessDenied", "resourceNotFound"] as const)(
      "explains how to enable model access on %s",
      async (fault) => {
        fake.failNext(1, fault);
        const out = llm().complete(ask("hi"));
        await expect(out).rejects.toBeInstanceOf(ArborError);
        await expect(out).rejects.toMatchObject({ code: "CONFIG" });
        await expect(out).rejects.toThrow(/Model access.*us-east-1.*Modify model access/);
        expect(fake.calls).toHaveLength(1);
      },
    );

    it("maps other errors to UnavailableError", async () => {
      fake.failNext(1, "internal");
      const out = llm().complete(ask("hi"));
      await expect(out).rejects.toBeInstanceOf(UnavailableError);
      expect(fake.calls).toHaveLength(1);
    });

    it("sends Converse's shape: toolSpec.inputSchema.json, toolChoice, toolResult status only on errors", async () => {
      fake.reset([{ content: "done" }]);
      await llm().complete({
        system: "sys",
        tools: [weatherTool],
        toolChoice: "any",
        maxTokens: 50,
        messages: [
          { role: "user", content: "q" },
          {
            role: "assistant",
            toolCalls: [
              { id: "a1", name: "get_weather", arguments: { city: "X" } },
              { id: "a2", name: "get_weather", arguments: { city: "Y" } },
            ],
          },
          { role: "tool", toolCallId: "a1", content: "ok" },
          { role: "tool", toolCallId: "a2", content: "boom", isError: true },
        ],
      });
      const body = fake.calls[0]?.body;
      expect(fake.calls[0]?.modelId).toBe(MODEL);
      expect(body?.system).toEqual([{ text: "sys" }]);
      expect(body?.inferenceConfig).toEqual({ maxTokens: 50 });
      expect(body?.toolConfig).toEqual({
        tools: [
          {
            toolSpec: {
              name: "get_weather",
              description: weatherTool.description,
              inputSchema: { json: weatherTool.parameters },
            },
          },
        ],
        toolChoice: { any: {} },
      });
      expect(body?.messages?.[2]).toEqual({
        role: "user",
        content: [
          { toolResult: { toolUseId: "a1", content: [{ text: "ok" }] } },
          { toolResult: { toolUseId: "a2", content: [{ text: "boom" }], status: "error" } },
        ],
      });
      expect(fake.calls[0]?.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 /);
    });

    it("streams through eventstream framing: text pieces, tool input JSON in pieces, usage from metadata", async () => {
      fake.reset([
        {
          content: "Checking the weather for you now.",
          toolCalls: [{ id: "s1", name: "get_weather", arguments: { city: "Quito", days: 2 } }],
          usage: { inputTokens: 21, outputTokens: 9 },
        },
      ]);
      const { events, text, response } = await collect(
        llm().stream({ ...ask("weather?"), tools: [weatherTool] }),
      );
      expect(fake.calls[0]?.operation).toBe("converse-stream");
      expect(events.filter((e) => e.type === "text").length).toBeGreaterThan(1);
      expect(text).toBe("Checking the weather for you now.");
      expect(events.filter((e) => e.type === "tool_call")).toEqual([
        { type: "tool_call", call: { id: "s1", name: "get_weather", arguments: { city: "Quito", days: 2 } } },
      ]);
      expect(response).toEqual({
        content: text,
        toolCalls: [{ id: "s1", name: "get_weather", arguments: { city: "Quito", days: 2 } }],
        stopReason: "tool_use",
        usage: { inputTokens: 21, outputTokens: 9 },
        model: MODEL,
      });
    });

    it("retries a throttled stream before it started, and maps a stream's ValidationException", async () => {
      fake.failNext(1, "throttling");
      const { text } = await collect(llm().stream(ask("hi")));
      expect(text).toBe("fine");
      expect(fake.calls.map((c) => c.status)).toEqual([429, 200]);
      fake.failNext(1, "validation", "bad stream request");
      await expect(collect(llm().stream(ask("hi")))).rejects.toBeInstanceOf(ValidationError);
    });

    it("retries a stream broken before it produced output, but not one that already did", async () => {
      fake.reset([{ content: "one two three four five six" }, { content: "again" }, { content: "x" }]);
      fake.breakNextStream(1, "throttlingException"); // after messageStart: nothing seen yet
      expect((await collect(llm().stream(ask("a")))).text).toBe("again");
      expect(fake.calls).toHaveLength(2);

      fake.reset([{ content: "one two three four five six" }]);
      fake.breakNextStream(2, "throttlingException");
      const seen: string[] = [];
      const consume = async () => {
        for await (const e of llm().stream(ask("b"))) seen.push(e.type);
      };
      await expect(consume()).rejects.toBeInstanceOf(ThrottledError);
      expect(seen).toEqual(["text"]);
      expect(fake.calls).toHaveLength(1);

      fake.reset([{ content: "one two three" }]);
      fake.breakNextStream(1, "modelStreamErrorException");
      await expect(collect(llm().stream(ask("c")))).rejects.toBeInstanceOf(ModelError);
    });

    it("maps stop reasons, and a toolUse input that is not an object to ModelError", async () => {
      fake.reset([
        { content: "cut", stopReason: "max_tokens" },
        { content: "x", stopReason: "guardrail_intervened" as never },
      ]);
      expect((await llm().complete(ask("a"))).stopReason).toBe("max_tokens");
      expect((await llm().complete(ask("b"))).stopReason).toBe("content_filtered");
      fake.reset([{ toolCalls: [{ name: "get_weather", arguments: [1, 2] as never }] }]);
      await expect(llm().complete({ ...ask("c"), tools: [weatherTool] })).rejects.toBeInstanceOf(ModelError);
    });
  });
}

describe("BedrockLlm without a server", () => {
  it("says where it could not connect", async () => {
    const fake = new FakeBedrock();
    const { endpoint } = await fake.start({ protocol: "http1" });
    await fake.stop();
    const sdk = client(endpoint, "http1");
    const out = new BedrockLlm({ client: sdk, model: MODEL }).complete(ask("hi"));
    await expect(out).rejects.toBeInstanceOf(UnavailableError);
    await expect(out).rejects.toThrow(new RegExp(`${endpoint}.*ECONNREFUSED`));
    sdk.destroy();
  });
});

/**
 * What Bedrock understood from a Converse request, in the port's terms: system prompt, messages
 * (toolUse / toolResult blocks read back as tool calls and tool messages), tools and tool choice.
 */
function decodeConverse(body: ConverseWireRequest, modelId: string): BackendRequest {
  const messages: LlmMessage[] = [];
  for (const m of body.messages ?? []) {
    const blocks = m.content ?? [];
    if (m.role === "assistant") {
      const text = blocks.flatMap((b) => (b.text === undefined ? [] : [b.text])).join("");
      const toolCalls: LlmToolCall[] = blocks.flatMap((b) =>
        b.toolUse
          ? [
              {
                id: b.toolUse.toolUseId ?? "",
                name: b.toolUse.name ?? "",
                arguments: b.toolUse.input as Record<string, unknown>,
              },
            ]
          : [],
      );
      messages.push({
        role: "assistant",
        ...(text ? { content: text } : {}),
        ...(toolCalls.length ? { toolCalls } : {}),
      });
      continue;
    }
    for (const b of blocks) {
      if (b.toolResult) {
        const content = (b.toolResult.content ?? []).map((c) => c.text ?? JSON.stringify(c.json)).join("");
        messages.push({
          role: "tool",
          toolCallId: b.toolResult.toolUseId ?? "",
          content,
          ...(b.toolResult.status === "error" ? { isError: true } : {}),
        });
      } else if (b.text !== undefined) messages.push({ role: "user", content: b.text });
    }
  }
  const choice = body.toolConfig?.toolChoice;
  const request: BackendRequest = { model: modelId, messages };
  const system = (body.system ?? []).map((s) => s.text ?? "").join("");
  if (system) request.system = system;
  const tools = body.toolConfig?.tools ?? [];
  if (tools.length) {
    request.tools = tools.map((t) => ({
      name: t.toolSpec?.name ?? "",
      description: t.toolSpec?.description ?? "",
      parameters: t.toolSpec?.inputSchema?.json as Record<string, unknown>,
    }));
  }
  if (choice?.any) request.toolChoice = "any";
  else if (choice?.auto) request.toolChoice = "auto";
  else if (choice?.tool) request.toolChoice = { name: choice.tool.name ?? "" };
  if (body.inferenceConfig?.maxTokens !== undefined) request.maxTokens = body.inferenceConfig.maxTokens;
  if (body.inferenceConfig?.temperature !== undefined) request.temperature = body.inferenceConfig.temperature;
  return request;
}
