import { randomUUID } from "node:crypto";
import {
  ArborError,
  ModelError,
  ThrottledError,
  UnavailableError,
  ValidationError,
} from "../../kernel/errors.ts";
import { componentLogger } from "../../kernel/logger.ts";
import type { Llm, LlmRequest, LlmResponse, LlmStreamEvent } from "../../ports/llm.ts";
import {
  backoffDelayMs,
  checkMaxAttempts,
  checkRequest,
  DEFAULT_MAX_ATTEMPTS,
  describeError,
  isAbortError,
  networkCode,
  sleepFor,
} from "./llm-common.ts";
import {
  type ChatCompletion,
  ChatStreamAssembler,
  errorText,
  fromChatCompletion,
  sseData,
  toChatBody,
} from "./openai-mapping.ts";

/**
 * The LLM port on any OpenAI-compatible chat-completions endpoint: Ollama (`http://localhost:11434/v1`),
 * vLLM, LM Studio, or OpenAI itself. Plain `fetch` (injectable); the mapping and the quirks it
 * tolerates are in openai-mapping.ts. Streaming uses server-sent events with
 * `stream_options.include_usage`; a server that ignores `stream: true` and answers JSON still works.
 *
 * Errors: 429 and 503 are retried with exponential backoff and jitter (honouring Retry-After, capped at
 * 30 s), then ThrottledError; 400, 413 and 422 are ValidationError with the server's message; 401 and
 * 403 (API key) and 404 (wrong baseUrl, or a model the server does not have) are an ArborError with code
 * CONFIG that says what to check; a server that cannot be reached is UnavailableError naming the URL;
 * anything else is UnavailableError.
 */
export interface OpenAiCompatibleLlmOptions {
  /** e.g. "http://localhost:11434/v1" (Ollama), "http://localhost:8000/v1" (vLLM). */
  baseUrl: string;
  model: string;
  /** Sent as `Authorization: Bearer <apiKey>`; local servers usually need none. */
  apiKey?: string;
  fetch?: typeof fetch;
  /** Requests per call when the server throttles (default 4, first try included). */
  maxAttempts?: number;
  sleep?: (ms: number) => Promise<void>;
  /** Delay before attempt n+1 (default: exponential from 250 ms, capped at 8 s, with jitter). */
  retryDelayMs?: (attempt: number) => number;
  /** Ids for tool calls the server sent without one. */
  newId?: () => string;
}

const MAX_RETRY_AFTER_MS = 30_000;

export class OpenAiCompatibleLlm implements Llm {
  readonly id: string;
  readonly #url: string;
  readonly #model: string;
  readonly #apiKey: string | undefined;
  readonly #fetch: typeof fetch;
  readonly #maxAttempts: number;
  readonly #sleep: (ms: number) => Promise<void>;
  readonly #retryDelayMs: (attempt: number) => number;
  readonly #newId: () => string;
  readonly #log = componentLogger("openai-compatible-llm");

  constructor(options: OpenAiCompatibleLlmOptions) {
    if (!options.model) throw new ValidationError("OpenAiCompatibleLlm needs a model");
    const base = URL.canParse(options.baseUrl) ? new URL(options.baseUrl) : undefined;
    if (base?.protocol !== "http:" && base?.protocol !== "https:") {
      throw new ValidationError("OpenAiCompatibleLlm baseUrl must be an http(s) URL", [
        `got ${JSON.stringify(options.baseUrl)}; e.g. http://localhost:11434/v1 for Ollama`,
      ]);
    }
    this.#url = `${base.href.replace(/\/+$/, "")}/chat/completions`;
    this.#model = options.model;
    this.id = `openai:${options.model}`;
    this.#apiKey = options.apiKey;
    this.#fetch = options.fetch ?? globalThis.fetch;
    this.#maxAttempts = checkMaxAttempts("OpenAiCompatibleLlm", options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS);
    this.#sleep = options.sleep ?? sleepFor;
    this.#retryDelayMs = options.retryDelayMs ?? ((attempt) => backoffDelayMs(attempt));
    this.#newId = options.newId ?? (() => `call_${randomUUID().replaceAll("-", "").slice(0, 24)}`);
  }

