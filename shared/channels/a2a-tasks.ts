import { randomUUID } from "node:crypto";
import {
  type AgentCard,
  type CancelTaskRequest,
  type DeleteTaskPushNotificationConfigRequest,
  type GetExtendedAgentCardRequest,
  type GetTaskPushNotificationConfigRequest,
  type GetTaskRequest,
  type ListTaskPushNotificationConfigsRequest,
  type ListTasksRequest,
  type ListTasksResponse,
  type Message,
  type SendMessageRequest,
  type StreamResponse,
  type SubscribeToTaskRequest,
  type Task,
  type TaskPushNotificationConfig,
  TaskState,
} from "@a2a-js/sdk";
import {
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from "@a2a-js/sdk/errors";
import {
  type A2ARequestHandler,
  AgentEvent,
  type AgentExecutor,
  DefaultExecutionEventBusManager,
  DefaultRequestHandler,
  type ExecutionEventBus,
  type RequestContext,
  ResultManager,
  type ServerCallContext,
} from "@a2a-js/sdk/server";
import { isTerminal } from "../domain/task-state.ts";
import { isWithin, tenantUrn } from "../domain/urn.ts";
import type { Engine } from "../engine/engine.ts";
import type { NotifyService } from "../notify/service.ts";
import type { ArborLogger } from "../observability/logger.ts";
import {
  A2A_STATE,
  answerFrom,
  outcomeEvents,
  readOutcome,
  requestText,
  type Stamp,
  statusOf,
  taskNotFound,
  textPart,
  toA2aError,
  waitingInteractions,
} from "./a2a-mapping.ts";
import { A2aPush } from "./a2a-push.ts";
import {
  ArborContexts,
  type ArborLink,
  ArborTaskStore,
  byTenant,
  callerOf,
  isFinal,
  linkOf,
} from "./a2a-store.ts";
import { settled } from "./a2a-wait.ts";
import type { Authenticated } from "./api-keys.ts";

/**
 * Arbor behind the A2A SDK's request handler. The SDK keeps the protocol view (history, artifacts,
 * in Arbor's state store: a2a-store.ts, it outlives a restart); everything that matters is
 * Arbor's: an A2A task stands for one request's root task (its link is in the task's metadata,
 * `arbor.rootTaskId`), a contextId is the conversation's URN. Every entry checks its caller with
 * the engine (tenant boundary + policy) before anything is read or written, and the SDK never sees
 * another tenant's task: the store and the event buses are scoped by the caller's tenant, and a
 * task the caller may not read is not found.
 */
export interface A2aTasksOptions {
  engine: Engine;
  card: AgentCard;
  log: ArborLogger;
  /** How long one send waits for the request to end or ask (default 4 min; then it answers with the task working). */
  waitMs?: number;
  /** How often a waiting send reads the state without a wake-up (default 5 s: a lost notice costs at most this). */
  recheckMs?: number;
  newId?: () => string;
  /** Push notifications (a2a-push.ts); absent: push configs are refused (-32003). */
  notify?: NotifyService;
}

/** What a send hands its execution (the request context's state): the request it runs or continues. */
const STARTED = "arbor.a2a.started";
interface Started extends ArborLink {
  contextId: string;
}

export class ArborA2aTasks implements A2ARequestHandler {
  readonly #engine: Engine;
  readonly #log: ArborLogger;
  readonly #store: ArborTaskStore;
  readonly #inner: DefaultRequestHandler;
  readonly #buses = new DefaultExecutionEventBusManager(byTenant);
  readonly #waitMs: number;
  readonly #recheckMs: number;
  readonly #newId: () => string;
  readonly #stamp: Stamp;
  /** Sends waiting on their request, by A2A task id: a cancel stops the wait. */
  readonly #watches = new Map<string, AbortController>();
  /** Cancels in progress, by A2A task id: what the executor's cancel publishes. */
  readonly #cancels = new Map<string, { contextId: string; reason: string }>();
  /** contextIds the callers chose themselves (not a conversation URN), per tenant. */
  readonly #contexts: ArborContexts;
  readonly #push: A2aPush;

  constructor(options: A2aTasksOptions) {
    this.#engine = options.engine;
    this.#log = options.log;
    this.#waitMs = options.waitMs ?? 240_000;
    this.#recheckMs = options.recheckMs ?? 5_000;
    this.#newId = options.newId ?? randomUUID;
    this.#stamp = { newId: this.#newId, now: this.#engine.deps.clock };
    this.#store = new ArborTaskStore(this.#engine, this.#log);
    this.#contexts = new ArborContexts(this.#engine);
    this.#push = new A2aPush({ notify: options.notify, store: this.#store, log: this.#log });
    const executor: AgentExecutor = {
      execute: (rc, bus) => this.#execute(rc, bus),
      cancelTask: async (taskId, bus) => this.#canceled(taskId, bus),
    };
    this.#inner = new DefaultRequestHandler(options.card, this.#store, executor, this.#buses);
  }

  // ---- SendMessage: a new request, or the answer to what a task asks ---------------------------------

  async sendMessage(request: SendMessageRequest, context: ServerCallContext): Promise<Message | Task> {
    const who = callerOf(context);
    // A push config is checked before anything is written, and kept from the SDK (a2a-push.ts).
    const { params, pending } = this.#push.takeFromSend(request, context);
    const message = params.message;
    if (message?.messageId) {
      const started = message.taskId
        ? await this.#answer(message, context, who)
        : await this.#submit(message, who);
      if (started) context.state.set(STARTED, started);
    }
    // The SDK checks the rest (a message id, a task it can continue) and runs the execution.
    const answer = await this.#inner.sendMessage(params, context);
    await this.#push.afterSend(answer, pending, context);
    // Whatever the caller is told (an ACK with returnImmediately, or how the task stands) is on disk.
    await this.#engine.deps.untilDurable();
    return answer;
  }

  async #submit(message: Message, who: Authenticated): Promise<Started> {
    const text = requestText(message);
    const { contextId } = message;
    const tenant = who.caller.tenant;
    const noConversation = () =>
      new RequestMalformedError(
        `No conversation ${contextId} for this caller: omit contextId to start a new one`,
      );
    // Another tenant's conversation is one that does not exist, found so before anything is read.
    if (contextId?.startsWith("cld:") && !isWithin(contextId, tenantUrn(tenant))) throw noConversation();
    // A conversation URN continues that conversation; another contextId is the caller's own name for one.
    const conversationUrn = !contextId
      ? undefined
      : contextId.startsWith("cld:")
        ? contextId
        : await this.#contexts.conversationOf(tenant, contextId);
    let submitted: Awaited<ReturnType<Engine["submit"]>>;
    try {
      submitted = await this.#engine.submit({
        tenant,
        roles: who.caller.roles,
        actor: who.actor,
        text,
        mode: "eager",
        ...(conversationUrn ? { conversationUrn } : {}),
      });
    } catch (e) {
      throw toA2aError(e, who, {
        urn: conversationUrn ?? tenantUrn(tenant),
        error: noConversation,
      });
    }
    if (contextId && !conversationUrn) {
      const named = await this.#contexts.name(tenant, contextId, submitted.conversationUrn);
      if (named !== submitted.conversationUrn)
        this.#log.warn("A2A contextId was named by another send at the same time", {
          actor: who.actor.id,
          rootTaskId: submitted.rootTaskId,
        });
    }
    this.#log.info("A2A request submitted", { actor: who.actor.id, rootTaskId: submitted.rootTaskId });
    return {
      rootTaskId: submitted.rootTaskId,
      conversationUrn: submitted.conversationUrn,
      contextId: contextId || submitted.conversationUrn,
    };
  }

  /** A message on an existing task answers what it waits on; undefined leaves the refusal to the SDK. */
  async #answer(
    message: Message,
    context: ServerCallContext,
    who: Authenticated,
  ): Promise<Started | undefined> {
    const task = await this.#store.load(message.taskId, context);
    if (!task) throw new TaskNotFoundError(`Task not found: ${message.taskId}`);
    const link = linkOf(task);
    if (!link || isFinal(task) || (message.contextId && message.contextId !== task.contextId))
      return undefined;
    try {
      const waiting = await waitingInteractions(this.#engine, link.rootTaskId);
      if (waiting.length === 0)
        throw new UnsupportedOperationError(
          `Task ${task.id} is not waiting for input: wait until it ends or asks (input-required), ` +
            "or send a new message without a taskId",
        );
      const { interaction, response } = answerFrom(message, waiting);
      await this.#engine.respond(interaction.meta.id, response, who.actor, who.caller);
      this.#log.info("A2A answer recorded", { actor: who.actor.id, interaction: interaction.meta.id });
    } catch (e) {
      throw toA2aError(e, who, { urn: link.rootTaskId, error: taskNotFound(task.id) });
    }
    return { ...link, contextId: task.contextId };
  }

  // ---- the execution: publish the task, wait for Arbor, publish how it stands ------------------------

  async #execute(rc: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const who = callerOf(rc.context);
    const started = rc.context.state.get(STARTED) as Started | undefined;
    if (!started) throw new Error("No Arbor request is linked to this message");
    const ids = { taskId: rc.taskId, contextId: started.contextId };
    const { rootTaskId, conversationUrn } = started;
    const working = statusOf(this.#stamp, TaskState.TASK_STATE_WORKING, ids, [
      textPart(rc.task ? "Answer received; Arbor continues." : "Arbor is planning the request."),
    ]);
    bus.publish(
      AgentEvent.task(
        rc.task
          ? { ...rc.task, status: working }
          : {
              id: rc.taskId,
              contextId: started.contextId,
              status: working,
              artifacts: [],
              history: [],
              metadata: { arbor: { rootTaskId, conversationUrn } },
            },
      ),
    );
    const controller = new AbortController();
    this.#watches.get(rc.taskId)?.abort();
    this.#watches.set(rc.taskId, controller);
    try {
      const outcome = await settled(this.#engine, rootTaskId, who, controller.signal, {
        waitMs: this.#waitMs,
        recheckMs: this.#recheckMs,
        name: `a2a-wait ${this.#newId()}`,
      });
      // Canceled through CancelTask (which says so itself), or waited long enough: GetTask tells the rest.
      if (!outcome || controller.signal.aborted) return;
      await this.#engine.deps.untilDurable(); // an answer sent is an answer on disk
      for (const event of outcomeEvents(ids, outcome, this.#stamp)) bus.publish(event);
    } finally {
      if (this.#watches.get(rc.taskId) === controller) this.#watches.delete(rc.taskId);
    }
  }

  // ---- GetTask and CancelTask: checked by the engine, mapped from Arbor's state -----------------------

  async getTask(params: GetTaskRequest, context: ServerCallContext): Promise<Task> {
    const task = await this.#store.load(params.id, context);
    if (task && !this.#watches.has(task.id)) await this.#refresh(task, context);
    return this.#inner.getTask(params, context);
  }

  /** Brings a task nobody is waiting on up to Arbor's state (answered, canceled or ended elsewhere). */
  async #refresh(task: Task, context: ServerCallContext): Promise<void> {
    const link = linkOf(task);
    if (!link || isFinal(task)) return;
    const outcome = await readOutcome(this.#engine, link.rootTaskId, callerOf(context));
    if (A2A_STATE[outcome.state] === task.status?.state) return;
    const results = new ResultManager(this.#store, context);
    for (const event of outcomeEvents({ taskId: task.id, contextId: task.contextId }, outcome, this.#stamp))
      await results.processEvent(event);
  }

  async cancelTask(params: CancelTaskRequest, context: ServerCallContext): Promise<Task> {
    const who = callerOf(context);
    const task = await this.#store.load(params.id, context);
    if (!task) throw new TaskNotFoundError(`Task not found: ${params.id}`);
    const link = linkOf(task);
    if (link && !isFinal(task)) {
      let ended = false;
      try {
        const { view } = await this.#engine.result(link.rootTaskId, who);
        if (!view)
          throw new TaskNotCancelableError(
            `Task ${params.id} is still being planned: cancel it again in a moment`,
          );
        if (isTerminal(view.status)) {
          // Ended already: the caller learns how (a finished task is not canceled after the fact).
          ended = true;
          await this.#refresh(task, context);
        } else {
          await this.#engine.cancel(
            link.rootTaskId,
            who.actor,
            `canceled over A2A by ${who.actor.id}`,
            who.caller,
          );
          this.#log.info("A2A task canceled", { actor: who.actor.id, rootTaskId: link.rootTaskId });
        }
      } catch (e) {
        throw toA2aError(e, who, { urn: link.rootTaskId, error: taskNotFound(params.id) });
      }
      const outcome = await readOutcome(this.#engine, link.rootTaskId, who);
      const reason = outcome.state === "canceled" ? outcome.reason : "Task canceled";
      if (this.#buses.getByTaskId(params.id, context)) {
        this.#cancels.set(params.id, { contextId: task.contextId, reason });
      } else if (!ended) {
        // No execution of this process holds the task (it began before a restart): the SDK would
        // cancel it with a notice of its own; it says Arbor's instead, as the executor's cancel does.
        const ids = { taskId: params.id, contextId: task.contextId };
        await new ResultManager(this.#store, context).processEvent(this.#canceledEvent(ids, reason));
      }
    }
    try {
      const canceled = await this.#inner.cancelTask(params, context);
      await this.#engine.deps.untilDurable(); // a cancel acknowledged is a cancel on disk
      return canceled;
    } finally {
      this.#cancels.delete(params.id);
    }
  }

  /** The executor's cancel: the engine canceled the request already (cancelTask above). */
  #canceled(taskId: string, bus: ExecutionEventBus): void {
    const cancel = this.#cancels.get(taskId);
    this.#watches.get(taskId)?.abort();
    bus.publish(
      this.#canceledEvent({ taskId, contextId: cancel?.contextId ?? "" }, cancel?.reason ?? "Task canceled"),
    );
  }

  #canceledEvent(ids: { taskId: string; contextId: string }, reason: string) {
    return AgentEvent.statusUpdate({
      ...ids,
      status: statusOf(this.#stamp, TaskState.TASK_STATE_CANCELED, ids, [textPart(reason)]),
      metadata: undefined,
    });
  }

  // ---- the rest is the SDK's (streaming and push notifications are off in the card) ------------------

  getAgentCard(): Promise<AgentCard> {
    return this.#inner.getAgentCard();
  }
  getAuthenticatedExtendedAgentCard(params: GetExtendedAgentCardRequest, context: ServerCallContext) {
    return this.#inner.getAuthenticatedExtendedAgentCard(params, context);
  }
  listTasks(params: ListTasksRequest, context: ServerCallContext): Promise<ListTasksResponse> {
    return this.#inner.listTasks(params, context);
  }
  sendMessageStream(
    params: SendMessageRequest,
    context: ServerCallContext,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    return this.#inner.sendMessageStream(params, context);
  }
  resubscribe(
    params: SubscribeToTaskRequest,
    context: ServerCallContext,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    return this.#inner.resubscribe(params, context);
  }
  createTaskPushNotificationConfig(params: TaskPushNotificationConfig, context: ServerCallContext) {
    return this.#push.create(params, context);
  }
  getTaskPushNotificationConfig(params: GetTaskPushNotificationConfigRequest, context: ServerCallContext) {
    return this.#push.get(params, context);
  }
  listTaskPushNotificationConfigs(
    params: ListTaskPushNotificationConfigsRequest,
    context: ServerCallContext,
  ) {
    return this.#push.list(params, context);
  }
  deleteTaskPushNotificationConfig(
    params: DeleteTaskPushNotificationConfigRequest,
    context: ServerCallContext,
  ) {
    return this.#push.delete(params, context);
  }
}
