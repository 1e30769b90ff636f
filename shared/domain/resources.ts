import * as z from "zod";
import { ValidationError } from "../kernel/errors.ts";
import { childUrn, deterministicId, isUrn, lastElement, parentUrn, qualifiedType, type Urn } from "./urn.ts";

/**
 * Resources are typed JSON documents stored under their URN. Every resource has `meta` with its
 * identity (id = URN, name, type, parent, hash) and the four descriptors that `toDescription()`
 * compiles into the text embedded for similarity search.
 */

export const UrnSchema = z
  .string()
  .refine(isUrn, { message: "must be a URN like cld:common.Tenant.acme/..." });

export const DescriptorsSchema = z.object({
  /** What the resource is meant to accomplish. */
  purpose: z.string().max(4000).optional(),
  /** How to execute or work with it. */
  instructions: z.string().max(8000).optional(),
  /** When, or when not, to use it. */
  applicability: z.string().max(4000).optional(),
  /** What success looks like: for a task, its definition of done. */
  evaluation: z.string().max(4000).optional(),
});
export type Descriptors = z.infer<typeof DescriptorsSchema>;

export const MetaSchema = DescriptorsSchema.extend({
  id: UrnSchema,
  name: z.string().min(1).max(200),
  /** `<package>.<Type>`, e.g. `common.Conversation`. */
  type: z.string().regex(/^[a-z][a-z0-9]*\.[A-Z][A-Za-z0-9]*$/),
  parent: UrnSchema.optional(),
  /** The id element of the URN; deterministic for planned resources. */
  hash: z.string().min(1),
  createdAt: z.iso.datetime().optional(),
  tokens: z.number().int().nonnegative().optional(),
  score: z.number().optional(),
});
export type Meta = z.infer<typeof MetaSchema>;

/** Compiles the four descriptors into one structured description (used for embeddings). */
export function toDescription(d: Descriptors): string {
  const sections: string[] = [];
  if (d.purpose) sections.push(`**Purpose:** ${d.purpose}`);
  if (d.instructions) sections.push(`**Instructions:** ${d.instructions}`);
  if (d.applicability) sections.push(`**Applicability:** ${d.applicability}`);
  if (d.evaluation) sections.push(`**Evaluation:** ${d.evaluation}`);
  return sections.join("\n\n");
}

export interface MetaInput extends Descriptors {
  /** `<package>.<Type>` */
  type: string;
  name: string;
  parent?: Urn | string | undefined;
  /** An explicit id; when absent the id is the deterministic hash of parent + type + name. */
  id?: string | undefined;
  createdAt?: string | undefined;
}

/**
 * Builds complete metadata: the `withMeta()` rule. The id defaults to a deterministic hash of
 * parent + type + name, so creating "the same" resource twice yields the same URN.
 */
export function withMeta(input: MetaInput): Meta {
  const [pkg, type] = input.type.split(".");
  if (!pkg || !type) throw new ValidationError(`Resource type must be <package>.<Type>`, [input.type]);
  const hash = input.id ?? deterministicId(input.parent, input.type, input.name);
  const id = childUrn(input.parent, { pkg, type, id: hash });
  const meta: Meta = { id, name: input.name, type: input.type, hash };
  if (input.parent !== undefined) meta.parent = input.parent as Urn;
  for (const k of ["purpose", "instructions", "applicability", "evaluation", "createdAt"] as const) {
    const v = input[k];
    if (v !== undefined) meta[k] = v;
  }
  return meta;
}

/** Consistency of meta with its own URN: type, hash and parent must agree with `id`. */
function metaAgreesWithUrn(meta: Meta, ctx: z.RefinementCtx): void {
  const last = lastElement(meta.id);
  if (qualifiedType(last) !== meta.type) {
    ctx.addIssue({
      code: "custom",
      path: ["meta", "type"],
      message: `is ${meta.type} but the URN says ${qualifiedType(last)}`,
    });
  }
  if (last.id !== meta.hash) {
    ctx.addIssue({
      code: "custom",
      path: ["meta", "hash"],
      message: `is ${meta.hash} but the URN says ${last.id}`,
    });
  }
  if (parentUrn(meta.id) !== meta.parent) {
    ctx.addIssue({
      code: "custom",
      path: ["meta", "parent"],
      message: `must be the URN's parent (${parentUrn(meta.id) ?? "none"})`,
    });
  }
}

