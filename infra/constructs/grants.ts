import type { StepName } from "../../shared/engine/routes.ts";
import { ConfigError } from "../../shared/kernel/errors.ts";

/**
 * A function's rights as data: which actions on which of the stack's resources, and for DynamoDB
 * writes which items (their partition keys, `dynamodb:LeadingKeys`). The stack turns them into
 * IAM statements with the real ARNs (`grantStatements`); the offline tests put the same grants
 * around a function's SDK clients (test/support/iam-guard.ts), so a call the function makes on a
 * tested path and its grants cannot drift apart: a call outside them fails there as AWS would
 * fail it.
 *
 * Object keys and item keys are patterns with `*` (any characters, `/` included), as IAM reads
 * them. The resources bucket names objects by URN (`cld:common.Tenant.<t>/.../<Type>.<id>.json`),
 * the state table's items are `R#<record key>`, `S#<stream>` (events) and `I#<event id>`
 * (guards): shared/adapters/aws/dynamo-schema.ts.
 *
 * Tenants: one function serves every tenant, and IAM knows nothing of the tenant of the request
 * an invocation works for, so no grant here names one: scoping a role to a tenant would take an
 * STS AssumeRole per tenant and invocation (with session tags), a round trip and a credential
 * cache per tenant on every step. The tenant is enforced by the code (ResourceAccess and the
 * policy engine); what IAM bounds is the kind of thing a function may touch.
 */
export type GrantTarget =
  /** The resources bucket itself (ListBucket). */
  | { bucket: "resources" }
  /** Objects of the resources bucket whose key matches one of `keys`. */
  | { objects: readonly string[] }
  /** The policies bucket itself, or its bundle and checksum. */
  | { policies: "bucket" | "bundle" }
  /** The state table and its indexes (reads), or the table's items whose partition key matches `leadingKeys`. */
  | { table: "read" }
  | { items: readonly string[] }
  | { bus: true }
  | { embeddingModel: true }
  | { vectorIndex: true };

export interface Grant {
  readonly sid: string;
  readonly actions: readonly string[];
  readonly on: GrantTarget;
  /** Why the function needs it: the reviewer's line. */
  readonly why: string;
}

/** The item writes DynamoDB authorizes per item (TransactWriteItems included). */
export const ITEM_WRITES = [
  "dynamodb:PutItem",
  "dynamodb:UpdateItem",
  "dynamodb:DeleteItem",
  "dynamodb:ConditionCheckItem",
] as const;

/** Titan embeddings: every function that embeds (election, the index, the search built-ins). */
const EMBEDDINGS_GRANT: Grant = {
  sid: "Embeddings",
  actions: ["bedrock:InvokeModel"],
  on: { embeddingModel: true },
  why: "embedding a text: a task to elect its assistant, an output to index, a search's query",
};

/** The S3 Vectors index: opening it checks its dimension and the embedder named in its tags. */
const VECTOR_INDEX_GRANT: Grant = {
  sid: "VectorIndex",
  // QueryVectors returning metadata also needs GetVectors.
  actions: [
    "s3vectors:GetIndex",
    "s3vectors:ListTagsForResource",
    "s3vectors:PutVectors",
    "s3vectors:QueryVectors",
    "s3vectors:GetVectors",
  ],
  on: { vectorIndex: true },
  why: "the assistants and outputs indexed and searched, and the search built-ins",
};

/** Prefix listings of the resources bucket; a missing object is then a 404 (NoSuchKey), not a 403. */
const RESOURCE_LISTING: Grant = {
  sid: "ResourceListing",
  actions: ["s3:ListBucket"],
  on: { bucket: "resources" },
  why: "prefix listings; a missing object is then a 404, not a 403",
};

/** The policies bucket listed: a missing bundle must be NoSuchKey (the default policy decides), not a 403. */
const POLICY_LISTING: Grant = {
  sid: "PolicyListing",
  actions: ["s3:ListBucket"],
  on: { policies: "bucket" },
  why: "a missing bundle must be NoSuchKey (the default policy decides), not a 403",
};

/** The published OPA bundle and its checksum. */
const POLICY_BUNDLE: Grant = {
  sid: "PolicyBundle",
  actions: ["s3:GetObject"],
  on: { policies: "bundle" },
  why: "every tool call is decided by the published OPA bundle",
};

/** Any object of the resources bucket, read (the code checks the tenant). */
const resourceReads = (why: string): Grant => ({
  sid: "ResourceReads",
  actions: ["s3:GetObject"],
  on: { objects: ["*"] },
  why,
});

