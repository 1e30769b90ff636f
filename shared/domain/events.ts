import { hash } from "node:crypto";
import * as z from "zod";
import { ValidationError } from "../kernel/errors.ts";
import { TRACEPARENT } from "../kernel/trace-context.ts";
import { deepFreeze } from "./immutable.ts";
import {
  CapabilitiesSchema,
  CapabilitySchema,
  DisplayNameSchema,
  formatIssues,
  InteractionDisplaySchema,
  InteractionKindSchema,
  InteractionOptionSchema,
  InteractionPurposeSchema,
  MAX_CAPABILITIES,
  PrioritySchema,
  UrnSchema,
} from "./resources.ts";

/**
 * Domain events: append-only, validated, each with the actor that caused it and a schema version.
 * Task lifecycle + UIP events follow seeds/002; RESOURCE_PUT / RESOURCE_DELETE record resource
 * writes. Old schema versions are upcast on read (see `upcastEvent`), never rewritten.
 */
export const EVENT_SCHEMA_VERSION = 1;

export const ActorSchema = z.object({
  /** `user_<id>`, `agent_<name>`, `system_<component>` or an Assistant URN. */
  id: z.string().min(1).max(1000),
  kind: z.enum(["human", "agent", "system"]),
  /** How they are named where people read it (approvals, threads, the console); the id stays who they are. */
  name: DisplayNameSchema.optional(),
  /**
   * What they may do, as it was when they acted: the roles whoever vouched for them gave (their
   * key's, the chat settings'), never what a request says. The policy decides by the caller's
   * roles; these are the record of them, shown beside the name.
   */
  capabilities: CapabilitiesSchema.optional(),
});
export type Actor = z.infer<typeof ActorSchema>;

/** The actor with `roles` as its capabilities (none given: as it is). */
export function withCapabilities<A extends Actor>(actor: A, roles: readonly string[] | undefined): A {
  // A role no capability can be (a control character in it) is left out, not the actor refused.
  const capabilities = [...new Set(roles ?? [])]
    .filter((r) => CapabilitySchema.safeParse(r).success)
    .slice(0, MAX_CAPABILITIES);
  return capabilities.length ? { ...actor, capabilities } : actor;
}

/** The actor as a person reads it: their name with their id, or the id alone; then their capabilities. */
export const actorLabel = (actor: {
  id: string;
  name?: string | undefined;
  capabilities?: readonly string[] | undefined;
}): string =>
  `${actor.name ? `${actor.name} (${actor.id})` : actor.id}${
    actor.capabilities?.length ? ` · ${actor.capabilities.join(", ")}` : ""
  }`;

const envelope = {
  /** Unique event id (ULID). Appending the same id twice records it once. */
  id: z.string().min(1).max(128),
  v: z.literal(EVENT_SCHEMA_VERSION),
  /** When it happened (ISO 8601). */
  at: z.iso.datetime(),
  actor: ActorSchema,
  /** Ties together everything one request caused (channel message -> tasks -> tools). */
  correlationId: z.string().max(200).optional(),
  /**
   * The W3C trace context active when it was recorded (`00-<trace id>-<span id>-<flags>`), when
   * tracing is on: a task's spans are derived from its TaskCreated's (kernel/tracing.ts).
   */
  traceparent: z.string().regex(TRACEPARENT).optional(),
};

const TaskId = UrnSchema;

