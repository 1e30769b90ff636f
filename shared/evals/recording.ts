import { hash } from "node:crypto";
import * as z from "zod";
import { ArborError, ValidationError } from "../kernel/errors.ts";
import type { Llm, LlmRequest, LlmResponse, LlmStreamEvent } from "../ports/llm.ts";
import type { ToolContext, ToolPort, ToolResult } from "../ports/tools.ts";

/**
 * Record and replay: an experiment run with `--record` keeps every model response and every tool
 * result of its runs in a recording (a JSON file, to keep beside the dataset); run with `--replay`,
 * the model and the tools answer from it instead (no model call, no tool effect), so a change to
 * the engine, the prompts or the team is tested for free and the same every time.
 *
 *   const book = new RecordingBook(llm.id);
 *   engine with { llm: new RecordingLlm(llm, book), wrapTools: (t) => new RecordingTools(t, book) }
 *   await writeFile(file, JSON.stringify(book.recording));
 *
 *   const replay = new Replay(JSON.parse(text));     // parseRecording checks it
 *   engine with { llm: replay.llm, wrapTools: (t) => replay.tools(t) }
 *   replay.divergences                                 // what was asked that the recording has not
 *
 * A call is found by what it asks: a model call by its system prompt, messages and tools (less the
 * related results a leaf is shown), a tool call by its name and arguments, with the URNs, ids and
 * times that differ from run to run written alike (`<urn>`, `<id>`, `<time>`). The same question asked twice gets its answers in the order they were
 * recorded. A question the recording has not (a new model call, another tool call) is a
 * divergence: kept with where it happened (the planner, an evaluation, a task's turn; a tool and
 * its task), and the run fails there, saying so, never with an invented answer.
 */
export interface Recording {
  version: 1;
  /** The model the recording was made with. */
  model: string;
  recordedAt: string;
  /** A model call's key -> its responses, in the order they were given. */
  model_calls: Record<string, { where: string; asked?: string; responses: LlmResponse[] }>;
  /** A tool call's key -> its results, in order. */
  tool_calls: Record<string, { tool: string; results: ToolResult[] }>;
}

export interface Divergence {
  kind: "model call" | "tool call";
  /** Where it happened: the planner, an evaluation, a task's turn, or a tool in a task. */
  where: string;
  /** What was asked, in short. */
  detail: string;
}

/** A recorded model response: what the Llm port returns (LlmResponse). */
const ResponseSchema = z.object({
  content: z.string().optional(),
  toolCalls: z.array(
    z.object({ id: z.string(), name: z.string(), arguments: z.record(z.string(), z.unknown()) }),
  ),
  stopReason: z.enum(["end_turn", "tool_use", "max_tokens", "stop_sequence", "content_filtered", "other"]),
  usage: z.object({
    inputTokens: z.number(),
    outputTokens: z.number(),
    cacheReadTokens: z.number().optional(),
    cacheWriteTokens: z.number().optional(),
  }),
  model: z.string(),
});
/** A recorded tool result (ToolResult; a call handed to a remote agent is never recorded). */
const ResultSchema = z.object({ content: z.string(), isError: z.boolean().optional() });

const RecordingSchema = z.object({
  version: z.literal(1),
  model: z.string(),
  recordedAt: z.string(),
  model_calls: z.record(
    z.string(),
    z.object({ where: z.string(), asked: z.string().optional(), responses: z.array(ResponseSchema).min(1) }),
  ),
  tool_calls: z.record(z.string(), z.object({ tool: z.string(), results: z.array(ResultSchema).min(1) })),
});

export function parseRecording(text: string, name: string): Recording {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new ValidationError(`${name} is not a recording (not JSON: ${(e as Error).message})`);
  }
  const parsed = RecordingSchema.safeParse(raw);
  if (!parsed.success)
    throw new ValidationError(`${name} is not a recording of arbor eval run --record`, [
      parsed.error.issues[0]?.message ?? "",
    ]);
  return parsed.data as Recording; // checked above: only absent optional fields read as undefined
}

/** Text with what changes from run to run (URNs, ULIDs, times) written alike. */
const steady = (text: string) =>
  text
    .replace(/cld:[A-Za-z0-9._:/%-]+/g, "<urn>")
    .replace(/\b[0-9A-HJKMNP-TV-Z]{26}\b/g, "<id>")
    .replace(/\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z\b/g, "<time>");

/**
 * A model call's key. A leaf's prompt ends with the related results the vector index found
 * (engine/turn/direct.ts): they depend on what the data folder holds and on which runs finished
 * first, not on the case, so they are not part of the key.
 */
