import type {
  StopReason as BedrockStopReason,
  ContentBlock,
  ConverseRequest,
  ConverseResponse,
  ConverseStreamOutput,
  Message,
  ToolChoice,
  ToolConfiguration,
  ToolUseBlock,
} from "@aws-sdk/client-bedrock-runtime";
import { ModelError } from "../../kernel/errors.ts";
import type {
  LlmMessage,
  LlmRequest,
  LlmResponse,
  LlmStreamEvent,
  LlmToolCall,
  LlmUsage,
  StopReason,
} from "../../ports/llm.ts";
import { impliedStopReason, isPlainObject, zeroUsage } from "./llm-common.ts";

/**
 * Mapping between the LLM port and Bedrock's Converse API (the JSON that ConverseCommand and
 * ConverseStreamCommand send and receive):
 * - `system` is a list of `{ text }` blocks; `inferenceConfig` carries maxTokens and temperature;
 * - tools are `toolConfig.tools[].toolSpec` with the JSON Schema under `inputSchema.json`, and
 *   `toolConfig.toolChoice` is `{ auto: {} }`, `{ any: {} }` or `{ tool: { name } }`;
 * - an assistant turn is `{ text }` and `{ toolUse: { toolUseId, name, input } }` blocks; tool results
 *   go back in the next *user* message as `{ toolResult: { toolUseId, content: [{ text }], status } }`.
 *   Bedrock wants user and assistant to alternate, so consecutive messages of one role (several tool
 *   results, then maybe a user text) are merged into one message. `status: "error"` is sent only for
 *   failed tools: some models (not Claude or Nova) refuse the field.
 */

/** A JSON value as the SDK types it (tool input, input schema). */
type Document = NonNullable<ToolUseBlock["input"]>;

/** The Converse request for a port request; `modelId` is the request's model or the default. */
export function toConverseRequest(request: LlmRequest, defaultModel: string): ConverseRequest {
  const input: ConverseRequest = {
    modelId: request.model ?? defaultModel,
    messages: toBedrockMessages(request.messages),
  };
  if (request.system) input.system = [{ text: request.system }];
  if (request.maxTokens !== undefined || request.temperature !== undefined) {
    input.inferenceConfig = {
      ...(request.maxTokens === undefined ? {} : { maxTokens: request.maxTokens }),
      ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
    };
  }
  const tools = request.tools ?? [];
  if (tools.length > 0) {
    const toolConfig: ToolConfiguration = {
      tools: tools.map((t) => ({
        toolSpec: {
          name: t.name,
          description: t.description,
          inputSchema: { json: t.parameters as Document },
        },
      })),
    };
    const choice = toToolChoice(request.toolChoice);
    if (choice) toolConfig.toolChoice = choice;
    input.toolConfig = toolConfig;
  }
  return input;
}

function toToolChoice(choice: LlmRequest["toolChoice"]): ToolChoice | undefined {
  if (choice === undefined) return undefined;
  if (choice === "auto") return { auto: {} };
  if (choice === "any") return { any: {} };
  return { tool: { name: choice.name } };
}

export function toBedrockMessages(messages: readonly LlmMessage[]): Message[] {
  const out: Message[] = [];
  const push = (role: "user" | "assistant", blocks: ContentBlock[]) => {
    const last = out[out.length - 1];
    if (last?.role === role && last.content) last.content.push(...blocks);
    else out.push({ role, content: blocks });
  };
  for (const m of messages) {
    if (m.role === "user") {
      push("user", [{ text: m.content }]);
    } else if (m.role === "assistant") {
      const blocks: ContentBlock[] = m.content ? [{ text: m.content }] : [];
      for (const call of m.toolCalls ?? []) {
        blocks.push({ toolUse: { toolUseId: call.id, name: call.name, input: call.arguments as Document } });
      }
      push("assistant", blocks);
    } else {
      push("user", [
        {
          toolResult: {
            toolUseId: m.toolCallId,
            // Bedrock rejects blank text blocks.
            content: [{ text: m.content.trim() === "" ? "(no output)" : m.content }],
            ...(m.isError ? { status: "error" as const } : {}),
          },
        },
      ]);
    }
  }
  return out;
}

export function fromConverseResponse(response: ConverseResponse, model: string): LlmResponse {
  const blocks = response.output?.message?.content ?? [];
  const text: string[] = [];
  const toolCalls: LlmToolCall[] = [];
  for (const block of blocks) {
    if (block.text !== undefined) text.push(block.text);
    else if (block.toolUse) {
      toolCalls.push({
        id: block.toolUse.toolUseId ?? "",
        name: block.toolUse.name ?? "",
        arguments: toolInput(block.toolUse.input, block.toolUse.name),
      });
    }
  }
  const content = text.join("");
  return {
    ...(content ? { content } : {}),
    toolCalls,
    stopReason: toStopReason(response.stopReason, toolCalls),
    usage: toUsage(response.usage),
    model,
  };
}

export function toStopReason(
  reason: BedrockStopReason | string | undefined,
  calls: LlmToolCall[],
): StopReason {
  switch (reason) {
    case "end_turn":
    case "tool_use":
    case "max_tokens":
    case "stop_sequence":
    case "content_filtered":
      return reason;
    case "guardrail_intervened":
      return "content_filtered";
    case undefined:
      return impliedStopReason(calls);
    default:
      // malformed_model_output, malformed_tool_use, model_context_window_exceeded, anything new
      return "other";
  }
}

