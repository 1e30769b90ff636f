/**
 * A fake Amazon Bedrock Runtime for tests: our own server that the real `BedrockRuntimeClient` talks
 * to, over cleartext HTTP/2 (what the SDK's NodeHttp2Handler, this client's default handler, speaks
 * to an `http://` endpoint) or HTTP/1.1 (a client given `requestHandler: new NodeHttpHandler()`).
 *
 * Routes (restJson1, as the SDK sends them):
 * - `POST /model/{modelId}/converse`: JSON in, JSON out (`output.message.content[]` with `text` and
 *   `toolUse` blocks, `stopReason`, `usage`, `metrics`);
 * - `POST /model/{modelId}/converse-stream`: JSON in, `application/vnd.amazon.eventstream` out: binary
 *   frames (EventStreamCodec) with headers `:message-type` event, `:event-type` (messageStart,
 *   contentBlockStart, contentBlockDelta, contentBlockStop, messageStop, metadata) and `:content-type`
 *   application/json, whose JSON payload is the event's structure. Like Bedrock, text blocks get no
 *   contentBlockStart, tool input arrives as JSON text in pieces, and payloads carry a `p` padding field.
 *
 * It checks what Bedrock checks before a model runs (a conversation starts with a user message and
 * alternates, no blank text, toolUse/toolResult need toolConfig, tool results answer the previous
 * turn's toolUse blocks, toolChoice needs tools) and answers ValidationException otherwise.
 * Errors are what the SDK reads for restJson1: the status, header `x-amzn-errortype` and `{ message }`.
 *
 * Test hooks: `script` (a function of the parsed Converse request, or turns in order), `calls` (every
 * request: protocol, operation, model, headers, parsed body, status), `failNext(n, fault)`, and
 * `breakNextStream(afterEvents, exceptionType)`: an exception frame (`:message-type` exception,
 * `:exception-type` e.g. throttlingException or modelStreamErrorException) after that many events.
 */