  async complete(request: LlmRequest): Promise<LlmResponse> {
    checkRequest(request);
    const body = toChatBody(request, this.#model, false);
    const res = await this.#post(body, request.signal);
    return fromChatCompletion(await this.#json(res), String(body.model), this.#newId);
  }

  async *stream(request: LlmRequest): AsyncIterable<LlmStreamEvent> {
    checkRequest(request);
    const body = toChatBody(request, this.#model, true);
    const res = await this.#post(body, request.signal);
    const model = String(body.model);
    if (!(res.headers.get("content-type") ?? "").includes("text/event-stream") || !res.body) {
      // The server ignored stream: true and answered the whole completion at once.
      const response = fromChatCompletion(await this.#json(res), model, this.#newId);
      if (response.content) yield { type: "text", delta: response.content };
      for (const call of response.toolCalls) yield { type: "tool_call", call };
      yield { type: "done", response };
      return;
    }
    const assembler = new ChatStreamAssembler(model, this.#newId);
    try {
      for await (const data of sseData(res.body)) {
        if (data.trim() === "[DONE]") break;
        let chunk: ChatCompletion;
        try {
          chunk = JSON.parse(data) as ChatCompletion;
        } catch (error) {
          throw new ModelError(`${this.#url} streamed a chunk that is not JSON: ${data.slice(0, 200)}`, {
            cause: error,
          });
        }
        yield* assembler.accept(chunk);
      }
    } catch (error) {
      if (error instanceof ArborError || isAbortError(error)) throw error;
      throw new UnavailableError(`The stream from ${this.#url} broke off: ${describeError(error)}`, {
        cause: error,
      });
    }
    yield* assembler.finish();
  }

  /**
   * Whether the server answers at all: `GET <baseUrl>/models`, which OpenAI-compatible servers list
   * their models at. Any HTTP answer counts (a server without the route still answers); no model
   * request is sent.
   */
  async probe(signal: AbortSignal): Promise<void> {
    const url = this.#url.replace(/\/chat\/completions$/, "/models");
    try {
      const res = await this.#fetch(url, {
        headers: this.#apiKey ? { authorization: `Bearer ${this.#apiKey}` } : {},
        signal,
      });
      await res.body?.cancel();
    } catch (error) {
      if (signal.aborted)
        throw new UnavailableError(
          `The OpenAI-compatible LLM server at ${url} did not answer in time. Check that it is running and that baseUrl is right.`,
          { cause: error, details: { url } },
        );
      throw this.#unreachable(error);
    }
  }

  async #post(body: Record<string, unknown>, signal: AbortSignal | undefined): Promise<Response> {
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: "application/json",
    };
    if (body.stream) headers.accept = "text/event-stream";
    if (this.#apiKey) headers.authorization = `Bearer ${this.#apiKey}`;
    const text = JSON.stringify(body);
    for (let attempt = 1; ; attempt++) {
      let res: Response;
      try {
        res = await this.#fetch(this.#url, {
          method: "POST",
          headers,
          body: text,
          ...(signal ? { signal } : {}),
        });
      } catch (error) {
        if (isAbortError(error)) throw error;
        throw this.#unreachable(error);
      }
      if (res.ok) return res;
      const message = await serverMessage(res);
      if ((res.status === 429 || res.status === 503) && attempt < this.#maxAttempts) {
        const delay = Math.max(this.#retryDelayMs(attempt), retryAfterMs(res));
        this.#log.warn("the LLM server asked to slow down; retrying", {
          url: this.#url,
          status: res.status,
          attempt,
          delayMs: Math.round(delay),
        });
        await this.#sleep(delay);
        continue;
      }
      throw this.#statusError(res.status, message, attempt, String(body.model));
    }
  }

  async #json(res: Response): Promise<ChatCompletion> {
    let json: ChatCompletion;
    try {
      json = (await res.json()) as ChatCompletion;
    } catch (error) {
      throw new UnavailableError(`${this.#url} answered with a body that is not JSON`, { cause: error });
    }
    if (json.error !== undefined && !json.choices) {
      throw new UnavailableError(`${this.#url} answered with an error: ${errorText(json.error)}`, {
        details: { error: json.error },
      });
    }
    return json;
  }

  #unreachable(error: unknown): UnavailableError {
    const code = networkCode(error);
    return new UnavailableError(
      `Could not reach the OpenAI-compatible LLM server at ${this.#url}${code ? ` (${code})` : ""}. ` +
        "Check that the server is running (for Ollama: `ollama serve`; vLLM: `vllm serve <model>`; " +
        "LM Studio: start its local server) and that baseUrl is right (Ollama: http://localhost:11434/v1).",
      { cause: error, details: { url: this.#url, code } },
    );
  }

  #statusError(status: number, message: string, attempts: number, model: string): ArborError {
    const details = { url: this.#url, status, model, attempts };
    const said = `${this.#url} answered ${status}: ${message}`;
    if (status === 429 || status === 503) {
      return new ThrottledError(`${said}; gave up after ${attempts} attempt(s). Try again later.`, {
        details,
      });
    }
    if (status === 400 || status === 413 || status === 422) {
      return new ValidationError(`The LLM server rejected the request for model ${model}: ${message}`);
    }
    if (status === 401 || status === 403) {
      return new ArborError("CONFIG", `${said}. Check the apiKey for this server.`, { details });
    }
    if (status === 404) {
      return new ArborError(
        "CONFIG",
        `${said}. Check that baseUrl points at the OpenAI-compatible API (it usually ends in /v1) and that ` +
          `the server has model ${JSON.stringify(model)} (for Ollama: \`ollama pull ${model}\`).`,
        { details },
      );
    }
    return new UnavailableError(said, { details });
  }
}

async function serverMessage(res: Response): Promise<string> {
  const text = await res.text().catch(() => "");
  if (!text) return res.statusText || "(no message)";
  try {
    return errorText(JSON.parse(text));
  } catch {
    return text.slice(0, 500);
  }
}

/** Retry-After in seconds (capped); 0 when absent or given as a date. */
function retryAfterMs(res: Response): number {
  const seconds = Number(res.headers.get("retry-after") ?? "");
  return Number.isFinite(seconds) && seconds > 0 ? Math.min(seconds * 1000, MAX_RETRY_AFTER_MS) : 0;
}
