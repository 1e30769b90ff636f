import { createHash } from "node:crypto";
import {
  type Attributes,
  type AttributeValue,
  type Context,
  type Counter,
  context,
  type Histogram,
  type Link,
  metrics,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type TimeInput,
  TraceFlags,
  trace,
  type UpDownCounter,
} from "@opentelemetry/api";
import { TRACEPARENT } from "./trace-context.ts";

/**
 * Arbor's spans, through the OpenTelemetry API only: the SDK, its exporter and its sampler are the
 * composition root's (shared/runtime/telemetry.ts), which turns tracing on when an OTLP endpoint is
 * configured. Until then every function here returns at once: tracing off costs a boolean test.
 *
 * One request is one trace, however long it lasts and wherever its steps run. What makes that work
 * across Lambda functions, queues and days of waiting is that a task's span has an id derived from
 * its URN (taskSpanId): any step of any function, knowing only the task's view (its trace, carried
 * in its TaskCreated event), can make its own spans children of the task's span, and the task's
 * span itself is written once, when the task ends, with the time it was created as its start.
 *
 * Span and attribute names follow OpenTelemetry's GenAI semantic conventions: `invoke_agent` for a
 * task, `chat` for a model call, `execute_tool` for a tool call; Arbor's own attributes are `arbor.*`.
 */

let enabled = false;
let captureContent = false;

/** Set by the composition root when it has registered a tracer provider (never elsewhere). */
export function setTracing(on: boolean, options: { captureContent?: boolean } = {}): void {
  enabled = on;
  captureContent = on && options.captureContent === true;
}

/** Whether spans are being recorded in this process. */
export const tracingOn = (): boolean => enabled;

/**
 * Whether prompts, completions, tool arguments and results go into spans: only when the operator
 * turns it on (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true). Never a secret either way:
 * content is what the model saw, and the tools' secrets never reach the model.
 */
export const contentCaptured = (): boolean => captureContent;

const tracer = () => trace.getTracer("arbor");

// ---- span ids of the composition root's id generator ------------------------------------------

let pinned: string | undefined;

/** The span id the next span must take (a task's, derived from its URN); read once by the generator. */
export function takePinnedSpanId(): string | undefined {
  const id = pinned;
  pinned = undefined;
  return id;
}

/** A task's span id: the first 8 bytes of the SHA-256 of its URN (never all zero). */
export function taskSpanId(taskUrn: string): string {
  const id = createHash("sha256").update(taskUrn).digest("hex").slice(0, 16);
  return id === "0000000000000000" ? "0000000000000001" : id;
}

// ---- W3C trace context ----------------------------------------------------------------------------

export interface TraceRef {
  traceId: string;
  spanId: string;
  sampled: boolean;
}

export function parseTraceparent(value: unknown): TraceRef | undefined {
  if (typeof value !== "string") return undefined;
  const m = TRACEPARENT.exec(value);
  if (!m || /^0+$/.test(m[1] as string) || /^0+$/.test(m[2] as string)) return undefined;
  return {
    traceId: m[1] as string,
    spanId: m[2] as string,
    sampled: (Number.parseInt(m[3] as string, 16) & 1) === 1,
  };
}

export const formatTraceparent = (ref: TraceRef): string =>
  `00-${ref.traceId}-${ref.spanId}-${ref.sampled ? "01" : "00"}`;