export const TaskCreatedSchema = z.object({
  ...envelope,
  type: z.literal("TaskCreated"),
  payload: z.object({
    taskId: TaskId,
    parentTaskId: TaskId.optional(),
    title: z.string().min(1).max(200),
    intent: z.string().max(8000),
    priority: PrioritySchema,
    /** The elected assistant, when known at creation. */
    assistant: UrnSchema.optional(),
  }),
});
export const TaskStartedSchema = z.object({
  ...envelope,
  type: z.literal("TaskStarted"),
  payload: z.object({ taskId: TaskId, assistant: UrnSchema.optional() }),
});
export const TaskCompletedSchema = z.object({
  ...envelope,
  type: z.literal("TaskCompleted"),
  payload: z.object({
    taskId: TaskId,
    summary: z.string().max(8000).optional(),
    /** The output Message resource. */
    output: UrnSchema.optional(),
    /** The files it made (its tools' artifacts; a parent's: its children's), by URN. */
    artifacts: z.array(UrnSchema).max(100).optional(),
  }),
});
export const TaskFailedSchema = z.object({
  ...envelope,
  type: z.literal("TaskFailed"),
  payload: z.object({ taskId: TaskId, reason: z.string().min(1).max(8000) }),
});
export const TaskCanceledSchema = z.object({
  ...envelope,
  type: z.literal("TaskCanceled"),
  payload: z.object({ taskId: TaskId, reason: z.string().max(8000).optional() }),
});
export const UserInteractionRequestedSchema = z.object({
  ...envelope,
  type: z.literal("UserInteractionRequested"),
  payload: z.object({
    interactionId: UrnSchema,
    taskId: TaskId,
    kind: InteractionKindSchema,
    purpose: InteractionPurposeSchema,
    display: InteractionDisplaySchema,
    options: z.array(InteractionOptionSchema).optional(),
    validation: z.object({ regex: z.string().optional(), required: z.boolean().optional() }).optional(),
  }),
});
export const UserInteractionRespondedSchema = z.object({
  ...envelope,
  type: z.literal("UserInteractionResponded"),
  payload: z.object({
    interactionId: UrnSchema,
    taskId: TaskId,
    selectedOptionId: z.string().max(100).optional(),
    inputValue: z.string().max(100_000).optional(),
    comment: z.string().max(4000).optional(),
  }),
});
export const ResourcePutSchema = z.object({
  ...envelope,
  type: z.literal("RESOURCE_PUT"),
  payload: z.object({
    urn: UrnSchema,
    /** `meta.type` of the resource written. */
    resourceType: z.string().min(1),
    /** sha256 of the stored document, so consumers can tell a rewrite from a change. */
    contentHash: z.string().optional(),
  }),
});
export const ResourceDeleteSchema = z.object({
  ...envelope,
  type: z.literal("RESOURCE_DELETE"),
  payload: z.object({ urn: UrnSchema, resourceType: z.string().min(1) }),
});

/**
 * The audit log of tool calls (its own streams, `audit#<task URN>`): every call is requested, then
 * completed or failed, with who asked, a hash of the exact arguments and how long it took.
 */
/** Why a tool call failed: its arguments, an unknown name, its time, its own error, a policy. */
export const ToolFailureReasonSchema = z.enum([
  "invalid_arguments",
  "unknown_tool",
  "timeout",
  "error",
  "denied",
]);
export type ToolFailureReason = z.infer<typeof ToolFailureReasonSchema>;

const toolCall = {
  taskId: TaskId,
  /** The model's id for the call (pairs the records of one call). */
  callId: z.string().min(1).max(128),
  tool: z.string().min(1).max(64),
  /** sha256 of the arguments as the model sent them (see argumentsHash). */
  argumentsHash: z.string().regex(/^[0-9a-f]{64}$/),
  /** Which run of the call (absent: 1, as in events written before attempts were counted). */
  attempt: z.number().int().min(1).max(1000).optional(),
};
export const ToolCallRequestedSchema = z.object({
  ...envelope,
  type: z.literal("ToolCallRequested"),
  payload: z.object(toolCall),
});
export const ToolCallCompletedSchema = z.object({
  ...envelope,
  type: z.literal("ToolCallCompleted"),
  payload: z.object({
    ...toolCall,
    durationMs: z.number().min(0),
    /** A result too large to pass inline, stored as a resource. */
    resultUrn: UrnSchema.optional(),
    /** The result's length in characters, as the tool gave it (with resultUrn). */
    resultChars: z.number().int().min(0).optional(),
  }),
});
export const ToolCallFailedSchema = z.object({
  ...envelope,
  type: z.literal("ToolCallFailed"),
  payload: z.object({
    ...toolCall,
    durationMs: z.number().min(0),
    /** Why: invalid arguments, a timeout, the tool's own error, a denial. */
    reason: ToolFailureReasonSchema,
    error: z.string().max(8000),
  }),
});

