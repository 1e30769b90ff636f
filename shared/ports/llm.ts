/**
 * LLM port: one neutral shape for chat completions with tool use, whatever the provider.
 * Adapters: Amazon Bedrock Converse / ConverseStream, OpenAI-compatible chat endpoints (Ollama,
 * vLLM, LM Studio), and a scripted model for tests and offline runs.
 */
export interface LlmToolSpec {
  /** 1-64 of a-z A-Z 0-9 _ - */
  name: string;
  description: string;
  /** JSON Schema of the arguments object. */
  parameters: Record<string, unknown>;
}

export interface LlmToolCall {
  /** Provider's id for the call; pairs the result with it. */
  id: string;
  name: string;
  arguments: Record<string, unknown>;
}

export type LlmMessage =
  | { role: "user"; content: string }
  | { role: "assistant"; content?: string; toolCalls?: LlmToolCall[] }
  | { role: "tool"; toolCallId: string; content: string; isError?: boolean };

export interface LlmRequest {
  /** Provider model id; adapters have a default. */
  model?: string;
  system?: string;
  messages: LlmMessage[];
  tools?: LlmToolSpec[];
  /** "auto" (default), "any" (must call some tool), or one tool by name. */
  toolChoice?: "auto" | "any" | { name: string };
  maxTokens?: number;
  temperature?: number;
  signal?: AbortSignal;
}

export type StopReason =
  | "end_turn"
  | "tool_use"
  | "max_tokens"
  | "stop_sequence"
  | "content_filtered"
  | "other";

export interface LlmUsage {
  /** Input tokens billed at the input price (not those read from or written to a prompt cache). */
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens?: number;
  cacheWriteTokens?: number;
}

export interface LlmResponse {
  content?: string;
  toolCalls: LlmToolCall[];
  stopReason: StopReason;
  usage: LlmUsage;
  /** The model that answered. */
  model: string;
}

export type LlmStreamEvent =
  | { type: "text"; delta: string }
  | { type: "tool_call"; call: LlmToolCall }
  | { type: "done"; response: LlmResponse };

export interface Llm {
  /** e.g. "bedrock:anthropic.claude-3-5-haiku", "openai:llama3.1", "scripted". */
  readonly id: string;
  /** Throws ThrottledError (after retries), ValidationError (bad request), ModelError, UnavailableError. */
  complete(request: LlmRequest): Promise<LlmResponse>;
  /** The same answer as complete(), delivered as it is produced; the last event is "done". */
  stream(request: LlmRequest): AsyncIterable<LlmStreamEvent>;
  /**
   * Whether the model's endpoint answers at all, without a model request (for health checks):
   * resolves on any answer, rejects (UnavailableError, saying what to check) when it cannot be
   * reached or does not answer before `signal` aborts. Optional: without it, only calls tell.
   */
  probe?(signal: AbortSignal): Promise<void>;
}
