import { createHash } from "node:crypto";
import { type ListTasksRequest, type ListTasksResponse, Task, TaskState } from "@a2a-js/sdk";
import {
  InMemoryTaskStore,
  type OwnerResolver,
  type ServerCallContext,
  type TaskStore,
  type User,
} from "@a2a-js/sdk/server";
import type { Engine } from "../../engine/engine.ts";
import { ArborError, ConflictError } from "../../kernel/errors.ts";
import type { ArborLogger } from "../../kernel/logger.ts";
import type { Authenticated } from "../../ports/key-store.ts";
import { collectPages, type StateRecord, type StateStore } from "../../ports/state-store.ts";

/** The SDK's user for an authenticated key: who calls, and what the key vouches for. */
export class ArborCaller implements User {
  readonly who: Authenticated;

  constructor(who: Authenticated) {
    this.who = who;
  }

  get isAuthenticated(): boolean {
    return true;
  }
  get userName(): string {
    return this.who.actor.id;
  }
}

export function callerOf(context: ServerCallContext): Authenticated {
  const user = context.user;
  if (!(user instanceof ArborCaller))
    // Cannot happen: a2a-server.ts answers 401 before any call without a known key reaches the SDK.
    throw new ArborError("INTERNAL", "An A2A call reached Arbor without an authenticated caller");
  return user.who;
}

/** Tasks and event buses are kept per Arbor tenant: within it, the policy decides. */
export const byTenant: OwnerResolver = (context) =>
  context.user instanceof ArborCaller ? `tenant:${context.user.who.caller.tenant}` : "";

/** The A2A task's link to Arbor's request, in the task's metadata. */
export interface ArborLink {
  rootTaskId: string;
  conversationUrn: string;
}
export function linkOf(task: Task): ArborLink | undefined {
  const link: unknown = task.metadata?.arbor;
  const { rootTaskId, conversationUrn } = (link ?? {}) as Partial<Record<keyof ArborLink, unknown>>;
  return typeof rootTaskId === "string" && typeof conversationUrn === "string"
    ? { rootTaskId, conversationUrn }
    : undefined;
}

const TERMINAL: readonly TaskState[] = [
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_REJECTED,
];
export const isFinal = (task: Task) =>
  TERMINAL.includes(task.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED);

// ---- the records ----------------------------------------------------------------------------------

/**
 * The protocol view lives in Arbor's state store, so a restart forgets none of it:
 *
 *   a2a-task#<tenant>#<taskId>          kind a2a-task, parent a2a-tasks#<tenant> (ListTasks pages it)
 *   a2a-context#<tenant>#<contextId>    kind a2a-context: a contextId the caller chose -> its conversation
 *
 * Neither has a status: nothing lists them by one (one index write less per save).
 */
export const A2A_TASK_KIND = "a2a-task";
export const A2A_CONTEXT_KIND = "a2a-context";
export const a2aTaskKey = (tenant: string, taskId: string) => `a2a-task#${tenant}#${taskId}`;
export const a2aTasksParent = (tenant: string) => `a2a-tasks#${tenant}`;
/**
 * The longest id a key holds as it is (a DynamoDB key is at most 1-2 KB). Task ids are the SDK's
 * UUIDs; a longer contextId is named by its hash.
 */
const MAX_KEYED_ID = 200;
const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");
export const a2aContextKey = (tenant: string, contextId: string) =>
  `a2a-context#${tenant}#${contextId.length <= MAX_KEYED_ID ? contextId : `sha256:${sha256(contextId)}`}`;

/** An a2a-task record's data: the SDK's JSON form of the task (Task.toJSON), schema 1. */
interface TaskRecordData {
  v: 1;
  task: unknown;
}
/** An a2a-context record's data. */
interface ContextRecordData {
  v: 1;
  contextId: string;
  conversationUrn: string;
}