export const modelKey = (r: LlmRequest): string => {
  const messages = r.messages.map((m) =>
    m.role === "user" ? { ...m, content: m.content.replace(/\n# Related results\n[\s\S]*$/, "") } : m,
  );
  return hash(
    "sha256",
    steady(JSON.stringify({ system: r.system ?? "", messages, tools: (r.tools ?? []).map((t) => t.name) })),
  );
};

export const toolKey = (name: string, args: Record<string, unknown>): string =>
  hash("sha256", steady(JSON.stringify({ name, args })));

/** Where a model call was made, from what it asks: the planner, an evaluation, or a task's turn. */
export function whereOf(r: LlmRequest): string {
  const tools = (r.tools ?? []).map((t) => t.name);
  if (tools.includes("create_plan")) return "the planner";
  if (tools.includes("report_evaluation")) return "an evaluation";
  if (tools.includes("report_score")) return "the judge";
  const first = r.messages.find((m) => m.role === "user")?.content ?? "";
  const task = /^# Task: (.+)$/m.exec(first)?.[1];
  const turn = r.messages.filter((m) => m.role === "assistant").length + 1;
  return task ? `task "${task.slice(0, 120)}", turn ${turn}` : `a model call, turn ${turn}`;
}

/** What `--record` fills. */
export class RecordingBook {
  readonly recording: Recording;

  constructor(model: string) {
    this.recording = {
      version: 1,
      model,
      recordedAt: new Date().toISOString(),
      model_calls: {},
      tool_calls: {},
    };
  }

  model(request: LlmRequest, response: LlmResponse): void {
    const key = modelKey(request);
    const kept = this.recording.model_calls[key] ?? {
      where: whereOf(request),
      asked: steady(JSON.stringify(request.messages)).slice(0, 20_000),
      responses: [],
    };
    kept.responses.push(response);
    this.recording.model_calls[key] = kept;
  }

  tool(name: string, args: Record<string, unknown>, result: ToolResult): void {
    const key = toolKey(name, args);
    const kept = this.recording.tool_calls[key] ?? { tool: name, results: [] };
    kept.results.push(result);
    this.recording.tool_calls[key] = kept;
  }
}

/** The model, with every response it gives kept in the book. */
export class RecordingLlm implements Llm {
  readonly id: string;
  readonly #inner: Llm;
  readonly #book: RecordingBook;

  constructor(inner: Llm, book: RecordingBook) {
    this.#inner = inner;
    this.#book = book;
    this.id = inner.id;
  }

  async complete(request: LlmRequest): Promise<LlmResponse> {
    const response = await this.#inner.complete(request);
    this.#book.model(request, structuredClone(response));
    return response;
  }

  async *stream(request: LlmRequest): AsyncIterable<LlmStreamEvent> {
    const response = await this.complete(request);
    yield { type: "done", response };
  }
}

/** A ToolPort whose every finished result (and, under `replay`, every answer) goes through `run`. */
class WrappedTools implements ToolPort {
  readonly #inner: ToolPort;
  readonly #run: (name: string, args: Record<string, unknown>, context: ToolContext) => Promise<ToolResult>;
  settle?: NonNullable<ToolPort["settle"]>;
  listTools?: NonNullable<ToolPort["listTools"]>;
  register?: NonNullable<ToolPort["register"]>;
  close?: NonNullable<ToolPort["close"]>;

  constructor(inner: ToolPort, run: WrappedTools["execute"]) {
    this.#inner = inner;
    this.#run = run;
    if (inner.settle) this.settle = inner.settle.bind(inner);
    if (inner.listTools) this.listTools = inner.listTools.bind(inner);
    if (inner.register) this.register = inner.register.bind(inner);
    if (inner.close) this.close = inner.close.bind(inner);
  }

  list() {
    return this.#inner.list();
  }
  describe(names: readonly string[]) {
    return this.#inner.describe(names);
  }
  check(name: string, args: Record<string, unknown>) {
    return this.#inner.check(name, args);
  }
  history(taskId: string, callId: string) {
    return this.#inner.history(taskId, callId);
  }
  execute(name: string, args: Record<string, unknown>, context: ToolContext): Promise<ToolResult> {
    return this.#run(name, args, context);
  }
}

/** The tools, with every result they give kept in the book (a call handed to a remote agent is not). */
export const recordingTools = (inner: ToolPort, book: RecordingBook): ToolPort =>
  new WrappedTools(inner, async (name, args, context) => {
    const result = await inner.execute(name, args, context);
    if (!result.pending) book.tool(name, args, structuredClone(result));
    return result;
  });

/** The model and the tools answering from a recording; what it has not is a divergence. */
export class Replay {
  readonly divergences: Divergence[] = [];
  /** How many model calls were answered from the recording. */
  modelAnswers = 0;
  readonly llm: Llm;
  readonly #recording: Recording;
  readonly #used = new Map<string, number>();

  constructor(recording: Recording) {
    this.#recording = recording;
    const self = this;
    this.llm = {
      id: `replay:${recording.model}`,
      complete: (request) => self.#answer(request),
      async *stream(request) {
        yield { type: "done", response: await self.#answer(request) };
      },
    };
  }

  tools(inner: ToolPort): ToolPort {
    return new WrappedTools(inner, async (name, args, context) => {
      const key = toolKey(name, args);
      const kept = this.#recording.tool_calls[key];
      if (!kept) {
        this.divergences.push({
          kind: "tool call",
          where: `${name} in task ${context.taskId.slice(context.taskId.lastIndexOf("/") + 1)}`,
          detail: `${name}(${JSON.stringify(args).slice(0, 200)})`,
        });
        return {
          content: `The replay diverged: the recording has no call of ${name} with these arguments`,
          isError: true,
        };
      }
      return structuredClone(this.#next(`t:${key}`, kept.results));
    });
  }

  async #answer(request: LlmRequest): Promise<LlmResponse> {
    const key = modelKey(request);
    const kept = this.#recording.model_calls[key];
    if (!kept) {
      const where = whereOf(request);
      const last = request.messages.at(-1);
      const said = last && "content" in last && typeof last.content === "string" ? last.content : "";
      this.divergences.push({ kind: "model call", where, detail: said.slice(0, 200) });
      // CONFIG: the engine fails the task at once (no retry can mend it), saying why.
      throw new ArborError("CONFIG", `The replay diverged at ${where}: the recording has no such model call`);
    }
    this.modelAnswers++;
    return structuredClone(this.#next(`m:${key}`, kept.responses));
  }

  /** The next of a call's recorded answers (the last one again, once they run out). */
  #next<T>(key: string, answers: T[]): T {
    const i = this.#used.get(key) ?? 0;
    this.#used.set(key, i + 1);
    return answers[Math.min(i, answers.length - 1)] as T;
  }
}