/** The state table's items and its indexes, read. */
const STATE_READS: Grant = {
  sid: "StateReads",
  actions: ["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"],
  on: { table: "read" },
  why: "tasks' views, events, claims and counters",
};

/**
 * The tool function: it holds the tools' secrets, talks to MCP servers and remote agents and reads
 * what they return, so it gets reads and only the writes of its own records: tool results stored
 * under their task, the tenant's Tool resources (its registry), the audit log, the registry's,
 * graph's and remote calls' records, and no delete but a retired tool's.
 */
export const TOOL_FUNCTION_GRANTS: readonly Grant[] = [
  resourceReads("a tool reads the calling tenant's resources (the tool service checks the tenant)"),
  RESOURCE_LISTING,
  {
    sid: "ToolResults",
    actions: ["s3:PutObject"],
    on: { objects: ["cld:*/plan.Task.*/common.Message.*"] },
    why: "a result too long to pass inline is stored under its task",
  },
  {
    sid: "ToolArtifacts",
    actions: ["s3:PutObject"],
    on: { objects: ["cld:*/plan.Task.*/common.Artifact.*"] },
    why: "a file a task makes (create_artifact) is stored under its task",
  },
  {
    sid: "ToolResources",
    actions: ["s3:PutObject", "s3:DeleteObject"],
    on: { objects: ["cld:common.Tenant.*/common.Tool.*"] },
    why: "a tenant's registered tools (tool-registry.ts): written, and removed when retired",
  },
  POLICY_LISTING,
  POLICY_BUNDLE,
  { ...STATE_READS, why: "calls' histories, the registry, graph and remote calls' records" },
  {
    sid: "OwnRecords",
    actions: ITEM_WRITES,
    on: {
      items: ["S#audit#*", "I#*", "R#toolregistry#*", "R#graph#*", "R#remote-call#*", "R#remote-call-of#*"],
    },
    why: "the audit log (and its guards), the registry's, the graph's and remote calls' records",
  },
  {
    sid: "Events",
    actions: ["events:PutEvents"],
    on: { bus: true },
    why: "the RESOURCE_PUT notices of what it writes",
  },
  EMBEDDINGS_GRANT,
  VECTOR_INDEX_GRANT,
];

/** The ARNs a grant's target stands for, in a stack or in a test world. */
export interface GrantArns {
  resourcesBucket: string;
  policiesBucket: string;
  table: string;
  indexes: readonly string[];
  bus: string;
  embeddingModel: string;
  vectorIndex: string;
}

/** A grant as an IAM statement's parts: resources and, for item writes, the LeadingKeys condition. */
export function statementOf(
  grant: Grant,
  arns: GrantArns,
): { sid: string; actions: string[]; resources: string[]; conditions?: Record<string, unknown> } {
  const on = grant.on;
  const base = { sid: grant.sid, actions: [...grant.actions] };
  if ("bucket" in on) return { ...base, resources: [arns.resourcesBucket] };
  if ("objects" in on) return { ...base, resources: on.objects.map((k) => `${arns.resourcesBucket}/${k}`) };
  if ("policies" in on)
    return {
      ...base,
      resources:
        on.policies === "bucket"
          ? [arns.policiesBucket]
          : [`${arns.policiesBucket}/bundle.tar.gz`, `${arns.policiesBucket}/bundle.tar.gz.sha256`],
    };
  if ("table" in on) return { ...base, resources: [arns.table, ...arns.indexes] };
  if ("items" in on)
    return {
      ...base,
      resources: [arns.table],
      conditions: { "ForAllValues:StringLike": { "dynamodb:LeadingKeys": [...on.items] } },
    };
  if ("bus" in on) return { ...base, resources: [arns.bus] };
  if ("embeddingModel" in on) return { ...base, resources: [arns.embeddingModel] };
  return { ...base, resources: [arns.vectorIndex] };
}

/** IAM's `*` (any run of characters) and `?` (one) in a resource or a condition's value. */
export function iamLike(pattern: string, value: string): boolean {
  const re = new RegExp(
    `^${pattern
      .split("")
      .map((c) => (c === "*" ? ".*" : c === "?" ? "." : c.replace(/[.+^${}()|[\]\\]/g, "\\$&")))
      .join("")}$`,
    "s",
  );
  return re.test(value);
}

/** Whether `grants` allow `action` on `resource` (with the item's partition key for item writes). */
export function allows(
  grants: readonly Grant[],
  arns: GrantArns,
  action: string,
  resource: string,
  leadingKey?: string,
): Grant | undefined {
  return grants.find((g) => {
    const s = statementOf(g, arns);
    if (!s.actions.some((a) => iamLike(a, action))) return false;
    if (!s.resources.some((r) => iamLike(r, resource))) return false;
    const keys = (s.conditions?.["ForAllValues:StringLike"] as Record<string, string[]> | undefined)?.[
      "dynamodb:LeadingKeys"
    ];
    return !keys || (leadingKey !== undefined && keys.some((k) => iamLike(k, leadingKey)));
  });
}