const resource = <L extends string, T extends z.ZodRawShape>(type: L, shape: T) =>
  z
    .object({ meta: MetaSchema.extend({ type: z.literal(type) }), ...shape })
    .superRefine((r, ctx) => metaAgreesWithUrn((r as unknown as { meta: Meta }).meta, ctx));

// ---- the resource types ------------------------------------------------------------------------

export const TenantSchema = resource("common.Tenant", {
  displayName: z.string().min(1).max(200).optional(),
});

export const ChannelKindSchema = z.enum(["cli", "http", "slack", "teams", "a2a"]);
export const ConversationSchema = resource("common.Conversation", {
  channel: z.object({ kind: ChannelKindSchema, ref: z.string().max(500).optional() }).optional(),
  title: z.string().max(500).optional(),
  /**
   * The id of the actor who started it (a person's or a remote agent's key id), set by the engine
   * from the authenticated caller, never from the request: the policy gives it, and everything
   * below it (messages, tasks, interactions), to them. Absent on conversations older than it.
   */
  startedBy: z.string().min(1).max(1000).optional(),
});

export const ToolCallSchema = z.object({
  /** Unique per call; pairs a tool result with its call. */
  id: z.string().min(1).max(128),
  name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, "tool names are 1-64 of a-z A-Z 0-9 _ -"),
  arguments: z.record(z.string(), z.unknown()),
});
export type ToolCall = z.infer<typeof ToolCallSchema>;

export const RoleSchema = z.enum(["system", "user", "assistant", "tool"]);
export const MessageSchema = resource("common.Message", {
  role: RoleSchema,
  content: z.string().max(1_000_000).optional(),
  /** role=assistant: the tools it asks to call. */
  toolCalls: z.array(ToolCallSchema).max(64).optional(),
  /** role=tool: which call this result answers. */
  toolCallId: z.string().min(1).max(128).optional(),
  /**
   * role=tool: the tool failed and `content` is the error the model may read. On a task's output:
   * the task failed or was canceled, and `content` says why.
   */
  isError: z.boolean().optional(),
  /**
   * role=tool: a latent call's result without an output path (seed 004): shown to the model in
   * the next turn only, then elided from the messages of later turns.
   */
  ephemeral: z.boolean().optional(),
  /**
   * A task's output: the resources its answer cites (document passages, earlier results given
   * to it as context under their URNs, and named in the answer).
   */
  citations: z.array(UrnSchema).max(50).optional(),
}).superRefine((m, ctx) => {
  if (m.toolCalls && m.role !== "assistant") {
    ctx.addIssue({
      code: "custom",
      path: ["toolCalls"],
      message: "only assistant messages may request tool calls",
    });
  }
  if (m.role === "tool" && !m.toolCallId) {
    ctx.addIssue({
      code: "custom",
      path: ["toolCallId"],
      message: "a tool message must say which call it answers",
    });
  }
  if (m.role !== "tool" && m.toolCallId !== undefined) {
    ctx.addIssue({ code: "custom", path: ["toolCallId"], message: "only tool messages carry toolCallId" });
  }
  if (m.isError !== undefined && m.role !== "tool" && !(m.role === "assistant" && m.meta.name === "output")) {
    ctx.addIssue({
      code: "custom",
      path: ["isError"],
      message: "only tool results and a task's output carry isError",
    });
  }
  if (m.content === undefined && !m.toolCalls?.length) {
    ctx.addIssue({ code: "custom", path: ["content"], message: "a message needs content or tool calls" });
  }
});

export const PrioritySchema = z.enum(["foreground", "normal", "background"]);
export type Priority = z.infer<typeof PrioritySchema>;

/** Limits a subtree may use. Inherited down the tree: a child's budget never exceeds its parent's. */
export const BudgetsSchema = z.object({
  maxDepth: z.number().int().min(1).max(20).optional(),
  maxFanOut: z.number().int().min(1).max(100).optional(),
  maxTasks: z.number().int().min(1).max(10_000).optional(),
  maxTurns: z.number().int().min(1).max(1000).optional(),
  maxTokens: z.number().int().min(1).optional(),
  maxCostUsd: z.number().nonnegative().optional(),
  maxCorrectiveRounds: z.number().int().min(0).max(10).optional(),
  maxWallMs: z.number().int().min(1).optional(),
});
export type Budgets = z.infer<typeof BudgetsSchema>;

