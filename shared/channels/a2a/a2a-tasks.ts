import { randomUUID } from "node:crypto";
import type {
  AgentCard,
  CancelTaskRequest,
  DeleteTaskPushNotificationConfigRequest,
  GetExtendedAgentCardRequest,
  GetTaskPushNotificationConfigRequest,
  GetTaskRequest,
  ListTaskPushNotificationConfigsRequest,
  ListTasksRequest,
  ListTasksResponse,
  Message,
  SendMessageRequest,
  StreamResponse,
  SubscribeToTaskRequest,
  Task,
  TaskPushNotificationConfig,
} from "@a2a-js/sdk";
import { TaskState } from "@a2a-js/sdk";
import { TaskNotCancelableError, TaskNotFoundError } from "@a2a-js/sdk/errors";
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
import { isTerminal } from "../../domain/task-state.ts";
import type { Engine } from "../../engine/engine.ts";
import { usageOf } from "../../engine/usage.ts";
import { ArborError, ForbiddenError } from "../../kernel/errors.ts";
import type { ArborLogger } from "../../kernel/logger.ts";
import type { NotifyService } from "../../notify/service.ts";
import {
  A2A_STATE,
  checkParts,
  isUnderway,
  outcomeEvents,
  outputModes,
  outputModesOf,
  readOutcome,
  type Stamp,
  SUBMITTED_TEXT,
  statusOf,
  taskNotFound,
  textPart,
  toA2aError,
} from "../../protocols/a2a/a2a-mapping.ts";
import { extendedCard } from "./a2a-card.ts";
import { A2aPush } from "./a2a-push.ts";
import { answerTask, type SendDeps, type Started, submitRequest } from "./a2a-send.ts";
import { ArborContexts, ArborTaskStore, byTenant, callerOf, isFinal, linkOf } from "./a2a-store.ts";
import { type A2aStreamOptions, ArborA2aStreams } from "./a2a-streams.ts";
import { settled } from "./a2a-wait.ts";

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
  /** The card the SDK's handler reads (capabilities, interfaces); its URL is not read. */
  card: AgentCard;
  /** The card as callers see it (its public URL): what the extended card adds to. Default: `card`. */
  publicCard?: () => AgentCard;
  log: ArborLogger;
  /** How long one send waits for the request to end or ask (default 4 min; then it answers with the task working). */
  waitMs?: number;
  /** How often a waiting send reads the state without a wake-up (default 5 s: a lost notice costs at most this). */
  recheckMs?: number;
  newId?: () => string;
  /** How streams end (a2a-streams.ts): live, or bounded behind API Gateway. */
  streams?: Pick<A2aStreamOptions, "mode" | "maxWaitMs" | "recheckMs">;
  /** Push notifications (a2a-push.ts); absent: push configs are refused (-32003). */
  notify?: NotifyService;
}

/** What a send hands its execution (the request context's state): the request it runs or continues. */
const STARTED = "arbor.a2a.started";
/** Set when the caller asked for the answer at once (returnImmediately; 0.3: blocking false). */
const IMMEDIATE = "arbor.a2a.immediate";

export class ArborA2aTasks implements A2ARequestHandler {
  readonly #engine: Engine;
  readonly #publicCard: () => AgentCard;
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
  readonly #streams: ArborA2aStreams;
  readonly #push: A2aPush;

