import { ModelError } from "../../kernel/errors.ts";
import type {
  LlmRequest,
  LlmResponse,
  LlmStreamEvent,
  LlmToolCall,
  LlmUsage,
  StopReason,
} from "../../ports/llm.ts";
import { impliedStopReason, isPlainObject } from "./llm-common.ts";

/**
 * Mapping between the LLM port and the OpenAI chat-completions wire format that Ollama, vLLM and
 * LM Studio speak (`POST {baseUrl}/chat/completions`):
 * - the system prompt is a first `{ role: "system" }` message;
 * - tools are `{ type: "function", function: { name, description, parameters } }`; toolChoice "any"
 *   is `"required"`, a named tool is `{ type: "function", function: { name } }`;
 * - assistant tool calls are `tool_calls: [{ id, type: "function", function: { name, arguments } }]`
 *   with `arguments` as a JSON *string*; results are `{ role: "tool", tool_call_id, content }`. The
 *   format has no error flag, so a failed tool's result is sent as `Error: <content>`.
 *
 * What servers send back varies; this side is lenient where it can be without guessing: `arguments`
 * may be an object instead of a string, a tool call may lack an `id` (one is generated), a server
 * may say finish_reason "stop" while returning tool calls (it is "tool_use" then), usage may be
 * missing (0). A tool call written as JSON text in `content` stays text.
 */

export const TOOL_ERROR_PREFIX = "Error: ";

export interface ChatToolCall {
  id?: string | null;
  index?: number;
  type?: string;
  function?: { name?: string | null; arguments?: unknown };
}

export interface ChatMessage {
  role: string;
  content?: string | null;
  tool_calls?: ChatToolCall[];
  tool_call_id?: string;
}

export interface ChatCompletion {
  model?: string;
  choices?: { message?: ChatMessage; delta?: ChatMessage; finish_reason?: string | null }[];
  usage?: {
    prompt_tokens?: number;
    completion_tokens?: number;
    prompt_tokens_details?: { cached_tokens?: number } | null;
  } | null;
  error?: unknown;
}

export function toChatBody(request: LlmRequest, model: string, stream: boolean): Record<string, unknown> {
  const messages: ChatMessage[] = [];
  if (request.system) messages.push({ role: "system", content: request.system });
  for (const m of request.messages) {
    if (m.role === "user") messages.push({ role: "user", content: m.content });
    else if (m.role === "tool") {
      const content = m.isError ? `${TOOL_ERROR_PREFIX}${m.content}` : m.content;
      messages.push({ role: "tool", tool_call_id: m.toolCallId, content });
    } else {
      const calls = m.toolCalls ?? [];
      messages.push({
        role: "assistant",
        content: m.content ?? null,
        ...(calls.length === 0
          ? {}
          : {
              tool_calls: calls.map((c) => ({
                id: c.id,
                type: "function",
                function: { name: c.name, arguments: JSON.stringify(c.arguments) },
              })),
            }),
      });
    }
  }
  const body: Record<string, unknown> = { model: request.model ?? model, messages };
  const tools = request.tools ?? [];
  if (tools.length > 0) {
    body.tools = tools.map((t) => ({
      type: "function",
      function: { name: t.name, description: t.description, parameters: t.parameters },
    }));
    const choice = request.toolChoice;
    if (choice === "auto") body.tool_choice = "auto";
    else if (choice === "any") body.tool_choice = "required";
    else if (choice) body.tool_choice = { type: "function", function: { name: choice.name } };
  }
  if (request.maxTokens !== undefined) body.max_tokens = request.maxTokens;
  if (request.temperature !== undefined) body.temperature = request.temperature;
  if (stream) {
    body.stream = true;
    body.stream_options = { include_usage: true };
  }
  return body;
}

export function fromChatCompletion(json: ChatCompletion, model: string, newId: () => string): LlmResponse {
  const choice = json.choices?.[0];
  if (!choice?.message) {
    throw new ModelError("The chat completion has no choices[0].message", { details: { response: json } });
  }
  const toolCalls = (choice.message.tool_calls ?? []).map((c) =>
    toToolCall(c.id, c.function?.name, c.function?.arguments, newId),
  );
  const content = typeof choice.message.content === "string" ? choice.message.content : "";
  return {
    ...(content ? { content } : {}),
    toolCalls,
    stopReason: toStopReason(choice.finish_reason, toolCalls),
    usage: toUsage(json.usage),
    model: json.model || model,
  };
}

export function toStopReason(reason: string | null | undefined, calls: readonly LlmToolCall[]): StopReason {
  if (calls.length > 0) return "tool_use";
  switch (reason) {
    case "stop":
    case "eos":
      return "end_turn";
    case "length":
      return "max_tokens";
    case "content_filter":
      return "content_filtered";
    case "tool_calls":
    case "function_call":
      return "tool_use";
    case null:
    case undefined:
      return impliedStopReason(calls);
    default:
      return "other";
  }
}

/** OpenAI counts the prompt's cached tokens within `prompt_tokens`; here they are apart. */
export function toUsage(usage: ChatCompletion["usage"]): LlmUsage {
  const cached = usage?.prompt_tokens_details?.cached_tokens ?? 0;
  return {
    inputTokens: Math.max(0, (usage?.prompt_tokens ?? 0) - cached),
    outputTokens: usage?.completion_tokens ?? 0,
    ...(cached > 0 ? { cacheReadTokens: cached } : {}),
  };
}