/** The active span's context as a `traceparent`, or undefined (tracing off, or no span active). */
export function currentTraceparent(): string | undefined {
  if (!enabled) return undefined;
  const span = trace.getSpanContext(context.active());
  if (!span || !trace.isSpanContextValid(span)) return undefined;
  return formatTraceparent({
    traceId: span.traceId,
    spanId: span.spanId,
    sampled: (span.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED,
  });
}

/** A link to the active span (another trace's, say), or undefined. */
export function activeSpanLink(): Link | undefined {
  if (!enabled) return undefined;
  const span = trace.getSpanContext(context.active());
  return span && trace.isSpanContextValid(span) ? { context: span } : undefined;
}

/** A context whose parent span is `ref` (from another process, or derived), for spans to start in. */
export function contextOf(ref: TraceRef | undefined, base: Context = ROOT_CONTEXT): Context {
  if (!ref) return base;
  return trace.setSpanContext(base, {
    traceId: ref.traceId,
    spanId: ref.spanId,
    traceFlags: ref.sampled ? TraceFlags.SAMPLED : TraceFlags.NONE,
    isRemote: true,
  });
}

/** Runs `fn` with `traceparent` (a W3C header value) as the active parent; as is when tracing is off. */
export function withTraceparent<T>(traceparent: unknown, fn: () => T): T {
  if (!enabled) return fn();
  const ref = parseTraceparent(traceparent);
  return ref ? context.with(contextOf(ref), fn) : fn();
}

/** Adds `traceparent` (and `tracestate`) of the active context to outbound headers. */
export function injectTraceHeaders(headers: Headers | Record<string, string>): void {
  if (!enabled) return;
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  for (const [k, v] of Object.entries(carrier)) {
    if (headers instanceof Headers) headers.set(k, v);
    else headers[k] = v;
  }
}

/** The context an inbound request carries (its `traceparent` header), for the server span's parent. */
export function extractTraceHeaders(get: (name: string) => string | undefined): Context {
  return propagation.extract(
    ROOT_CONTEXT,
    { traceparent: get("traceparent"), tracestate: get("tracestate") },
    {
      get: (carrier, key) => carrier[key as keyof typeof carrier],
      keys: (carrier) => Object.keys(carrier),
    },
  );
}

// ---- tasks ------------------------------------------------------------------------------------------

/** What a task's spans are derived from: its URN, its parent task's, and the trace it was created in. */
export interface TaskTrace {
  taskId: string;
  parentTaskId?: string | undefined;
  /** The `traceparent` active when the task was created (TaskCreated's); absent: created untraced. */
  traceparent?: string | undefined;
}

/** The task's own span, as a parent for the spans of its steps; undefined when it was created untraced. */
export function taskSpanRef(task: TaskTrace): TraceRef | undefined {
  const created = parseTraceparent(task.traceparent);
  return created ? { ...created, spanId: taskSpanId(task.taskId) } : undefined;
}

/**
 * The parent of the task's span: its parent task's span, or, for the root, the span in which it
 * was created (the plan step's, itself a child of the request's).
 */
function taskParentRef(task: TaskTrace): TraceRef | undefined {
  const created = parseTraceparent(task.traceparent);
  if (!created) return undefined;
  return task.parentTaskId ? { ...created, spanId: taskSpanId(task.parentTaskId) } : created;
}

/** Runs `fn` inside the task's span (as its parent), so what it starts is a child of the task's span. */
export function withinTask<T>(task: TaskTrace | undefined, fn: () => T): T {
  if (!enabled || !task) return fn();
  const ref = taskSpanRef(task);
  return ref ? context.with(contextOf(ref, context.active()), fn) : fn();
}

/**
 * Writes a span that started earlier than now, with a given span id when `spanId` is set: a task's
 * span when it ends (started at its creation), an approval's wait when it is answered.
 */
export function recordSpan(
  name: string,
  options: {
    parent: TraceRef | undefined;
    spanId?: string;
    start: TimeInput;
    end?: TimeInput;
    kind?: SpanKind;
    attributes?: Attributes;
    links?: Link[];
    error?: string;
  },
): void {
  if (!enabled || !options.parent) return;
  pinned = options.spanId;
  let span: Span;
  try {
    span = tracer().startSpan(
      name,
      {
        kind: options.kind ?? SpanKind.INTERNAL,
        startTime: options.start,
        attributes: clean(options.attributes ?? {}),
        ...(options.links ? { links: options.links } : {}),
      },
      contextOf(options.parent),
    );
  } finally {
    pinned = undefined;
  }
  if (options.error) {
    span.setStatus({ code: SpanStatusCode.ERROR, message: options.error });
    span.setAttribute("error.type", "task_failed");
  }
  span.end(options.end);
}

/** Writes the task's span, now that it has ended (`end`: its terminal event's time). */
export function recordTaskSpan(
  task: TaskTrace & { createdAt: string },
  options: { name: string; end: string; attributes: Attributes; error?: string },
): void {
  if (!enabled) return;
  const parent = taskParentRef(task);
  recordSpan(options.name, {
    parent,
    spanId: taskSpanId(task.taskId),
    start: new Date(task.createdAt),
    end: new Date(options.end),
    attributes: options.attributes,
    ...(options.error ? { error: options.error } : {}),
  });
}

// ---- spans around work ------------------------------------------------------------------------------

export interface SpanOptions {
  kind?: SpanKind;
  attributes?: Attributes;
  /** The parent; default: the active span. */
  parent?: Context;
  links?: Link[];
}

/** What a running span can be told; the same calls do nothing when tracing is off. */
export interface SpanHandle {
  set(name: string, value: AttributeValue | undefined | null): void;
  setAll(attributes: Attributes): void;
  /** Marks the span failed without an exception (an outcome, not a throw). */
  fail(errorType: string, message?: string): void;
  /** Names the span anew (a server span learns its route once the route has run). */
  rename(name: string): void;
}

const NOOP: SpanHandle = { set() {}, setAll() {}, fail() {}, rename() {} };

const handleOf = (span: Span): SpanHandle => ({
  rename: (name) => span.updateName(name),
  set: (name, value) => {
    if (value !== undefined && value !== null) span.setAttribute(name, value);
  },
  setAll: (attributes) => span.setAttributes(clean(attributes)),
  fail: (errorType, message) => {
    span.setAttribute("error.type", errorType);
    span.setStatus({ code: SpanStatusCode.ERROR, ...(message ? { message } : {}) });
  },
});

/**
 * Runs `fn` inside a new span (a child of the active one): ended when `fn` settles, marked failed
 * with the error's type when it throws. With tracing off, `fn` runs with a handle that does nothing.
 */
export async function inSpan<T>(
  name: string,
  options: SpanOptions,
  fn: (span: SpanHandle) => Promise<T>,
): Promise<T> {
  if (!enabled) return fn(NOOP);
  const span = tracer().startSpan(
    name,
    {
      kind: options.kind ?? SpanKind.INTERNAL,
      attributes: clean(options.attributes ?? {}),
      ...(options.links ? { links: options.links } : {}),
    },
    options.parent ?? context.active(),
  );
  try {
    return await context.with(trace.setSpan(options.parent ?? context.active(), span), () =>
      fn(handleOf(span)),
    );
  } catch (error) {
    const code = (error as { code?: unknown })?.code;
    span.setAttribute("error.type", typeof code === "string" ? code : ((error as Error)?.name ?? "Error"));
    span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error)?.message?.slice(0, 500) ?? "" });
    throw error;
  } finally {
    span.end();
  }
}