  constructor(options: A2aTasksOptions) {
    this.#engine = options.engine;
    this.#publicCard = options.publicCard ?? (() => options.card);
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
    this.#streams = new ArborA2aStreams({
      ...options.streams,
      engine: this.#engine,
      log: this.#log,
      stamp: this.#stamp,
    });
  }

  // ---- SendMessage: a new request, or the answer to what a task asks ---------------------------------

  async sendMessage(request: SendMessageRequest, context: ServerCallContext): Promise<Message | Task> {
    // A push config is checked before anything is written, and kept from the SDK (a2a-push.ts).
    const { params, pending } = this.#push.takeFromSend(request, context);
    await this.#begin(params, context);
    // The SDK checks the rest (a message id, a task it can continue) and runs the execution.
    const answer = await this.#inner.sendMessage(params, context);
    await this.#push.afterSend(answer, pending, context);
    // Whatever the caller is told (an ACK with returnImmediately, or how the task stands) is on disk.
    await this.#engine.deps.untilDurable();
    return answer;
  }

  /**
   * What every send does before the SDK runs its execution (SendMessage, and a streaming send
   * alike): refuses what Arbor cannot do, before anything is written, then submits the new request
   * or records the answer, and hands the execution the request and the caller's output modes.
   */
  async #begin(params: SendMessageRequest, context: ServerCallContext): Promise<void> {
    const who = callerOf(context);
    const { message, configuration } = params;
    // Nothing the caller asked for is dropped: what Arbor cannot do is refused before anything is
    // written (a push config was taken out and checked by sendMessage, a2a-push.ts).
    const accepted = configuration?.acceptedOutputModes ?? [];
    const modes = outputModes(accepted); // -32005 when it names nothing Arbor answers in
    if (message?.messageId) {
      checkParts(message); // -32005 for content Arbor does not take
      const deps: SendDeps = {
        engine: this.#engine,
        store: this.#store,
        contexts: this.#contexts,
        log: this.#log,
      };
      const started = message.taskId
        ? await answerTask(deps, message, context, who)
        : await submitRequest(deps, message, who);
      if (started) context.state.set(STARTED, accepted.length ? { ...started, outputModes: modes } : started);
    }
    if (configuration?.returnImmediately) context.state.set(IMMEDIATE, true);
  }

  // ---- the execution: publish the task, wait for Arbor, publish how it stands ------------------------

  async #execute(rc: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const who = callerOf(rc.context);
    const started = rc.context.state.get(STARTED) as Started | undefined;
    // Cannot happen: the SDK runs an execution only after the send (above) linked its request.
    if (!started) throw new ArborError("INTERNAL", "No Arbor request is linked to this A2A message");
    const ids = { taskId: rc.taskId, contextId: started.contextId };
    const { rootTaskId, conversationUrn } = started;
    // A new request is submitted (recorded, not planned yet); an answer puts its task back to work.
    const status = rc.task
      ? statusOf(this.#stamp, A2A_STATE.working, ids, [textPart("Answer received; Arbor continues.")])
      : statusOf(this.#stamp, A2A_STATE.submitted, ids, [textPart(SUBMITTED_TEXT)]);
    const kept = rc.task?.metadata ?? {};
    const modes = started.outputModes ?? outputModesOf(kept);
    const metadata = { ...kept, arbor: { rootTaskId, conversationUrn, outputModes: modes } };
    bus.publish(
      AgentEvent.task(
        rc.task
          ? { ...rc.task, status, metadata }
          : { id: rc.taskId, contextId: started.contextId, status, artifacts: [], history: [], metadata },
      ),
    );
    // An immediate answer holds nothing: GetTask brings the task up to Arbor's state (#refresh).
    if (rc.context.state.get(IMMEDIATE)) return;
    const controller = new AbortController();
    this.#watches.get(rc.taskId)?.abort();
    this.#watches.set(rc.taskId, controller);
    try {
      let outcome = await settled(this.#engine, rootTaskId, who, controller.signal, {
        waitMs: this.#waitMs,
        recheckMs: this.#recheckMs,
        name: `a2a-wait ${this.#newId()}`,
      });
      if (controller.signal.aborted) return; // canceled through CancelTask, which says so itself
      // Waited long enough: the caller is told how the request stands now (submitted or working).
      outcome ??= await readOutcome(this.#engine, rootTaskId, who);
      if (isUnderway(outcome) && A2A_STATE[outcome.state] === status.state) return;
      await this.#engine.deps.untilDurable(); // an answer sent is an answer on disk
      const arbor = { rootTaskId, conversationUrn, outputModes: modes, usage: await this.#usage(rootTaskId) };
      for (const event of outcomeEvents(ids, outcome, this.#stamp, modes, { arbor })) bus.publish(event);
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
    const ids = { taskId: task.id, contextId: task.contextId };
    const modes = outputModesOf(task.metadata);
    const arbor = { ...link, outputModes: modes, usage: await this.#usage(link.rootTaskId) };
    for (const event of outcomeEvents(ids, outcome, this.#stamp, modes, { arbor }))
      await results.processEvent(event);
  }

  /** The request's tokens and cost so far, as the task's metadata shows them (`arbor.usage`). */
  async #usage(rootTaskId: string) {
    const u = await usageOf(this.#engine.deps, rootTaskId);
    return {
      inputTokens: u.inputTokens,
      outputTokens: u.outputTokens,
      costUsd: u.costUsd,
      unpricedCalls: u.unpricedCalls,
    };
  }

  async cancelTask(params: CancelTaskRequest, context: ServerCallContext): Promise<Task> {
    const who = callerOf(context);
    const task = await this.#store.load(params.id, context);
    if (!task) throw new TaskNotFoundError(`Task not found: ${params.id}`);
    // An ended task (completed, failed, or canceled already) is not cancelable: a second cancel
    // is refused as the first cancel of a completed task is (the SDK would answer it as a success).
    if (isFinal(task)) throw notCancelable(task);
    const link = linkOf(task);
    if (link) {
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
      // It ended before this cancel (elsewhere, or before the task was read again): how is on the task now.
      if (ended) throw notCancelable((await this.#store.load(params.id, context)) ?? task);
      const outcome = await readOutcome(this.#engine, link.rootTaskId, who);
      const reason = outcome.state === "canceled" ? outcome.reason : "Task canceled";
      if (this.#buses.getByTaskId(params.id, context)) {
        this.#cancels.set(params.id, { contextId: task.contextId, reason });
      } else {
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
      status: statusOf(this.#stamp, A2A_STATE.canceled, ids, [textPart(reason)]),
      metadata: undefined,
    });
  }

  // ---- the extended card: the card, and what the caller's key is -------------------------------------

  async getAuthenticatedExtendedAgentCard(
    _params: GetExtendedAgentCardRequest,
    context: ServerCallContext,
  ): Promise<AgentCard> {
    const who = callerOf(context);
    let team: Awaited<ReturnType<Engine["team"]>> | undefined;
    try {
      team = await this.#engine.team(who.caller.tenant, who);
    } catch (e) {
      if (!(e instanceof ForbiddenError)) throw e; // the team is its admins' to read
    }
    return extendedCard(this.#publicCard(), who, team);
  }

  // ---- the rest is the SDK's (streaming and push notifications are off in the card) ------------------

  getAgentCard(): Promise<AgentCard> {
    return this.#inner.getAgentCard();
  }
  listTasks(params: ListTasksRequest, context: ServerCallContext): Promise<ListTasksResponse> {
    return this.#inner.listTasks(params, context);
  }
  // Streams are the feed's (a2a-streams.ts): the send acknowledged at once, then the task as it goes.
  sendMessageStream(
    params: SendMessageRequest,
    context: ServerCallContext,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    return this.#streams.sendMessageStream(params, context, (p, c) => this.sendMessage(p, c));
  }
  resubscribe(
    params: SubscribeToTaskRequest,
    context: ServerCallContext,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    return this.#streams.resubscribe(params, context, (id) =>
      this.getTask({ tenant: params.tenant, id }, context),
    );
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

/** The refusal to cancel a task that has ended, saying how it ended. */
function notCancelable(task: Task): TaskNotCancelableError {
  const state = task.status
    ? TaskState[task.status.state]?.replace("TASK_STATE_", "").toLowerCase()
    : undefined;
  return new TaskNotCancelableError(
    `Task ${task.id} has ended${state ? ` (${state})` : ""} and cannot be canceled: read it with GetTask`,
  );
}
