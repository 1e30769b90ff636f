import { ArborError } from "../../kernel/errors.ts";
import type {
  Llm,
  LlmRequest,
  LlmResponse,
  LlmStreamEvent,
  LlmToolCall,
  LlmUsage,
  StopReason,
} from "../../ports/llm.ts";
import { checkRequest, impliedStopReason, roughTokens, sleepFor } from "./llm-common.ts";

/**
 * A scripted model for tests and offline demos: every call answers with the next turn of a script
 * (an array consumed in order) or with what a function returns for the request. It records every
 * request it received (`calls`), so tests can assert on prompts, and it streams like a real model:
 * the text in a few chunks, then the tool calls, then "done".
 *
 * The fake provider servers in test/peers are driven by the same {@link ScriptedTurn}s.
 */

/** A tool call as a script writes it; without `id` the model makes one up. */
export interface ScriptedToolCall {
  name: string;
  arguments: Record<string, unknown>;
  id?: string;
}

/** One answer of a scripted model. */
export interface ScriptedTurn {
  content?: string;
  toolCalls?: ScriptedToolCall[];
  /** Default: a rough count (characters / 4) of the prompt and of the answer. */
  usage?: LlmUsage;
  /** Default: "tool_use" when the turn calls tools, else "end_turn". */
  stopReason?: StopReason;
  /** Wait this long before answering (after the model-wide latency). */
  delayMs?: number;
}

export type ScriptFunction = (request: LlmRequest, callIndex: number) => ScriptedTurn | Promise<ScriptedTurn>;

export type Script = readonly ScriptedTurn[] | ScriptFunction;

export interface ScriptedLlmOptions {
  /** Wait this long before every answer (default 0). */
  latencyMs?: number;
  /** The model named in responses when the request names none (default "scripted"). */
  model?: string;
  /** Injectable for tests; receives the request's signal. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /**
   * Deep-copy each request into `calls` as it arrives (default true), so a test sees what was sent
   * even if the caller changes its objects afterwards. The bench turns it off: it reads only tool
   * names, and copying every prompt is the test double's cost, not the engine's.
   */
  copyRequests?: boolean;
  /**
   * How many of the latest requests `calls` keeps (default: every one). A long-running process
   * (`arbor serve --example`) keeps none: every prompt kept is memory never given back.
   */
  keepCalls?: number;
}

/** A scripted tool call, for scripts: `{ toolCalls: [toolCall("search", { q: "x" })] }`. */
export function toolCall(name: string, args: Record<string, unknown> = {}, id?: string): ScriptedToolCall {
  return id === undefined ? { name, arguments: args } : { name, arguments: args, id };
}

/** What a request looks like to the script, as recorded in `calls` (without its AbortSignal). */
export type RecordedRequest = Omit<LlmRequest, "signal">;

export class ScriptedLlm implements Llm {
  readonly id = "scripted";
  /**
   * Every request received (or the latest `keepCalls`), in order, deep-copied when it arrived
   * (unless `copyRequests` is false).
   */
  readonly calls: RecordedRequest[] = [];
  readonly #script: Script;
  readonly #latencyMs: number;
  readonly #model: string;
  readonly #sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  readonly #copyRequests: boolean;
  readonly #keepCalls: number;
  /** Requests received, kept or not. */
  #received = 0;
  #toolCallCounter = 0;

  constructor(script: Script, options: ScriptedLlmOptions = {}) {
    this.#script = typeof script === "function" ? script : [...script];
    this.#latencyMs = options.latencyMs ?? 0;
    this.#model = options.model ?? "scripted";
    this.#sleep = options.sleep ?? sleepFor;
    this.#copyRequests = options.copyRequests ?? true;
    this.#keepCalls = options.keepCalls ?? Number.POSITIVE_INFINITY;
  }

  /** Turns of an array script that no call has used yet (0 for a function script). */
  get remaining(): number {
    return typeof this.#script === "function" ? 0 : Math.max(0, this.#script.length - this.#received);
  }

  async complete(request: LlmRequest): Promise<LlmResponse> {
    return this.#answer(request);
  }

  async *stream(request: LlmRequest): AsyncIterable<LlmStreamEvent> {
    const response = await this.#answer(request);
    for (const delta of chunks(response.content ?? "")) yield { type: "text", delta };
    for (const call of response.toolCalls) yield { type: "tool_call", call };
    yield { type: "done", response };
  }

  async #answer(request: LlmRequest): Promise<LlmResponse> {
    checkRequest(request);
    request.signal?.throwIfAborted();
    const { signal, ...rest } = request;
    const recorded: RecordedRequest = this.#copyRequests ? structuredClone(rest) : rest;
    const callIndex = this.#received++;
    if (this.#keepCalls > 0) {
      this.calls.push(recorded);
      if (this.calls.length > this.#keepCalls) this.calls.shift();
    }
    const turn = await this.#turn(recorded, callIndex);
    const wait = this.#latencyMs + (turn.delayMs ?? 0);
    if (wait > 0) await this.#sleep(wait, signal);
    signal?.throwIfAborted();

    const toolCalls: LlmToolCall[] = (turn.toolCalls ?? []).map((c) => ({
      id: c.id ?? `call_${++this.#toolCallCounter}`,
      name: c.name,
      // A copy, so a caller that changes it cannot change the script: arguments are JSON, and a JSON
      // round trip copies them several times faster than structuredClone.
      arguments: JSON.parse(JSON.stringify(c.arguments)) as Record<string, unknown>,
    }));
    const content = turn.content;
    return {
      ...(content === undefined ? {} : { content }),
      toolCalls,
      stopReason: turn.stopReason ?? impliedStopReason(toolCalls),
      usage: turn.usage ?? {
        inputTokens: roughTokens(promptText(recorded)),
        outputTokens: roughTokens((content ?? "") + toolCalls.map((c) => JSON.stringify(c)).join("")),
      },
      model: request.model ?? this.#model,
    };
  }

  async #turn(request: RecordedRequest, callIndex: number): Promise<ScriptedTurn> {
    if (typeof this.#script === "function") return this.#script(request, callIndex);
    const turn = this.#script[callIndex];
    if (turn === undefined) {
      const lastUser = [...request.messages].reverse().find((m) => m.role === "user");
      throw new ArborError(
        "INTERNAL",
        `ScriptedLlm: the script has ${this.#script.length} turn(s) and ran out at call #${callIndex} ` +
          `(0-based); the last user message was ${lastUser ? JSON.stringify(lastUser.content) : "(none)"}. ` +
          "Add a turn to the script for this call.",
        { details: { callIndex, scriptLength: this.#script.length } },
      );
    }
    return turn;
  }
}

/** Splits text into up to three chunks at word boundaries (one chunk when it is short). */
function chunks(text: string): string[] {
  if (text.length === 0) return [];
  const words = text.split(/(?<=\s)/);
  if (words.length < 3) return [text];
  const size = Math.ceil(words.length / 3);
  const out: string[] = [];
  for (let i = 0; i < words.length; i += size) out.push(words.slice(i, i + size).join(""));
  return out;
}

function promptText(request: RecordedRequest): string {
  const parts: string[] = [request.system ?? ""];
  for (const m of request.messages) {
    parts.push(m.content ?? "");
    if (m.role === "assistant") parts.push(JSON.stringify(m.toolCalls ?? []));
  }
  parts.push(JSON.stringify(request.tools ?? []));
  return parts.join("\n");
}