import { randomUUID } from "node:crypto";
import {
  createServer as createHttp1Server,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from "node:http";
import {
  createServer as createHttp2Server,
  type Http2ServerRequest,
  Http2ServerResponse,
  type Http2Session,
} from "node:http2";
import type { AddressInfo } from "node:net";
import { EventStreamCodec } from "@smithy/eventstream-codec";
import { fromUtf8, toUtf8 } from "@smithy/util-utf8";
import type { ScriptedTurn } from "../../shared/adapters/llm/scripted-llm.ts";

/** The Converse request body as the SDK sends it (the parts the fake reads). */
export interface ConverseWireRequest {
  messages?: { role?: string; content?: WireBlock[] }[];
  system?: { text?: string }[];
  inferenceConfig?: { maxTokens?: number; temperature?: number };
  toolConfig?: {
    tools?: { toolSpec?: { name?: string; description?: string; inputSchema?: { json?: unknown } } }[];
    toolChoice?: { auto?: object; any?: object; tool?: { name?: string } };
  };
}
export interface WireBlock {
  text?: string;
  toolUse?: { toolUseId?: string; name?: string; input?: unknown };
  toolResult?: { toolUseId?: string; content?: { text?: string; json?: unknown }[]; status?: string };
}

export type BedrockScript =
  | readonly ScriptedTurn[]
  | ((
      request: ConverseWireRequest,
      callIndex: number,
      modelId: string,
    ) => ScriptedTurn | Promise<ScriptedTurn>);

/** Injectable errors: [HTTP status, x-amzn-errortype, default message], as Bedrock answers them. */
const FAULTS = {
  throttling: [429, "ThrottlingException", "Too many requests, please wait before trying again."],
  validation: [400, "ValidationException", "The provided request is not valid"],
  accessDenied: [
    403,
    "AccessDeniedException",
    "You don't have access to the model with the specified model ID.",
  ],
  resourceNotFound: [404, "ResourceNotFoundException", "Model not found"],
  serviceUnavailable: [503, "ServiceUnavailableException", "Service Unavailable"],
  modelNotReady: [429, "ModelNotReadyException", "Model is not ready for inference"],
  internal: [500, "InternalServerException", "Internal server error"],
} as const satisfies Record<string, readonly [number, string, string]>;

export type BedrockFault = keyof typeof FAULTS;

export interface FakeBedrockCall {
  protocol: "h2" | "http1";
  operation: "converse" | "converse-stream" | "unknown";
  modelId: string;
  headers: Record<string, string>;
  body: ConverseWireRequest;
  status: number;
  errorType?: string;
}

class Fault extends Error {
  readonly status: number;
  readonly type: string;

  constructor(status: number, type: string, message: string) {
    super(message);
    this.status = status;
    this.type = type;
  }
}

type Request = IncomingMessage | Http2ServerRequest;
type Response = ServerResponse | Http2ServerResponse;

/** The status and headers, on either protocol (their writeHead overloads differ, so narrowed first). */
function writeHead(res: Response, status: number, headers: OutgoingHttpHeaders): void {
  if (res instanceof Http2ServerResponse) res.writeHead(status, headers);
  else res.writeHead(status, headers);
}

const codec = new EventStreamCodec(toUtf8, fromUtf8);

export class FakeBedrock {
  script: BedrockScript;
  readonly calls: FakeBedrockCall[] = [];
  readonly #faults: { fault: BedrockFault; message: string | undefined }[] = [];
  #streamBreak: { afterEvents: number; type: string } | undefined;
  readonly #sessions = new Set<Http2Session>();
  #close: (() => Promise<void>) | undefined;
  #endpoint: string | undefined;
  #answered = 0;

  constructor(script: BedrockScript = []) {
    this.script = script;
  }

  /** Listens on 127.0.0.1, on a free port, speaking cleartext HTTP/2 or HTTP/1.1. */
  async start(options: { protocol: "h2" | "http1" } = { protocol: "h2" }): Promise<{ endpoint: string }> {
    if (this.#endpoint) return { endpoint: this.#endpoint };
    const handler = (req: Request, res: Response) => {
      this.#handle(req, res).catch((error: unknown) => {
        if (!res.headersSent) sendError(res, new Fault(500, "InternalServerException", String(error)));
        else res.end();
      });
    };
    const server = options.protocol === "h2" ? createHttp2Server(handler) : createHttp1Server(handler);
    if (options.protocol === "h2") {
      server.on("session", (session: Http2Session) => {
        this.#sessions.add(session);
        session.once("close", () => this.#sessions.delete(session));
      });
    }
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    const { port } = server.address() as AddressInfo;
    this.#endpoint = `http://127.0.0.1:${port}`;
    this.#close = () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of this.#sessions) s.destroy();
        if ("closeAllConnections" in server) server.closeAllConnections();
      });
    return { endpoint: this.#endpoint };
  }

  async stop(): Promise<void> {
    const close = this.#close;
    this.#close = undefined;
    this.#endpoint = undefined;
    await close?.();
  }

  get endpoint(): string {
    if (!this.#endpoint) throw new Error("The fake Bedrock server is not started");
    return this.#endpoint;
  }

  /** The next `count` Converse / ConverseStream requests fail with this error. */
  failNext(count: number, fault: BedrockFault, message?: string): void {
    for (let i = 0; i < count; i++) this.#faults.push({ fault, message });
  }

  /** The next ConverseStream sends `afterEvents` events, then an exception frame of this type. */
  breakNextStream(afterEvents: number, type = "throttlingException"): void {
    this.#streamBreak = { afterEvents, type };
  }

  /** Forgets calls, injected faults and the position in an array script. */
  reset(script: BedrockScript = this.script): void {
    this.script = script;
    this.calls.length = 0;
    this.#faults.length = 0;
    this.#streamBreak = undefined;
    this.#answered = 0;
  }

  async #handle(req: Request, res: Response): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const match = /^\/model\/([^/]+)\/(converse|converse-stream)$/.exec((req.url ?? "").split("?")[0] ?? "");
    const call: FakeBedrockCall = {
      protocol: req.httpVersion.startsWith("2") ? "h2" : "http1",
      operation: match ? (match[2] as "converse" | "converse-stream") : "unknown",
      modelId: match?.[1] ? decodeURIComponent(match[1]) : "",
      headers: Object.fromEntries(
        Object.entries(req.headers)
          .filter(([k]) => !k.startsWith(":"))
          .map(([k, v]) => [k, String(v)]),
      ),
      body: {},
      status: 200,
    };
    this.calls.push(call);
    try {
      if (req.method !== "POST" || !match)
        throw new Fault(404, "UnknownOperationException", `${req.method} ${req.url}`);
      try {
        call.body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}") as ConverseWireRequest;
      } catch {
        throw new Fault(400, "SerializationException", "The request body is not valid JSON");
      }
      const injected = this.#faults.shift();
      if (injected) {
        const [status, type, message] = FAULTS[injected.fault];
        throw new Fault(status, type, injected.message ?? message);
      }
      validate(call.body);
      const callIndex = this.#answered++;
      const turn = await this.#turn(call.body, callIndex, call.modelId);
      if (turn.delayMs) await new Promise((r) => setTimeout(r, turn.delayMs));
      const answer = toAnswer(turn, callIndex, call.body);
      if (call.operation === "converse") sendJson(res, 200, converseOutput(answer));
      else {
        sendStream(res, streamEvents(answer), this.#streamBreak);
        this.#streamBreak = undefined;
      }
    } catch (error) {
      const fault = error instanceof Fault ? error : new Fault(500, "InternalServerException", String(error));
      call.status = fault.status;
      call.errorType = fault.type;
      sendError(res, fault);
    }
  }

  async #turn(body: ConverseWireRequest, callIndex: number, modelId: string): Promise<ScriptedTurn> {
    if (typeof this.script === "function") return this.script(body, callIndex, modelId);
    const turn = this.script[callIndex];
    if (!turn) throw new Error(`The fake Bedrock script has no turn for call #${callIndex}`);
    return turn;
  }
}