/** Attributes without undefined or null values (the SDK warns on them). */
function clean(attributes: Attributes): Attributes {
  const out: Attributes = {};
  for (const [k, v] of Object.entries(attributes)) if (v !== undefined && v !== null) out[k] = v;
  return out;
}

export { SpanKind };

/** Attribute names: OpenTelemetry's GenAI semantic conventions, and Arbor's own. */
export const ATTR = {
  operation: "gen_ai.operation.name",
  provider: "gen_ai.provider.name",
  requestModel: "gen_ai.request.model",
  responseModel: "gen_ai.response.model",
  maxTokens: "gen_ai.request.max_tokens",
  temperature: "gen_ai.request.temperature",
  inputTokens: "gen_ai.usage.input_tokens",
  outputTokens: "gen_ai.usage.output_tokens",
  finishReasons: "gen_ai.response.finish_reasons",
  conversationId: "gen_ai.conversation.id",
  agentName: "gen_ai.agent.name",
  agentId: "gen_ai.agent.id",
  agentDescription: "gen_ai.agent.description",
  toolName: "gen_ai.tool.name",
  toolCallId: "gen_ai.tool.call.id",
  toolType: "gen_ai.tool.type",
  toolArguments: "gen_ai.tool.call.arguments",
  toolResult: "gen_ai.tool.call.result",
  inputMessages: "gen_ai.input.messages",
  outputMessages: "gen_ai.output.messages",
  systemInstructions: "gen_ai.system_instructions",
  errorType: "error.type",
  taskUrn: "arbor.task.urn",
  tenant: "arbor.tenant",
  depth: "arbor.task.depth",
  status: "arbor.task.status",
  electionScore: "arbor.election.score",
  runnerUp: "arbor.election.runner_up",
  runnerUpScore: "arbor.election.runner_up_score",
  costUsd: "arbor.cost.usd",
  costUnknown: "arbor.cost.unknown_calls",
  budgetTokensLeft: "arbor.budget.tokens_left",
  budgetCostLeft: "arbor.budget.cost_usd_left",
  policyDecision: "arbor.policy.decision",
  toolOutcome: "arbor.tool.outcome",
  round: "arbor.evaluation.round",
  interactionPurpose: "arbor.interaction.purpose",
  answeredBy: "arbor.interaction.answered_by",
  channel: "arbor.channel",
} as const;