/**
 * Every engine opens the vector index as it starts (shared/runtime/aws/aws-embeddings.ts): its
 * dimension and the embedder named in its tags are checked before anything is embedded.
 */
const VECTOR_OPEN: Grant = {
  sid: "VectorIndexOpen",
  actions: ["s3vectors:GetIndex", "s3vectors:ListTagsForResource"],
  on: { vectorIndex: true },
  why: "the index's dimension and embedder, checked at the function's start",
};

const STEP_READS: readonly Grant[] = [
  resourceReads("a task reads its ancestors, its conversation, its assistant and its transcript"),
  RESOURCE_LISTING,
  STATE_READS,
  VECTOR_OPEN,
];

/** Item writes without delete: no step removes an item (claims and guards expire by their TTL), nor the notify function. */
const ITEM_WRITES_NO_DELETE = [
  "dynamodb:PutItem",
  "dynamodb:UpdateItem",
  "dynamodb:ConditionCheckItem",
] as const;

const REQUEST_TREE = "cld:common.Tenant.*/common.Conversation.*/common.Message.*/*";

/** A tenant's documents: each one's resource, its bytes (`.source`) and its chunks below it. */
const DOCUMENTS = "cld:common.Tenant.*/doc.Document.*";

/**
 * A document removed (shared/knowledge/documents.ts): its objects, its chunks' vectors and its
 * record. By the API (a delete asked for) and the watchdog (a delete a crash cut short).
 */
const DOCUMENT_REMOVAL: readonly Grant[] = [
  {
    sid: "DocumentDeletes",
    actions: ["s3:DeleteObject"],
    on: { objects: [DOCUMENTS] },
    why: "a document deleted: its resource, bytes and chunks",
  },
  {
    sid: "DocumentRecordDeletes",
    actions: ["dynamodb:DeleteItem"],
    on: { items: ["R#document#*"] },
    why: "a deleted document's state",
  },
  {
    sid: "ChunkVectorDeletes",
    actions: ["s3vectors:DeleteVectors"],
    on: { vectorIndex: true },
    why: "a deleted document's chunks taken out of the index",
  },
];

/** The objects of a request's tree: its tasks, their messages, questions and state. */
const REQUEST_TREE_WRITES: Grant = {
  sid: "RequestTreeWrites",
  actions: ["s3:PutObject"],
  on: { objects: [REQUEST_TREE] },
  why: "the tasks of a request, their transcripts, questions and state",
};

/**
 * A task's records: its events and their guards, its view, its parent's child counts, its usage,
 * and its request's leaf slots (a leaf's start takes one, its end frees it: engine/leaf-slots.ts).
 */
const TASK_RECORDS = ["S#cld:*", "I#*", "R#cld:*", "R#children#*", "R#usage#*", "R#leaves#*"] as const;

const taskWrites = (sid: string, own: readonly string[], why: string): Grant => ({
  sid,
  actions: ITEM_WRITES_NO_DELETE,
  on: { items: [...TASK_RECORDS, ...own] },
  why,
});

const EVENTS: Grant = {
  sid: "Events",
  actions: ["events:PutEvents"],
  on: { bus: true },
  why: "the engine's events and the RESOURCE_PUT notices of what it writes",
};

/** Querying the vector index (QueryVectors returning metadata also needs GetVectors). */
const VECTOR_QUERY: Grant = {
  sid: "VectorQuery",
  actions: ["s3vectors:QueryVectors", "s3vectors:GetVectors"],
  on: { vectorIndex: true },
  why: "a task elects its assistant, a leaf finds similar results",
};

/** Tasks are created (a plan, corrective subtasks) and started: elected, counted, announced. */
const TASK_MAKING: readonly Grant[] = [REQUEST_TREE_WRITES, EVENTS, EMBEDDINGS_GRANT, VECTOR_QUERY];

/** What a leaf's turn writes beside a task's records: its turn and call claims, its activities, calls handed to remote agents, the audit of tools run in the step, and its parent's evaluation. */
const LEAF_RECORDS = [
  "R#turn#*",
  "R#call#*",
  "R#eval#*",
  "R#activity#*",
  "R#remote-call#*",
  "R#remote-call-of#*",
  "S#audit#*",
] as const;