/** A task as planned: what the planner's single tool call returns, recursively. */
export interface TaskSpec extends Descriptors {
  name: string;
  priority?: Priority | undefined;
  budgets?: Budgets | undefined;
  subtasks?: TaskSpec[] | undefined;
}
export const TaskSpecSchema: z.ZodType<TaskSpec> = DescriptorsSchema.extend({
  name: z.string().min(1).max(200),
  priority: PrioritySchema.optional(),
  budgets: BudgetsSchema.optional(),
  get subtasks() {
    return z.array(TaskSpecSchema).max(100).optional();
  },
});

export const ElectionSchema = z.object({
  assistant: UrnSchema,
  score: z.number(),
  runnerUp: z.object({ assistant: UrnSchema, score: z.number() }).optional(),
});

export const TaskResourceSchema = resource("plan.Task", {
  priority: PrioritySchema.default("normal"),
  budgets: BudgetsSchema.default({}),
  planMode: z.enum(["eager", "lazy"]).optional(),
  /** Which assistant was elected, with its similarity score and the runner-up. */
  election: ElectionSchema.optional(),
  /** The subtree as planned (not yet materialised as child Task resources). */
  subtasks: z.array(TaskSpecSchema).max(100).optional(),
  /** Corrective round that created this task (0 = the original plan). */
  round: z.number().int().min(0).default(0),
});

export const AssistantSchema = resource("common.Assistant", {
  model: z.string().max(200).optional(),
  /** Names of the tools this assistant may call. */
  tools: z.array(z.string()).default([]),
  limits: z
    .object({
      maxTurns: z.number().int().min(1).optional(),
      maxTokens: z.number().int().min(1).optional(),
      /** This assistant's context window in tokens (its model's, or less); default the engine's. */
      contextTokens: z.number().int().min(2_000).max(10_000_000).optional(),
    })
    .default({}),
  /**
   * When it was removed from its tenant's team (`arbor team apply`): a retired assistant is kept,
   * so that a task that elected it before goes on and its record stays readable, but it is out of
   * the election index and never offered again.
   */
  retiredAt: z.iso.datetime().optional(),
});

export const JsonSchemaObject = z.record(z.string(), z.unknown());
export const ToolResourceSchema = resource("common.Tool", {
  function: z.object({
    name: ToolCallSchema.shape.name,
    description: z.string().max(4000),
    parameters: JsonSchemaObject,
  }),
  /** Risky tools wait for a person's confirmation bound to their exact arguments. */
  risky: z.boolean().default(false),
  /** It changes nothing outside Arbor (ToolDescriptor.pure). */
  pure: z.boolean().default(false),
  /** What ListTools filters by (tools/service/config.ts NAMESPACE); absent on records older than namespaces. */
  namespace: z
    .string()
    .regex(/^[a-z0-9][a-z0-9_-]{0,63}$/)
    .optional(),
  /** sha256 of what was registered (tools/service/tool-registry.ts): a registration rewrites only what differs. */
  fingerprint: z.string().max(128).optional(),
  binding: z.object({
    kind: z.enum(["builtin", "http", "lambda", "mcp", "a2a"]),
    config: z.record(z.string(), z.unknown()).default({}),
  }),
});

export const InteractionKindSchema = z.enum(["select", "confirm", "input", "composite"]);
export const InteractionPurposeSchema = z.enum([
  "choose_strategy",
  "request_info",
  "confirm_risky_action",
  "assign_subtask",
  "approve_plan",
  "generic",
]);
export const InteractionOptionSchema = z.object({
  id: z.string().min(1).max(100),
  label: z.string().min(1).max(200),
  style: z.enum(["primary", "danger", "default"]).optional(),
  isDefault: z.boolean().optional(),
});
export const InteractionDisplaySchema = z.object({
  title: z.string().min(1).max(300),
  description: z.string().max(4000).optional(),
  content: z.unknown().optional(),
  contentKind: z.enum(["PlainText", "Json", "Diff", "Table"]).optional(),
});
// biome-ignore lint/suspicious/noControlCharactersInRegex: text shown in threads and pages holds no control characters
const PLAIN_TEXT = /^[^\u0000-\u001f\u007f]+$/;