interface Answer {
  text: string;
  toolUses: { toolUseId: string; name: string; input: Record<string, unknown> }[];
  stopReason: string;
  usage: { inputTokens: number; outputTokens: number; totalTokens: number };
}

function toAnswer(turn: ScriptedTurn, callIndex: number, body: ConverseWireRequest): Answer {
  const toolUses = (turn.toolCalls ?? []).map((c, i) => ({
    toolUseId: c.id ?? `tooluse_${callIndex}_${i}`,
    name: c.name,
    input: c.arguments,
  }));
  const text = turn.content ?? "";
  const inputTokens = turn.usage?.inputTokens ?? Math.ceil(JSON.stringify(body).length / 4);
  const outputTokens = turn.usage?.outputTokens ?? Math.ceil((text + JSON.stringify(toolUses)).length / 4);
  return {
    text,
    toolUses,
    stopReason: turn.stopReason ?? (toolUses.length > 0 ? "tool_use" : "end_turn"),
    usage: { inputTokens, outputTokens, totalTokens: inputTokens + outputTokens },
  };
}

function converseOutput(a: Answer): Record<string, unknown> {
  const content: WireBlock[] = a.text ? [{ text: a.text }] : [];
  for (const toolUse of a.toolUses) content.push({ toolUse });
  return {
    output: { message: { role: "assistant", content } },
    stopReason: a.stopReason,
    usage: a.usage,
    metrics: { latencyMs: 7 },
  };
}

/** The ConverseStream events for an answer: [event type, payload]. */
function streamEvents(a: Answer): [string, Record<string, unknown>][] {
  const events: [string, Record<string, unknown>][] = [["messageStart", { role: "assistant" }]];
  let index = 0;
  if (a.text) {
    for (const piece of pieces(a.text, 3)) {
      events.push(["contentBlockDelta", { contentBlockIndex: index, delta: { text: piece } }]);
    }
    events.push(["contentBlockStop", { contentBlockIndex: index }]);
    index++;
  }
  for (const t of a.toolUses) {
    events.push([
      "contentBlockStart",
      { contentBlockIndex: index, start: { toolUse: { toolUseId: t.toolUseId, name: t.name } } },
    ]);
    for (const piece of pieces(JSON.stringify(t.input), 3)) {
      events.push(["contentBlockDelta", { contentBlockIndex: index, delta: { toolUse: { input: piece } } }]);
    }
    events.push(["contentBlockStop", { contentBlockIndex: index }]);
    index++;
  }
  events.push(["messageStop", { stopReason: a.stopReason }]);
  events.push(["metadata", { usage: a.usage, metrics: { latencyMs: 7 } }]);
  return events;
}

/** Splits a string into up to n pieces of about equal length. */
function pieces(s: string, n: number): string[] {
  const size = Math.max(1, Math.ceil(s.length / n));
  const out: string[] = [];
  for (let i = 0; i < s.length; i += size) out.push(s.slice(i, i + size));
  return out;
}