/** A leaf's inner loop (its first turn in the ready step, the next ones in the turn step). */
const LEAF_STEP: readonly Grant[] = [
  ...STEP_READS,
  ...TASK_MAKING,
  taskWrites("TaskRecords", LEAF_RECORDS, "a leaf's turns; the parent judged when its last child ends"),
];

/**
 * The engine steps, a function per route (shared/engine/routes.ts), each with the rights its route
 * uses and no more: what the offline tests drive through every route (test/integration/aws-world.ts
 * holds each route's calls to these grants) and what the code of the route can reach.
 *
 * Every step reads every object and item (a task reads its ancestors, its conversation, its
 * assistant). No step deletes an object or an item. Object writes stay inside the request trees
 * (`cld:<tenant>/common.Conversation.<c>/common.Message.<m>/...`: tasks, their messages, questions
 * and state), so a step misled by a hostile tool result cannot rewrite a tenant's team, assistants,
 * tools, keys or conversations. Item writes name their families (dynamo-schema.ts): a task's events
 * (`S#cld:`), their guards (`I#`), views (`R#cld:`), child counts and usage; and each route its own.
 */
export const STEP_GRANTS: Readonly<Record<StepName, readonly Grant[]>> = {
  // The plan step runs the request's first leaf itself (engine.ts): a leaf's records too.
  plan: [
    ...STEP_READS,
    ...TASK_MAKING,
    taskWrites(
      "TaskRecords",
      ["R#plan#*", ...LEAF_RECORDS],
      "the plan's tasks, the request's plan marker, and its first leaf's turns",
    ),
  ],
  ready: LEAF_STEP,
  turn: LEAF_STEP,
  resume: [
    ...STEP_READS,
    ...TASK_MAKING,
    taskWrites("TaskRecords", ["R#eval#*"], "a task resumed or canceled, its parent judged"),
  ],
  supervise: [
    ...STEP_READS,
    ...TASK_MAKING,
    taskWrites("TaskRecords", ["R#eval#*"], "a parent judged, and its corrective subtasks"),
  ],
  "index-output": [
    ...STEP_READS,
    EMBEDDINGS_GRANT,
    {
      sid: "VectorWrites",
      actions: ["s3vectors:PutVectors"],
      on: { vectorIndex: true },
      why: "an output is indexed, for later tasks to find",
    },
  ],
  documents: [
    ...STEP_READS,
    EMBEDDINGS_GRANT,
    EVENTS,
    {
      sid: "DocumentObjects",
      actions: ["s3:PutObject", "s3:DeleteObject"],
      on: { objects: [DOCUMENTS] },
      why: "a document's chunks and its resource written; an older version's chunks removed",
    },
    {
      sid: "DocumentRecords",
      actions: ITEM_WRITES_NO_DELETE,
      on: { items: ["R#document#*"] },
      why: "a document's state: processing, its progress, ready or failed",
    },
    {
      sid: "ChunkVectors",
      actions: ["s3vectors:PutVectors", "s3vectors:DeleteVectors"],
      on: { vectorIndex: true },
      why: "a document's chunks indexed; an older version's taken out",
    },
  ],
  activity: [
    ...STEP_READS,
    {
      sid: "ActivityRecords",
      actions: ITEM_WRITES_NO_DELETE,
      on: { items: ["R#activity#*"] },
      why: "an activity's attempts and its outcome",
    },
  ],
};

/** Steps that send no command (EngineCommands): indexing an output or a document, running an activity (fire and forget). */
export const SENDS_NO_COMMAND: ReadonlySet<string> = new Set<StepName>([
  "index-output",
  "activity",
  "documents",
]);

/**
 * The experiments' driver (functions/engine-step.ts on its own rule): it submits a case's requests to
 * their own conversations as the API would, answers their questions and keeps the experiment's records.
 */
export const EVAL_STEP_GRANTS: readonly Grant[] = [
  ...STEP_READS,
  {
    sid: "ConversationWrites",
    actions: ["s3:PutObject"],
    on: { objects: ["cld:common.Tenant.*/common.Conversation.*"] },
    why: "a case's conversation, its requests and the answers to their questions",
  },
  EVENTS,
  EMBEDDINGS_GRANT,
  {
    sid: "ExperimentRecords",
    actions: ITEM_WRITES_NO_DELETE,
    on: {
      items: [...TASK_RECORDS, "R#plan#*", "R#request#*", "R#conversation#*", "R#answer#*", "R#eval-*"],
    },
    why: "a case's requests (as the API records them) and the experiment's plan, runs and summary",
  },
];