/**
 * How large an a2a-task record may get: under the 350 KB the state store takes per record
 * (MAX_ITEM_BYTES in adapters/shared/state-store-helpers.ts; a DynamoDB item is at most 400 KB,
 * keys and indexes included), with room to spare. A task past it loses its oldest history
 * messages (see taskRecordData); status, artifacts and the link to Arbor's request are kept.
 */
export const A2A_TASK_RECORD_BUDGET = 320_000;

const bytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value));

/**
 * The record data for a task, and how many of its oldest history messages were left out to keep
 * it within `budget` bytes: the newest messages are what a caller continues from, and the request
 * itself is Arbor's (its conversation keeps every message). A task still too large without any
 * history is refused by the store (TooLargeError).
 */
export function taskRecordData(
  task: Task,
  budget = A2A_TASK_RECORD_BUDGET,
): { data: TaskRecordData; dropped: number } {
  const json = Task.toJSON(task) as Record<string, unknown>;
  const history: unknown[] = Array.isArray(json.history) ? json.history : [];
  let data: TaskRecordData = { v: 1, task: json };
  let size = bytes(data);
  let dropped = 0;
  while (size > budget && dropped < history.length) {
    // Drop the oldest messages worth the excess (each also takes its comma), then measure again.
    let excess = size - budget;
    while (excess > 0 && dropped < history.length) excess -= bytes(history[dropped++]) + 1;
    data = { v: 1, task: { ...json, history: history.slice(dropped) } };
    size = bytes(data);
  }
  return { data, dropped };
}

function taskOf(record: StateRecord): Task {
  const data = record.data as Partial<TaskRecordData> | null;
  if (data?.v !== 1 || typeof data.task !== "object" || data.task === null)
    throw new ArborError(
      "INTERNAL",
      `A2A task record ${record.key} has no task of schema 1: it was written by another version of Arbor, or damaged`,
      { details: { key: record.key } },
    );
  try {
    return Task.fromJSON(data.task);
  } catch (cause) {
    throw new ArborError("INTERNAL", `A2A task record ${record.key} is not an A2A task: it is damaged`, {
      cause,
      details: { key: record.key },
    });
  }
}

const tenantOfCall = (context: ServerCallContext): string => callerOf(context).caller.tenant;

/** Saves of one task are ordered by the SDK; a conflict (another process, a racing save) is retried. */
const SAVE_ATTEMPTS = 5;

/**
 * The protocol view of the A2A tasks (history, artifacts), per Arbor tenant, in Arbor's state
 * store; readable only by a caller the engine lets read the request (tenant boundary + policy).
 * What a task is, is Arbor's state; this keeps what the protocol adds to it.
 *
 * No copy is kept in memory: every load reads the record (the SDK's ResultManager re-loads before
 * each merge anyway, the engine check that follows reads more than this, and a copy could go stale
 * when two servers share one store). ListTasks reads the tenant's records and pages them with the
 * SDK's own InMemoryTaskStore, so filters, order and page tokens are exactly the SDK's.
 */
export class ArborTaskStore implements TaskStore {
  readonly #state: StateStore;
  readonly #log: ArborLogger;
  readonly engine: Engine;

  constructor(engine: Engine, log: ArborLogger = engine.deps.log) {
    this.engine = engine;
    this.#state = engine.deps.state;
    this.#log = log;
  }