// ---- metrics ----------------------------------------------------------------------------------------

/**
 * The metrics beside the spans, through the OpenTelemetry API (the composition root registers the
 * meter provider with the tracer provider): the GenAI conventions' client metrics, and Arbor's own
 * counts. Created when tracing turns on; until then `meters` is undefined and nothing is recorded.
 */
interface Meters {
  tokens: Histogram;
  duration: Histogram;
  tasks: Counter;
  waiting: UpDownCounter;
  deliveries: Counter;
}
let meters: Meters | undefined;

/** Called by the composition root once its meter provider is registered. */
export function openMeters(): void {
  const meter = metrics.getMeter("arbor");
  meters = {
    tokens: meter.createHistogram("gen_ai.client.token.usage", {
      unit: "{token}",
      description: "Tokens used by a model call, by gen_ai.token.type (input, output)",
      advice: { explicitBucketBoundaries: [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576] },
    }),
    duration: meter.createHistogram("gen_ai.client.operation.duration", {
      unit: "s",
      description: "How long a model call took",
      advice: {
        explicitBucketBoundaries: [
          0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
        ],
      },
    }),
    tasks: meter.createCounter("arbor.tasks", {
      unit: "{task}",
      description:
        "Tasks that entered a state, by arbor.task.status (in_progress, awaiting_user, done, failed, canceled)",
    }),
    waiting: meter.createUpDownCounter("arbor.approvals.waiting", {
      unit: "{question}",
      description: "Questions asked of a person and not answered yet (approvals, inputs, plan approvals)",
    }),
    deliveries: meter.createCounter("arbor.deliveries", {
      unit: "{delivery}",
      description: "Notify deliveries by outcome (sent, retried, dead) and channel",
    }),
  };
}

export function closeMeters(): void {
  meters = undefined;
}

/** One model call's tokens and duration, as the GenAI conventions name them. */
export function recordModelCall(
  attributes: Attributes,
  usage: { inputTokens: number; outputTokens: number } | undefined,
  seconds: number,
): void {
  if (!meters) return;
  const common = clean(attributes);
  meters.duration.record(seconds, common);
  if (!usage) return;
  meters.tokens.record(usage.inputTokens, { ...common, "gen_ai.token.type": "input" });
  meters.tokens.record(usage.outputTokens, { ...common, "gen_ai.token.type": "output" });
}

/** A task entered `status` (counted once: the event that moved it was new). */
export function countTask(status: string, tenant: string | undefined): void {
  meters?.tasks.add(1, clean({ [ATTR.status]: status, [ATTR.tenant]: tenant }));
}

/** A question for a person was asked (+1), or answered or given up with its task (-1). */
export function countWaiting(change: 1 | -1): void {
  meters?.waiting.add(change);
}

/** A delivery's outcome. */
export function countDelivery(outcome: "sent" | "retried" | "dead", channel: string): void {
  meters?.deliveries.add(1, { "arbor.delivery.outcome": outcome, [ATTR.channel]: channel });
}