function validate(body: ConverseWireRequest): void {
  const invalid = (message: string) => new Fault(400, "ValidationException", message);
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0)
    throw invalid("A conversation must have at least one message.");
  const tools = body.toolConfig?.tools ?? [];
  if (body.toolConfig && tools.length === 0)
    throw invalid("The toolConfig field must include at least one tool.");
  const choice = body.toolConfig?.toolChoice?.tool?.name;
  if (choice !== undefined && !tools.some((t) => t.toolSpec?.name === choice)) {
    throw invalid(`The tool ${choice} in toolChoice is not defined in toolConfig.tools.`);
  }
  let previousToolUses = new Set<string>();
  messages.forEach((m, i) => {
    if (i === 0 && m.role !== "user")
      throw invalid(
        "A conversation must start with a user message. Try again with a conversation that starts with a user message.",
      );
    if (i > 0 && m.role === messages[i - 1]?.role) {
      throw invalid(
        "A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again.",
      );
    }
    const content = m.content ?? [];
    if (content.length === 0)
      throw invalid(
        `The content field in the Message object at messages.${i} is empty. Add a ContentBlock object to the content field and try again.`,
      );
    const toolUses = new Set<string>();
    content.forEach((b, j) => {
      if (b.text !== undefined && b.text.trim() === "") {
        throw invalid(
          `The text field in the ContentBlock object at messages.${i}.content.${j} is blank. Add text to the text field, and try again.`,
        );
      }
      if ((b.toolUse || b.toolResult) && !body.toolConfig) {
        throw invalid(
          "The toolConfig field must be defined when using toolUse and toolResult content blocks.",
        );
      }
      if (b.toolUse) {
        if (m.role !== "assistant")
          throw invalid(`messages.${i}.content.${j}: toolUse blocks belong to assistant messages.`);
        toolUses.add(b.toolUse.toolUseId ?? "");
      }
      if (b.toolResult) {
        const { toolUseId = "", status } = b.toolResult;
        if (m.role !== "user")
          throw invalid(`messages.${i}.content.${j}: toolResult blocks belong to user messages.`);
        if (!previousToolUses.has(toolUseId)) {
          throw invalid(
            `messages.${i}.content.${j}: the toolResult ${toolUseId} does not match a toolUse block of the previous turn.`,
          );
        }
        if (status !== undefined && status !== "success" && status !== "error") {
          throw invalid(`messages.${i}.content.${j}.toolResult.status must be success or error.`);
        }
      }
    });
    previousToolUses = toolUses;
  });
}

function sendJson(res: Response, status: number, body: unknown, errorType?: string): void {
  const text = JSON.stringify(body);
  writeHead(res, status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    "x-amzn-requestid": randomUUID(),
    ...(errorType === undefined
      ? {}
      : { "x-amzn-errortype": `${errorType}:http://internal.amazon.com/coral/com.amazon.bedrock/` }),
  });
  res.end(text);
}

function sendError(res: Response, fault: Fault): void {
  sendJson(res, fault.status, { message: fault.message }, fault.type);
}

function sendStream(
  res: Response,
  events: [string, Record<string, unknown>][],
  streamBreak: { afterEvents: number; type: string } | undefined,
): void {
  writeHead(res, 200, {
    "content-type": "application/vnd.amazon.eventstream",
    "x-amzn-requestid": randomUUID(),
  });
  const frame = (kind: "event" | "exception", type: string, payload: Record<string, unknown>) =>
    codec.encode({
      headers: {
        [kind === "event" ? ":event-type" : ":exception-type"]: { type: "string", value: type },
        ":content-type": { type: "string", value: "application/json" },
        ":message-type": { type: "string", value: kind },
      },
      body: fromUtf8(
        JSON.stringify({ ...payload, p: "abcdefghijklmnopqrstuvwxyz".slice(0, 4 + type.length) }),
      ),
    });
  for (const [i, [type, payload]] of events.entries()) {
    if (streamBreak && i === streamBreak.afterEvents) {
      res.end(frame("exception", streamBreak.type, { message: `Injected ${streamBreak.type}` }));
      return;
    }
    (res as ServerResponse).write(frame("event", type, payload));
  }
  res.end();
}