/** A person's or an agent's name as shown (their key's, the chat settings', the platform's): plain text. */
export const DisplayNameSchema = z
  .string()
  .trim()
  .min(1)
  .max(200)
  .regex(PLAIN_TEXT, "plain text, without control characters");

/** A capability an actor holds (a role: `admin`, `approver`): plain text, as keys' roles are. */
export const CapabilitySchema = z
  .string()
  .min(1)
  .max(64)
  .regex(PLAIN_TEXT, "plain text, without control characters");
/** The most capabilities an actor carries (a key holds at most 50 roles). */
export const MAX_CAPABILITIES = 50;
export const CapabilitiesSchema = z.array(CapabilitySchema).max(MAX_CAPABILITIES);

export const InteractionResponseSchema = z.object({
  selectedOptionId: z.string().max(100).optional(),
  inputValue: z.string().max(100_000).optional(),
  comment: z.string().max(4000).optional(),
});
export const InteractionResourceSchema = resource("uip.Interaction", {
  kind: InteractionKindSchema,
  purpose: InteractionPurposeSchema,
  display: InteractionDisplaySchema,
  options: z.array(InteractionOptionSchema).max(50).optional(),
  validation: z
    .object({ regex: z.string().max(500).optional(), required: z.boolean().optional() })
    .optional(),
  /** For confirm_risky_action: the tool and a hash of its exact arguments. */
  binding: z.object({ tool: z.string(), argumentsHash: z.string() }).optional(),
  status: z.enum(["pending", "answered", "expired"]).default("pending"),
  /** The answer, with who gave it: their id, their name when they have one, and their capabilities then. */
  response: InteractionResponseSchema.extend({
    actor: z.string(),
    actorName: DisplayNameSchema.optional(),
    actorCapabilities: CapabilitiesSchema.optional(),
  }).optional(),
});

/**
 * One entry of a task's state (seed 004): what a call with `_outputPath` stored, under the task,
 * named by its path (`state.forecast`). Written again by the same call, it is the same document.
 */
export const TaskStateSchema = resource("plan.State", {
  path: z.string().min(7).max(500),
  value: z.unknown().refine((v) => JSON.stringify(v ?? null).length <= 100_000, {
    message: "a state value is at most 100,000 characters as JSON",
  }),
  /** The call that stored it. */
  source: z.object({
    tool: z.string().min(1).max(200),
    callId: z.string().min(1).max(128),
    turn: z.number().int(),
  }),
  /** A latent call's branching path this entry's path was collapsed from (the first alternative). */
  collapsedFrom: z.string().max(500).optional(),
});

/**
 * A document of the tenant's knowledge (shared/knowledge/documents.ts): a file or page added with
 * `arbor docs add` or `POST /v1/documents`, under the tenant, named by where it came from (adding
 * the same name again replaces it). Its text is in its `doc.Chunk`s; its bytes beside it
 * (`<urn>.source`). Written once its chunks are, so a Document that reads is one that is searched.
 */
export const DocumentSchema = resource("doc.Document", {
  /** The file name or URL it was added from. */
  source: z.string().min(1).max(2_000),
  contentType: z.string().min(1).max(200),
  /** Bytes of the source. */
  size: z.number().int().nonnegative(),
  /** Lowercase hex sha256 of the source. */
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  /** Its title (the first heading, the HTML title, the PDF's), when it has one. */
  title: z.string().max(500).optional(),
  pages: z.number().int().positive().optional(),
  chunks: z.number().int().nonnegative(),
  /** The chunks' generation: the first 12 characters of sha256 (their ids begin with it). */
  generation: z.string().regex(/^[0-9a-f]{12}$/),
  /** The actor who added it. */
  addedBy: z.string().min(1).max(1000),
});

/** Where a chunk's text is in its document: offsets into the text extracted from it. */
export const ChunkLocationSchema = z.object({
  /** The page (PDF), from 1. */
  page: z.number().int().positive().optional(),
  /** The headings it lies under, outermost first. */
  headings: z.array(z.string().max(300)).max(6).optional(),
  start: z.number().int().nonnegative(),
  end: z.number().int().nonnegative(),
});
export type ChunkLocation = z.infer<typeof ChunkLocationSchema>;

