/**
 * A fake OpenAI-compatible chat server for tests (what Ollama, vLLM and LM Studio serve):
 * `POST /v1/chat/completions`, answering JSON, or server-sent events when the body says
 * `stream: true` (content deltas, tool call fragments per `index`, a finish chunk, a usage chunk when
 * `stream_options.include_usage`, then `data: [DONE]`).
 *
 * It checks what OpenAI checks (messages present, tool results answer the tool calls of the assistant
 * message before them, `function.arguments` is a string, a named tool_choice is among the tools) and
 * answers 400 `{ error: { message, type } }` otherwise.
 *
 * Test hooks: `script`, `calls` (path, headers, parsed body, status), `failNext(n, status, message)`,
 * and `quirks` to imitate servers that bend the format: arguments as objects, tool calls without
 * ids, no usage, finish_reason "stop" next to tool calls, tool call fragments without `index`.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { ScriptedTurn } from "../../shared/adapters/llm/scripted-llm.ts";
import type { StopReason } from "../../shared/ports/llm.ts";

export interface ChatWireMessage {
  role?: string;
  content?: string | null;
  tool_call_id?: string;
  tool_calls?: { id?: string; type?: string; function?: { name?: string; arguments?: unknown } }[];
}

export interface ChatWireRequest {
  model?: string;
  messages?: ChatWireMessage[];
  tools?: {
    type?: string;
    function?: { name?: string; description?: string; parameters?: Record<string, unknown> };
  }[];
  tool_choice?: string | { type?: string; function?: { name?: string } };
  max_tokens?: number;
  temperature?: number;
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
}

export type OpenAiScript =
  | readonly ScriptedTurn[]
  | ((request: ChatWireRequest, callIndex: number) => ScriptedTurn | Promise<ScriptedTurn>);

export interface OpenAiQuirks {
  objectArguments?: boolean;
  omitToolCallIds?: boolean;
  omitUsage?: boolean;
  /** Say this finish_reason whatever the answer. */
  finishReason?: string;
  omitIndex?: boolean;
}

export interface FakeOpenAiCall {
  path: string;
  headers: Record<string, string>;
  body: ChatWireRequest;
  status: number;
}

class HttpFault extends Error {
  readonly status: number;
  readonly type: string;

  constructor(status: number, message: string, type = "invalid_request_error") {
    super(message);
    this.status = status;
    this.type = type;
  }
}

export class FakeOpenAi {
  script: OpenAiScript;
  quirks: OpenAiQuirks = {};
  readonly calls: FakeOpenAiCall[] = [];
  readonly #faults: { status: number; message: string }[] = [];
  #server: Server | undefined;
  #baseUrl: string | undefined;
  #answered = 0;

  constructor(script: OpenAiScript = []) {
    this.script = script;
  }

  /** Listens on 127.0.0.1, on `port` (default: a free one); `baseUrl` ends in /v1. */
  async start(port = 0): Promise<{ baseUrl: string }> {
    if (this.#baseUrl) return { baseUrl: this.#baseUrl };
    const server = createServer((req, res) => {
      this.#handle(req, res).catch((error: unknown) => {
        if (!res.headersSent) sendError(res, new HttpFault(500, String(error), "server_error"));
        else res.end();
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => resolve());
    });
    this.#server = server;
    this.#baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
    return { baseUrl: this.#baseUrl };
  }

  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    this.#baseUrl = undefined;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  get baseUrl(): string {
    if (!this.#baseUrl) throw new Error("The fake OpenAI server is not started");
    return this.#baseUrl;
  }

  /** The next `count` requests get this status and `{ error: { message } }`. */
  failNext(count: number, status: number, message = `Injected ${status}`): void {
    for (let i = 0; i < count; i++) this.#faults.push({ status, message });
  }

  reset(script: OpenAiScript = this.script): void {
    this.script = script;
    this.quirks = {};
    this.calls.length = 0;
    this.#faults.length = 0;
    this.#answered = 0;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const call: FakeOpenAiCall = {
      path: (req.url ?? "").split("?")[0] ?? "",
      headers: Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)])),
      body: {},
      status: 200,
    };
    this.calls.push(call);
    try {
      if (req.method !== "POST" || call.path !== "/v1/chat/completions") {
        throw new HttpFault(404, `Unknown route ${req.method} ${req.url}`);
      }
      try {
        call.body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as ChatWireRequest;
      } catch {
        throw new HttpFault(400, "We could not parse the JSON body of your request.");
      }
      const fault = this.#faults.shift();
      if (fault)
        throw new HttpFault(
          fault.status,
          fault.message,
          fault.status === 429 ? "rate_limit_exceeded" : "error",
        );
      validate(call.body);
      const index = this.#answered++;
      const turn =
        typeof this.script === "function" ? await this.script(call.body, index) : this.script[index];
      if (!turn)
        throw new HttpFault(500, `The fake OpenAI script has no turn for call #${index}`, "server_error");
      if (turn.delayMs) await new Promise((r) => setTimeout(r, turn.delayMs));
      const answer = this.#answer(turn, index, call.body);
      if (call.body.stream)
        sendStream(res, answer, call.body.stream_options?.include_usage === true, this.quirks);
      else sendJson(res, 200, completion(answer));
    } catch (error) {
      const fault = error instanceof HttpFault ? error : new HttpFault(500, String(error), "server_error");
      call.status = fault.status;
      sendError(res, fault);
    }
  }

  #answer(turn: ScriptedTurn, index: number, body: ChatWireRequest): Answer {
    const q = this.quirks;
    const toolCalls = (turn.toolCalls ?? []).map((c, i) => ({
      ...(q.omitToolCallIds ? {} : { id: c.id ?? `call_${index}_${i}` }),
      type: "function",
      function: { name: c.name, arguments: q.objectArguments ? c.arguments : JSON.stringify(c.arguments) },
    }));
    const content = turn.content ?? null;
    const finish = q.finishReason ?? FINISH[turn.stopReason ?? (toolCalls.length ? "tool_use" : "end_turn")];
    const prompt = turn.usage?.inputTokens ?? Math.ceil(JSON.stringify(body.messages).length / 4);
    const completionTokens =
      turn.usage?.outputTokens ?? Math.ceil(JSON.stringify([content, toolCalls]).length / 4);
    return {
      model: body.model ?? "unknown",
      content,
      toolCalls,
      finish,
      usage: q.omitUsage
        ? undefined
        : {
            prompt_tokens: prompt,
            completion_tokens: completionTokens,
            total_tokens: prompt + completionTokens,
          },
      omitIndex: q.omitIndex === true,
    };
  }
}