/** Bedrock counts the tokens read from and written to the prompt cache apart from `inputTokens`. */
function toUsage(
  usage:
    | {
        inputTokens?: number | undefined;
        outputTokens?: number | undefined;
        cacheReadInputTokens?: number | undefined;
        cacheWriteInputTokens?: number | undefined;
      }
    | undefined,
): LlmUsage {
  if (!usage) return zeroUsage();
  return {
    inputTokens: usage.inputTokens ?? 0,
    outputTokens: usage.outputTokens ?? 0,
    ...(usage.cacheReadInputTokens ? { cacheReadTokens: usage.cacheReadInputTokens } : {}),
    ...(usage.cacheWriteInputTokens ? { cacheWriteTokens: usage.cacheWriteInputTokens } : {}),
  };
}

function toolInput(input: unknown, name: string | undefined): Record<string, unknown> {
  if (input === undefined || input === null) return {};
  if (isPlainObject(input)) return input;
  throw new ModelError(
    `Bedrock returned a toolUse for ${JSON.stringify(name)} whose input is not a JSON object`,
    {
      details: { tool: name, input },
    },
  );
}

interface TextBlock {
  kind: "text";
  text: string;
}
interface ToolBlock {
  kind: "tool";
  id: string;
  name: string;
  json: string;
  call?: LlmToolCall;
}

/**
 * Turns ConverseStream events into the port's stream events: text deltas as they come, a tool call
 * when its block stops (its input arrives as JSON text in pieces, assembled per contentBlockIndex),
 * and, from `finish()`, the full response with the stop reason and the usage of the metadata event.
 */
export class ConverseStreamAssembler {
  readonly #blocks = new Map<number, TextBlock | ToolBlock>();
  #stopReason: string | undefined;
  #usage: LlmUsage = zeroUsage();
  readonly model: string;

  constructor(model: string) {
    this.model = model;
  }

  /** Port events for one Bedrock stream event (most yield none or one). */
  accept(event: ConverseStreamOutput): LlmStreamEvent[] {
    if (event.contentBlockStart) {
      const { contentBlockIndex = 0, start } = event.contentBlockStart;
      if (start?.toolUse) {
        this.#blocks.set(contentBlockIndex, {
          kind: "tool",
          id: start.toolUse.toolUseId ?? "",
          name: start.toolUse.name ?? "",
          json: "",
        });
      }
      return [];
    }
    if (event.contentBlockDelta) {
      const { contentBlockIndex = 0, delta } = event.contentBlockDelta;
      const block = this.#blocks.get(contentBlockIndex);
      if (delta?.text !== undefined) {
        if (block?.kind === "tool") throw streamError(`text delta for tool block ${contentBlockIndex}`);
        if (block) block.text += delta.text;
        else this.#blocks.set(contentBlockIndex, { kind: "text", text: delta.text });
        return delta.text ? [{ type: "text", delta: delta.text }] : [];
      }
      if (delta?.toolUse) {
        if (block?.kind !== "tool")
          throw streamError(`toolUse delta for block ${contentBlockIndex}, which is no toolUse`);
        block.json += delta.toolUse.input ?? "";
      }
      return [];
    }
    if (event.contentBlockStop) {
      const block = this.#blocks.get(event.contentBlockStop.contentBlockIndex ?? 0);
      if (block?.kind === "tool" && !block.call) {
        block.call = { id: block.id, name: block.name, arguments: parseToolJson(block) };
        return [{ type: "tool_call", call: block.call }];
      }
      return [];
    }
    if (event.messageStop) this.#stopReason = event.messageStop.stopReason;
    if (event.metadata) this.#usage = toUsage(event.metadata.usage);
    return [];
  }

  /** Tool calls whose block never stopped, then the "done" event. */
  finish(): LlmStreamEvent[] {
    const events: LlmStreamEvent[] = [];
    const ordered = [...this.#blocks.entries()].sort(([a], [b]) => a - b).map(([, b]) => b);
    const toolCalls: LlmToolCall[] = [];
    let content = "";
    for (const block of ordered) {
      if (block.kind === "text") {
        content += block.text;
        continue;
      }
      if (!block.call) {
        block.call = { id: block.id, name: block.name, arguments: parseToolJson(block) };
        events.push({ type: "tool_call", call: block.call });
      }
      toolCalls.push(block.call);
    }
    const response: LlmResponse = {
      ...(content ? { content } : {}),
      toolCalls,
      stopReason: toStopReason(this.#stopReason, toolCalls),
      usage: this.#usage,
      model: this.model,
    };
    events.push({ type: "done", response });
    return events;
  }
}

function parseToolJson(block: ToolBlock): Record<string, unknown> {
  if (block.json.trim() === "") return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(block.json);
  } catch (error) {
    throw new ModelError(
      `Bedrock streamed tool input for ${JSON.stringify(block.name)} that is not valid JSON`,
      {
        cause: error,
        details: { tool: block.name, input: block.json },
      },
    );
  }
  return toolInput(parsed, block.name);
}

function streamError(what: string): ModelError {
  return new ModelError(`Bedrock's ConverseStream sent an unexpected event: ${what}`);
}