/** A piece of a document's text, embedded and searched on its own; cited by its URN. */
export const ChunkSchema = resource("doc.Chunk", {
  content: z.string().min(1).max(20_000),
  /** Its place in the document, from 0. */
  index: z.number().int().nonnegative(),
  location: ChunkLocationSchema,
  tokens: z.number().int().nonnegative(),
});

/** Whom a memory is for: the person a request is from, the whole tenant, or one assistant. */
export const MemoryScopeSchema = z.enum(["person", "tenant", "assistant"]);
export type MemoryScope = z.infer<typeof MemoryScopeSchema>;

/**
 * A fact an assistant chose to remember (shared/knowledge/memory.ts), recalled by similarity into
 * later requests of its scope. Stored under its scope's element of the tenant
 * (`mem.Scope.person-<h>`, `mem.Scope.tenant`, `mem.Scope.assistant-<h>`), so a recall asks the
 * index for one scope's prefix and never sees another's. Data, never instructions: it is quoted
 * as such wherever it is shown to a model.
 */
export const MemorySchema = resource("mem.Memory", {
  fact: z.string().min(1).max(500),
  scope: MemoryScopeSchema,
  /** The person it is about (scope person): their actor id. They may list and delete it. */
  about: z.string().min(1).max(1000).optional(),
  /** The assistant it is for (scope assistant). */
  assistant: UrnSchema.optional(),
  /** The task whose assistant remembered it. */
  source: UrnSchema,
  /** The assistant that remembered it. */
  rememberedBy: z.string().min(1).max(1000),
});

export const RESOURCE_SCHEMAS = {
  "common.Tenant": TenantSchema,
  "common.Conversation": ConversationSchema,
  "common.Message": MessageSchema,
  "plan.Task": TaskResourceSchema,
  "common.Assistant": AssistantSchema,
  "common.Tool": ToolResourceSchema,
  "uip.Interaction": InteractionResourceSchema,
  "plan.State": TaskStateSchema,
  "doc.Document": DocumentSchema,
  "doc.Chunk": ChunkSchema,
  "mem.Memory": MemorySchema,
} as const;

export type ResourceType = keyof typeof RESOURCE_SCHEMAS;
export type ResourceOf<T extends ResourceType> = z.output<(typeof RESOURCE_SCHEMAS)[T]>;
export type ResourceInputOf<T extends ResourceType> = z.input<(typeof RESOURCE_SCHEMAS)[T]>;
export type Tenant = ResourceOf<"common.Tenant">;
export type Conversation = ResourceOf<"common.Conversation">;
export type Message = ResourceOf<"common.Message">;
export type TaskResource = ResourceOf<"plan.Task">;
export type Assistant = ResourceOf<"common.Assistant">;
export type ToolResource = ResourceOf<"common.Tool">;
export type InteractionResource = ResourceOf<"uip.Interaction">;
export type TaskState = ResourceOf<"plan.State">;
export type DocumentResource = ResourceOf<"doc.Document">;
export type Chunk = ResourceOf<"doc.Chunk">;
export type MemoryResource = ResourceOf<"mem.Memory">;
export type AnyResource = { [T in ResourceType]: ResourceOf<T> }[ResourceType];

export const isResourceType = (t: unknown): t is ResourceType =>
  typeof t === "string" && t in RESOURCE_SCHEMAS;

/** Formats zod issues as `path: message` lines. */
export function formatIssues(error: z.ZodError): string[] {
  return error.issues.map((i) => `${i.path.length ? i.path.join(".") : "(root)"}: ${i.message}`);
}

/**
 * Validates a document and returns the resource of the type its `meta.type` names.
 * Throws ValidationError naming every bad field.
 */
export function parseResource(doc: unknown): AnyResource {
  const type = (doc as { meta?: { type?: unknown } } | null)?.meta?.type;
  if (!isResourceType(type)) {
    throw new ValidationError("Unknown resource type", [
      `meta.type: ${JSON.stringify(type)} is not one of ${Object.keys(RESOURCE_SCHEMAS).join(", ")}`,
    ]);
  }
  return parseResourceAs(type, doc);
}

export function parseResourceAs<T extends ResourceType>(type: T, doc: unknown): ResourceOf<T> {
  const result = RESOURCE_SCHEMAS[type].safeParse(doc);
  if (!result.success) throw new ValidationError(`Invalid ${type}`, formatIssues(result.error));
  return result.data as ResourceOf<T>;
}