interface Answer {
  model: string;
  content: string | null;
  toolCalls: { id?: string; type: string; function: { name: string; arguments: unknown } }[];
  finish: string;
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | undefined;
  omitIndex: boolean;
}

const CREATED = 1_700_000_000;

const FINISH: Record<StopReason, string> = {
  end_turn: "stop",
  tool_use: "tool_calls",
  max_tokens: "length",
  stop_sequence: "stop",
  content_filtered: "content_filter",
  other: "other",
};

function completion(a: Answer): Record<string, unknown> {
  return {
    id: "chatcmpl-fake",
    object: "chat.completion",
    created: CREATED,
    model: a.model,
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: a.content,
          ...(a.toolCalls.length ? { tool_calls: a.toolCalls } : {}),
        },
        finish_reason: a.finish,
      },
    ],
    ...(a.usage ? { usage: a.usage } : {}),
  };
}

function sendStream(res: ServerResponse, a: Answer, includeUsage: boolean, q: OpenAiQuirks): void {
  res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" });
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
    `data: ${JSON.stringify({
      id: "chatcmpl-fake",
      object: "chat.completion.chunk",
      created: CREATED,
      model: a.model,
      choices: [{ index: 0, delta, finish_reason: finish }],
    })}\n\n`;
  res.write(chunk({ role: "assistant", content: "" }));
  const text = a.content ?? "";
  const size = Math.max(1, Math.ceil(text.length / 3));
  for (let i = 0; i < text.length; i += size) res.write(chunk({ content: text.slice(i, i + size) }));
  a.toolCalls.forEach((c, index) => {
    const at = a.omitIndex ? {} : { index };
    const args = c.function.arguments;
    if (typeof args !== "string" || q.omitIndex) {
      // Whole call in one fragment (what servers with these quirks do).
      res.write(chunk({ tool_calls: [{ ...at, ...c }] }));
      return;
    }
    res.write(chunk({ tool_calls: [{ ...at, ...c, function: { name: c.function.name, arguments: "" } }] }));
    const step = Math.max(1, Math.ceil(args.length / 3));
    for (let i = 0; i < args.length; i += step) {
      res.write(chunk({ tool_calls: [{ ...at, function: { arguments: args.slice(i, i + step) } }] }));
    }
  });
  res.write(chunk({}, a.finish));
  if (includeUsage && a.usage) {
    res.write(
      `data: ${JSON.stringify({ id: "chatcmpl-fake", object: "chat.completion.chunk", created: CREATED, model: a.model, choices: [], usage: a.usage })}\n\n`,
    );
  }
  res.end("data: [DONE]\n\n");
}

function validate(body: ChatWireRequest): void {
  const invalid = (message: string) => new HttpFault(400, message);
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0)
    throw invalid("'messages' must contain at least one message.");
  const names = (body.tools ?? []).map((t) => t.function?.name);
  const choice = body.tool_choice;
  if (choice !== undefined && names.length === 0)
    throw invalid("'tool_choice' is only allowed when 'tools' are specified.");
  if (typeof choice === "object" && !names.includes(choice.function?.name)) {
    throw invalid(
      `Invalid value for 'tool_choice': no function named '${choice.function?.name}' was specified in the 'tools' parameter.`,
    );
  }
  let open = new Set<string>();
  messages.forEach((m, i) => {
    if (m.role === "tool") {
      if (!open.has(m.tool_call_id ?? "")) {
        throw invalid(
          `Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls' (messages[${i}]).`,
        );
      }
      return;
    }
    open = new Set();
    (m.tool_calls ?? []).forEach((c, j) => {
      if (typeof c.function?.arguments !== "string") {
        throw invalid(
          `Invalid type for 'messages[${i}].tool_calls[${j}].function.arguments': expected a string.`,
        );
      }
      open.add(c.id ?? "");
    });
  });
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

function sendError(res: ServerResponse, fault: HttpFault): void {
  sendJson(res, fault.status, {
    error: { message: fault.message, type: fault.type, param: null, code: null },
  });
}