export const DomainEventSchema = z.discriminatedUnion("type", [
  TaskCreatedSchema,
  TaskStartedSchema,
  TaskCompletedSchema,
  TaskFailedSchema,
  TaskCanceledSchema,
  UserInteractionRequestedSchema,
  UserInteractionRespondedSchema,
  ResourcePutSchema,
  ResourceDeleteSchema,
  ToolCallRequestedSchema,
  ToolCallCompletedSchema,
  ToolCallFailedSchema,
]);
export type DomainEvent = z.infer<typeof DomainEventSchema>;
export type DomainEventType = DomainEvent["type"];
export type EventOf<T extends DomainEventType> = Extract<DomainEvent, { type: T }>;

export const TASK_LIFECYCLE_TYPES = [
  "TaskCreated",
  "TaskStarted",
  "TaskCompleted",
  "TaskFailed",
  "TaskCanceled",
  "UserInteractionRequested",
  "UserInteractionResponded",
] as const satisfies readonly DomainEventType[];
export type TaskEvent = EventOf<(typeof TASK_LIFECYCLE_TYPES)[number]>;
export const isTaskEvent = (e: DomainEvent): e is TaskEvent =>
  (TASK_LIFECYCLE_TYPES as readonly string[]).includes(e.type);

/** A domain event as recorded in a stream of the event log. */
export type StoredEvent = DomainEvent & {
  /** The stream it belongs to: for task events, the task URN. */
  streamId: string;
  /** 1-based position within the stream; gap-free. */
  seq: number;
  /** When the log recorded it (ISO 8601). */
  recordedAt: string;
};

/**
 * Reads any stored version of an event and returns the current shape. Version 1 is current;
 * when v2 arrives, its upcaster goes here and the v1 fixture corpus keeps proving it.
 */
export function upcastEvent(raw: unknown): DomainEvent {
  const v = (raw as { v?: unknown } | null)?.v;
  if (v !== EVENT_SCHEMA_VERSION) {
    throw new ValidationError("Unsupported event schema version", [
      `v: ${JSON.stringify(v)}, this build reads ${EVENT_SCHEMA_VERSION}`,
    ]);
  }
  return validateEvent(raw);
}

/**
 * Validates an event before it is written. Throws ValidationError naming each bad field. The
 * result is frozen and remembered as valid, so passing it on (a use case validates, then the store
 * does) costs a lookup instead of a second parse.
 */
export function validateEvent(event: unknown): DomainEvent {
  if (typeof event === "object" && event !== null && validated.has(event)) return event as DomainEvent;
  const result = DomainEventSchema.safeParse(event);
  if (!result.success) throw new ValidationError("Invalid domain event", formatIssues(result.error));
  const valid = deepFreeze(result.data);
  validated.add(valid);
  return valid;
}
const validated = new WeakSet<object>();

/** The stream an event belongs to by default: a tool call's goes to its task's audit stream. */
export function streamOf(event: DomainEvent): string {
  if ("callId" in event.payload) return auditStreamOf(event.payload.taskId);
  return "taskId" in event.payload ? event.payload.taskId : event.payload.urn;
}

/** The audit stream of a task's tool calls. */
export const auditStreamOf = (taskId: string): string => `audit#${taskId}`;

/**
 * A hash of a tool call's exact arguments, as the model sent them: what an approval binds to and
 * what the audit log records (the arguments themselves may hold what should not be logged).
 */
export function argumentsHash(args: unknown): string {
  return hash("sha256", JSON.stringify(args));
}

export type NewEvent<T extends DomainEventType = DomainEventType> = Omit<EventOf<T>, "id" | "v" | "at"> &
  Partial<Pick<EventOf<T>, "id" | "at">>;

/**
 * A deterministic event id from the facts that make a step unique (e.g. task URN, "completed",
 * round). A step that runs twice (redelivery, crash and resume) produces the same id, so the log
 * records it once.
 */
export function eventIdFor(...parts: readonly string[]): string {
  return `evt_${hash("sha256", parts.join("\u0000"), "base64url").slice(0, 26)}`;
}