  /** Overwrites the task (as the SDK's stores do), conditionally: read the version, put on it. */
  async save(task: Task, context: ServerCallContext): Promise<void> {
    const tenant = tenantOfCall(context);
    const key = a2aTaskKey(tenant, task.id);
    const { data, dropped } = taskRecordData(task);
    if (dropped > 0) this.#log.warn("A2A task history trimmed to fit a record", { taskId: task.id, dropped });
    for (let attempt = 1; ; attempt++) {
      const current = await this.#state.get(key);
      try {
        await this.#state.transact([
          {
            op: "put",
            record: {
              key,
              kind: A2A_TASK_KIND,
              parent: a2aTasksParent(tenant),
              updatedAt: this.engine.deps.clock().toISOString(),
              data,
            },
            expectedVersion: current?.version ?? 0,
          },
        ]);
        return;
      } catch (e) {
        if (!(e instanceof ConflictError) || attempt >= SAVE_ATTEMPTS) throw e;
      }
    }
  }

  async load(taskId: string, context: ServerCallContext): Promise<Task | undefined> {
    if (taskId.length > MAX_KEYED_ID) return undefined; // no task of ours has such an id
    const record = await this.#state.get(a2aTaskKey(tenantOfCall(context), taskId));
    const task = record && taskOf(record);
    return task && (await this.#mayRead(task, context)) ? task : undefined;
  }

  async list(params: ListTasksRequest, context: ServerCallContext): Promise<ListTasksResponse> {
    const parent = a2aTasksParent(tenantOfCall(context));
    const records = await collectPages((cursor) =>
      this.#state.byParent(parent, cursor === undefined ? { limit: 1000 } : { limit: 1000, cursor }),
    );
    const view = new InMemoryTaskStore(byTenant);
    for (const record of records) {
      let task: Task;
      try {
        task = taskOf(record);
      } catch (error) {
        this.#log.error("Skipping an A2A task that could not be read", { key: record.key, error });
        continue;
      }
      // Only what the caller may read is paged and counted: another's tasks are neither shown nor
      // counted (totalSize), nor do they leave the caller's pages short.
      if (await this.#mayRead(task, context)) await view.save(task, context);
    }
    return view.list(params, context);
  }

  async #mayRead(task: Task, context: ServerCallContext): Promise<boolean> {
    const link = linkOf(task);
    return link !== undefined && (await this.engine.mayRead(link.rootTaskId, callerOf(context)));
  }
}

/** How many caller-chosen contextIds stay in memory (the store has them all). */
const CACHED_CONTEXTS = 10_000;

/**
 * The contextIds callers chose themselves (not a conversation URN), each naming one conversation
 * of the caller's tenant: in the state store, with the ones in use cached in memory.
 */
export class ArborContexts {
  readonly #state: StateStore;
  readonly #clock: () => Date;
  readonly #cache = new Map<string, string>();

  constructor(engine: Engine) {
    this.#state = engine.deps.state;
    this.#clock = engine.deps.clock;
  }

  /** The conversation a tenant's contextId names, or undefined when it names none yet. */
  async conversationOf(tenant: string, contextId: string): Promise<string | undefined> {
    const key = a2aContextKey(tenant, contextId);
    const known = this.#cache.get(key);
    if (known) return known;
    const data = (await this.#state.get<Partial<ContextRecordData>>(key))?.data;
    // A hashed key names this contextId only if the record says so.
    if (data?.contextId !== contextId || typeof data.conversationUrn !== "string") return undefined;
    this.#remember(key, data.conversationUrn);
    return data.conversationUrn;
  }

  /**
   * Names a new conversation by the caller's contextId. When another send named it first (two
   * first messages at once), that one stands: the conversation it names is returned.
   */
  async name(tenant: string, contextId: string, conversationUrn: string): Promise<string> {
    const key = a2aContextKey(tenant, contextId);
    const data: ContextRecordData = { v: 1, contextId, conversationUrn };
    try {
      await this.#state.transact([
        {
          op: "put",
          record: { key, kind: A2A_CONTEXT_KIND, updatedAt: this.#clock().toISOString(), data },
          expectedVersion: 0,
        },
      ]);
    } catch (e) {
      if (!(e instanceof ConflictError)) throw e;
      const first = await this.conversationOf(tenant, contextId);
      if (first) return first;
      throw e;
    }
    this.#remember(key, conversationUrn);
    return conversationUrn;
  }

  #remember(key: string, conversationUrn: string): void {
    this.#cache.delete(key);
    this.#cache.set(key, conversationUrn);
    if (this.#cache.size > CACHED_CONTEXTS) this.#cache.delete(this.#cache.keys().next().value as string);
  }
}
