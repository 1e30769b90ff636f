import { type ListTasksRequest, type ListTasksResponse, type Task, TaskState } from "@a2a-js/sdk";
import {
  InMemoryTaskStore,
  type OwnerResolver,
  type ServerCallContext,
  type TaskStore,
  type User,
} from "@a2a-js/sdk/server";
import type { Engine } from "../engine/engine.ts";
import { ForbiddenError } from "../errors.ts";
import type { Authenticated } from "./api-keys.ts";

/** The SDK's user for an authenticated key: who calls, and what the key vouches for. */
export class ArborCaller implements User {
  constructor(readonly who: Authenticated) {}
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
    throw new Error("An A2A call reached Arbor without an authenticated caller");
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

/**
 * The protocol view of the A2A tasks (history, artifacts): in memory, per Arbor tenant, and
 * readable only by a caller the engine lets read the request (tenant boundary + policy). What a
 * task is, is Arbor's state; this keeps what the protocol adds to it.
 */
export class ArborTaskStore implements TaskStore {
  readonly #tasks = new InMemoryTaskStore(byTenant);
  constructor(readonly engine: Engine) {}

  save(task: Task, context: ServerCallContext): Promise<void> {
    return this.#tasks.save(task, context);
  }

  async load(taskId: string, context: ServerCallContext): Promise<Task | undefined> {
    const task = await this.#tasks.load(taskId, context);
    return task && (await this.#mayRead(task, context)) ? task : undefined;
  }

  async list(params: ListTasksRequest, context: ServerCallContext): Promise<ListTasksResponse> {
    const page = await this.#tasks.list(params, context);
    const tasks: Task[] = [];
    for (const task of page.tasks) if (await this.#mayRead(task, context)) tasks.push(task);
    return { ...page, tasks };
  }

  async #mayRead(task: Task, context: ServerCallContext): Promise<boolean> {
    const link = linkOf(task);
    if (!link) return false;
    try {
      await this.engine.result(link.rootTaskId, callerOf(context));
      return true;
    } catch (e) {
      if (e instanceof ForbiddenError) return false;
      throw e;
    }
  }
}