export function toToolCall(
  id: string | null | undefined,
  name: string | null | undefined,
  args: unknown,
  newId: () => string,
): LlmToolCall {
  if (!name) throw new ModelError("The model returned a tool call without a function name");
  return { id: id || newId(), name, arguments: parseArguments(args, name) };
}

/** Tool arguments: a JSON string (the standard), an object (some servers), or nothing. */
export function parseArguments(args: unknown, name: string): Record<string, unknown> {
  if (args === undefined || args === null) return {};
  if (isPlainObject(args)) return args;
  if (typeof args === "string") {
    if (args.trim() === "") return {};
    let parsed: unknown;
    try {
      parsed = JSON.parse(args);
    } catch (error) {
      throw new ModelError(`The model's arguments for tool ${JSON.stringify(name)} are not valid JSON`, {
        cause: error,
        details: { tool: name, arguments: args },
      });
    }
    if (isPlainObject(parsed)) return parsed;
  }
  throw new ModelError(`The model's arguments for tool ${JSON.stringify(name)} are not a JSON object`, {
    details: { tool: name, arguments: args },
  });
}

interface PendingCall {
  id: string;
  name: string;
  /** Argument fragments as strings, or the object a server sent whole. */
  text: string;
  object?: Record<string, unknown>;
}

/**
 * Assembles a streamed chat completion: text deltas pass through at once; tool call fragments are
 * joined per `index` (without one, a fragment that names a function starts the next call); the tool
 * calls are emitted when the stream ends, then "done" with the full response.
 */
export class ChatStreamAssembler {
  readonly #calls = new Map<number, PendingCall>();
  #content = "";
  #finish: string | null | undefined;
  #usage: ChatCompletion["usage"];
  #model: string;
  readonly newId: () => string;

  constructor(model: string, newId: () => string) {
    this.#model = model;
    this.newId = newId;
  }

  accept(chunk: ChatCompletion): LlmStreamEvent[] {
    if (chunk.error !== undefined) {
      throw new ModelError(`The server reported an error mid-stream: ${errorText(chunk.error)}`, {
        details: { error: chunk.error },
      });
    }
    if (chunk.model) this.#model = chunk.model;
    if (chunk.usage) this.#usage = chunk.usage;
    const events: LlmStreamEvent[] = [];
    for (const choice of chunk.choices ?? []) {
      const delta = choice.delta ?? choice.message;
      if (choice.finish_reason) this.#finish = choice.finish_reason;
      if (!delta) continue;
      if (typeof delta.content === "string" && delta.content) {
        this.#content += delta.content;
        events.push({ type: "text", delta: delta.content });
      }
      for (const fragment of delta.tool_calls ?? []) {
        const index = fragment.index ?? this.#indexWithout(fragment);
        let call = this.#calls.get(index);
        if (!call) {
          call = { id: "", name: "", text: "" };
          this.#calls.set(index, call);
        }
        if (fragment.id) call.id = fragment.id;
        // The name comes with the first fragment; some servers repeat it in every fragment.
        if (fragment.function?.name && !call.name) call.name = fragment.function.name;
        const args = fragment.function?.arguments;
        if (typeof args === "string") call.text += args;
        else if (isPlainObject(args)) call.object = args;
      }
    }
    return events;
  }

  /** Servers that send no index: a fragment naming a function starts a call, others continue the last. */
  #indexWithout(fragment: ChatToolCall): number {
    const last = Math.max(-1, ...this.#calls.keys());
    return fragment.function?.name || last < 0 ? last + 1 : last;
  }

  finish(): LlmStreamEvent[] {
    const ordered = [...this.#calls.entries()].sort(([a], [b]) => a - b).map(([, c]) => c);
    const toolCalls = ordered.map((c) => toToolCall(c.id, c.name, c.object ?? c.text, this.newId));
    const response: LlmResponse = {
      ...(this.#content ? { content: this.#content } : {}),
      toolCalls,
      stopReason: toStopReason(this.#finish, toolCalls),
      usage: toUsage(this.#usage),
      model: this.#model,
    };
    return [...toolCalls.map((call) => ({ type: "tool_call" as const, call })), { type: "done", response }];
  }
}

/** The `data:` payloads of a server-sent-events body, in order. */
export async function* sseData(body: ReadableStream<Uint8Array>): AsyncIterable<string> {
  const decoder = new TextDecoder();
  let buffer = "";
  let data: string[] = [];
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      const lines = buffer.split(/\r\n|\r|\n/);
      buffer = done ? "" : (lines.pop() ?? "");
      for (const line of lines) {
        if (line === "") {
          if (data.length > 0) yield data.join("\n");
          data = [];
        } else if (line.startsWith("data:")) {
          data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
        }
      }
      if (done) {
        if (data.length > 0) yield data.join("\n");
        return;
      }
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => {});
  }
}

/** The message of an OpenAI-style error body (`{ error: { message } }`, `{ error: "..." }`, text). */
export function errorText(error: unknown): string {
  if (typeof error === "string") return error;
  if (isPlainObject(error)) {
    if (typeof error.message === "string") return error.message;
    if (error.error !== undefined) return errorText(error.error);
    if (typeof error.detail === "string") return error.detail;
  }
  return JSON.stringify(error);
}