/** The grants of a step function (a route's, or the experiments' driver: "eval"). */
export function stepGrants(route: string): readonly Grant[] {
  if (route === "eval") return EVAL_STEP_GRANTS;
  const grants = STEP_GRANTS[route as StepName];
  if (!grants)
    throw new ConfigError(
      `No grants for the step ${route}: add its route to STEP_GRANTS (infra/constructs/grants.ts)`,
    );
  return grants;
}

/**
 * The watchdog: it re-sends what a lost command left undone (reads, then the command again), and
 * sweeps the running experiments as the experiments' driver does (the same code: advancing runs,
 * launching the next), so it holds the driver's rights.
 */
export const WATCHDOG_GRANTS: readonly Grant[] = [
  ...EVAL_STEP_GRANTS,
  // Documents a crash left half processed or half deleted (knowledge/documents.ts repairDocuments).
  ...DOCUMENT_REMOVAL,
  {
    sid: "DocumentRecords",
    actions: ITEM_WRITES_NO_DELETE,
    on: { items: ["R#document#*", "R#projection#*"] },
    why: "a document's state, while a delete a crash cut short is finished; the task index's cursor",
  },
  {
    sid: "TaskIndex",
    actions: ["s3vectors:PutVectors", "s3vectors:DeleteVectors"],
    on: { vectorIndex: true },
    why:
      "the tasks, questions, requests and conversations recorded since the last pass, and the tools of a " +
      "changed registration, indexed for search; a tool no longer registered taken out " +
      "(knowledge/resource-index.ts, tools/service/tool-index.ts)",
  },
  {
    sid: "ToolRegistrations",
    actions: ITEM_WRITES_NO_DELETE,
    on: { items: ["R#toolregistry#*"] },
    why: "a tenant's registration of tools marked indexed, with the names the index holds",
  },
];

/**
 * The API function, the front door: it writes what people and admins send (the tenant and its team's
 * assistants, conversations and their messages, answers to questions, keys, console sessions,
 * subscriptions, datasets and experiments), indexes a team's assistants, and reads the policy bundle
 * that decides. No delete of an object; the items it deletes are a signed-out session, a revoked key
 * and a deleted dataset.
 */
export const API_GRANTS: readonly Grant[] = [
  resourceReads("what a caller reads, and the health check's probe"),
  RESOURCE_LISTING,
  {
    sid: "TenantWrites",
    actions: ["s3:PutObject"],
    on: { objects: ["cld:common.Tenant.*"] },
    why: "a tenant, its team's assistants, its conversations and messages, answers to questions",
  },
  POLICY_LISTING,
  { ...POLICY_BUNDLE, why: "a request, a read and an answer are decided by the published OPA bundle" },
  STATE_READS,
  {
    sid: "Records",
    actions: ITEM_WRITES_NO_DELETE,
    on: { items: ["R#*", "S#*", "I#*"] },
    why: "requests, conversations, keys, sessions, subscriptions, deliveries, feeds and experiments",
  },
  {
    sid: "RecordDeletes",
    actions: ["dynamodb:DeleteItem"],
    on: { items: ["R#console-session#*", "R#apikey#*", "R#eval-dataset#*"] },
    why: "a signed-out console session, a revoked key, a deleted dataset",
  },
  EVENTS,
  EMBEDDINGS_GRANT,
  VECTOR_OPEN,
  { ...VECTOR_QUERY, why: "GET /v1/search: what the tenant knows, by meaning" },
  ...DOCUMENT_REMOVAL.filter((g) => g.sid !== "ChunkVectorDeletes"),
  {
    sid: "TeamIndex",
    actions: ["s3vectors:PutVectors", "s3vectors:DeleteVectors"],
    on: { vectorIndex: true },
    why: "a team's assistants indexed for election, and those it drops taken out; a deleted document's chunks",
  },
];

/**
 * The notify function: it reads tasks and answers, and writes only the notify path's records
 * (subscriptions, deliveries, their lanes and secrets) and the chat threads it posts to; no event,
 * no model, no vector, no delete. Its chat secret's read is its own policy (ChatSecretAccess).
 */
export const NOTIFY_GRANTS: readonly Grant[] = [
  {
    sid: "NotifyAnswers",
    actions: ["s3:GetObject"],
    on: { objects: ["*"] },
    why: "a notification carries the request's answer",
  },
  RESOURCE_LISTING,
  { ...STATE_READS, why: "requests, their tasks, subscriptions and deliveries" },
  {
    sid: "NotifyRecords",
    actions: ITEM_WRITES_NO_DELETE,
    on: { items: ["R#notify-*", "R#chat-thread#*"] },
    why: "subscriptions, deliveries, their lanes and signing secrets, and the chat threads it posts to",
  },
];
