import { randomUUID } from "node:crypto";
import type {
  DeleteTaskPushNotificationConfigRequest,
  GetTaskPushNotificationConfigRequest,
  ListTaskPushNotificationConfigsRequest,
  ListTaskPushNotificationConfigsResponse,
  Message,
  SendMessageRequest,
  Task,
  TaskPushNotificationConfig,
} from "@a2a-js/sdk";
import {
  PushNotificationNotSupportedError,
  RequestMalformedError,
  TaskNotFoundError,
} from "@a2a-js/sdk/errors";
import type { ServerCallContext } from "@a2a-js/sdk/server";
import type { ArborLogger } from "../../kernel/logger.ts";
import type { NotifyService } from "../../notify/service.ts";
import type { A2aPushSubscription, SubscriptionRecord } from "../../notify/subscriptions.ts";
import { type ArborTaskStore, callerOf, linkOf } from "./a2a-store.ts";

/**
 * A2A push notifications (both protocol versions) on Arbor's notify path (shared/notify/): a push
 * config is a notify subscription of the request behind the A2A task, and its deliveries are
 * durable, retried, deduplicable and sent through the outbound guard; the SDK's own push store
 * and sender are never used. ArborA2aTasks delegates to it:
 *
 *   const push = new A2aPush({ notify, store, log });
 *   const { params, pending } = push.takeFromSend(params, context);   // before the send: checked, taken out
 *   const result = await inner.sendMessage(params, context);
 *   await push.afterSend(result, pending, context);                   // subscribes the task the send made
 *   push.create / get / list / delete                                 // the config methods
 *
 * The version a config was made with (the call's A2A-Version: absent is 0.3) is the version its
 * pushes are serialized in. The URL is checked when the config is given (https only; a loopback
 * receiver only with ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP; no literal private or metadata address):
 * invalid params (-32602) before anything is written. Every method acts only on a task the caller
 * may read (the task store's load: tenant boundary and policy), else the task is not found.
 */
export interface A2aPushOptions {
  /** Absent: this server sends no pushes (push configs are refused with -32003). */
  notify?: NotifyService | undefined;
  store: ArborTaskStore;
  log: ArborLogger;
}

/** A push config taken out of a send, to subscribe once the send has made its task. */
export interface PendingPush {
  config: TaskPushNotificationConfig;
  acceptedOutputModes: string[];
}

export class A2aPush {
  readonly #notify: NotifyService | undefined;
  readonly #store: ArborTaskStore;
  readonly #log: ArborLogger;

  constructor(options: A2aPushOptions) {
    this.#notify = options.notify;
    this.#store = options.store;
    this.#log = options.log;
  }

  /** Whether pushes are sent (the card's capabilities.pushNotifications). */
  get enabled(): boolean {
    return this.#notify !== undefined;
  }

  /**
   * The send without its push config (the SDK must not keep or send it), and the config to
   * subscribe after the send. Throws (before anything is written) when pushes are off or the URL
   * is refused.
   */
  takeFromSend(
    params: SendMessageRequest,
    _context: ServerCallContext,
  ): { params: SendMessageRequest; pending?: PendingPush } {
    const config = params.configuration?.taskPushNotificationConfig;
    if (!config || !params.configuration) return { params };
    this.#check(config);
    const { taskPushNotificationConfig: _, ...configuration } = params.configuration;
    return {
      params: { ...params, configuration: { ...configuration, taskPushNotificationConfig: undefined } },
      pending: { config, acceptedOutputModes: [...configuration.acceptedOutputModes] },
    };
  }

  /** Subscribes the task a send made or continued to the push config it carried. */
  async afterSend(
    result: Message | Task,
    pending: PendingPush | undefined,
    context: ServerCallContext,
  ): Promise<void> {
    if (!pending || !("status" in result) || !result.id) return;
    await this.#subscribe(
      result,
      { ...pending.config, taskId: result.id },
      context,
      pending.acceptedOutputModes,
    );
  }

  async create(
    params: TaskPushNotificationConfig,
    context: ServerCallContext,
  ): Promise<TaskPushNotificationConfig> {
    this.#check(params);
    const task = await this.#task(params.taskId, context);
    const record = await this.#subscribe(task, params, context, []);
    return configOf(record.data.subscription as A2aPushSubscription, callerOf(context).actor.id);
  }

  async get(
    params: GetTaskPushNotificationConfigRequest,
    context: ServerCallContext,
  ): Promise<TaskPushNotificationConfig> {
    const configs = await this.#configs(params.taskId, context);
    // A2A 0.3 asks with the task's id alone (TaskIdParams): the task's config (the first, if several).
    const found = params.id === "" ? configs[0] : configs.find((c) => c.id === params.id);
    if (!found)
      throw new TaskNotFoundError(
        params.id === ""
          ? `Task ${params.taskId} has no push notification config`
          : `Push notification config ${params.id} not found for task ${params.taskId}`,
      );
    return found;
  }

  async list(
    params: ListTaskPushNotificationConfigsRequest,
    context: ServerCallContext,
  ): Promise<ListTaskPushNotificationConfigsResponse> {
    return { configs: await this.#configs(params.taskId, context), nextPageToken: "" };
  }

  async delete(params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext): Promise<void> {
    const notify = this.#on();
    const task = await this.#task(params.taskId, context);
    const link = linkOf(task);
    if (!link) throw new TaskNotFoundError(`Task not found: ${params.taskId}`);
    const sub = await notify.subscription(link.rootTaskId, params.id);
    if (sub?.data.subscription.kind === "a2a-push" && sub.data.subscription.a2aTaskId === task.id)
      await notify.unsubscribe(link.rootTaskId, params.id);
  }

  // ---- helpers --------------------------------------------------------------------------------------

  #on(): NotifyService {
    if (!this.#notify)
      throw new PushNotificationNotSupportedError(
        "This server sends no push notifications (its agent card says capabilities.pushNotifications: false): " +
          "send without a push notification config, and read the task with GetTask (0.3: tasks/get)",
      );
    return this.#notify;
  }

  #check(config: TaskPushNotificationConfig): void {
    const notify = this.#on();
    if (!config.url) throw new RequestMalformedError("The push notification config needs a url (https)");
    const problem = configProblem(config);
    if (problem) throw new RequestMalformedError(`The push notification config is not valid: ${problem}`);
    const refused = notify.urlRefusal(config.url);
    if (refused) throw new RequestMalformedError(`The push notification url is refused: ${refused}`);
  }

  async #task(taskId: string, context: ServerCallContext): Promise<Task> {
    this.#on();
    const task = taskId ? await this.#store.load(taskId, context) : undefined;
    if (!task) throw new TaskNotFoundError(`Task not found: ${taskId}`);
    return task;
  }

  async #configs(taskId: string, context: ServerCallContext): Promise<TaskPushNotificationConfig[]> {
    const notify = this.#on();
    const task = await this.#task(taskId, context);
    const link = linkOf(task);
    if (!link) return [];
    return (await notify.subscriptions(link.rootTaskId))
      .map((r) => r.data.subscription)
      .filter((s): s is A2aPushSubscription => s.kind === "a2a-push" && s.a2aTaskId === task.id)
      .map((s) => configOf(s, callerOf(context).actor.id));
  }

  async #subscribe(
    task: Task,
    config: TaskPushNotificationConfig,
    context: ServerCallContext,
    acceptedOutputModes: string[],
  ): Promise<SubscriptionRecord> {
    const notify = this.#on();
    const link = linkOf(task);
    if (!link) throw new TaskNotFoundError(`Task not found: ${task.id}`);
    const who = callerOf(context);
    const auth = config.authentication;
    const subscription: A2aPushSubscription = {
      kind: "a2a-push",
      id: config.id || randomUUID(),
      url: config.url,
      ...(config.token ? { token: config.token } : {}),
      ...(auth?.scheme && auth.credentials
        ? { authentication: { scheme: auth.scheme, credentials: auth.credentials } }
        : {}),
      protocol: context.requestedVersion === "1.0" ? "1.0" : "0.3",
      a2aTaskId: task.id,
      contextId: task.contextId,
      tenant: who.caller.tenant,
      owner: who.actor.id,
      ...(acceptedOutputModes.length > 0 ? { acceptedOutputModes } : {}),
    };
    const record = await notify.subscribe(link.rootTaskId, subscription);
    this.#log.info("A2A push subscribed", { actor: who.actor.id, rootTaskId: link.rootTaskId });
    return record;
  }
}

/** An HTTP token (RFC 9110 `token`): what an authentication scheme is. */
const SCHEME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/;
/** What a header value may not carry (a line break would end the header): control characters. */
const hasControl = (text: string) =>
  Array.from(text).some((ch) => {
    const code = ch.charCodeAt(0);
    return code < 0x20 || code === 0x7f;
  });

/**
 * Why a push config could never be kept or sent, or undefined: the bounds its subscription is
 * kept with (notify/subscriptions.ts) and what an HTTP header may carry, checked when it is given.
 */
function configProblem(config: TaskPushNotificationConfig): string | undefined {
  const { url, token, id, authentication: auth } = config;
  if (url.length > 2048) return `its url is at most 2048 characters (this one has ${url.length})`;
  if (id && id.length > 200) return `its id is at most 200 characters (this one has ${id.length})`;
  if (token && token.length > 4096)
    return `its token is at most 4096 characters (this one has ${token.length})`;
  if (token && hasControl(token))
    return "its token has a control character (a line break?): a header cannot carry it";
  if (auth?.scheme || auth?.credentials) {
    if (!SCHEME.test(auth.scheme ?? ""))
      return "its authentication scheme is one word of at most 64 characters (Bearer, Basic...)";
    if (!auth.credentials) return "its authentication has a scheme but no credentials";
    if (auth.credentials.length > 4096)
      return `its authentication credentials are at most 4096 characters (these have ${auth.credentials.length})`;
    if (hasControl(auth.credentials))
      return "its authentication credentials have a control character: a header cannot carry them";
  }
  return undefined;
}

/**
 * A subscription as A2A shows a push config to `viewer` (an actor id). Its token and credentials
 * are the receiver's secrets: shown only to whoever gave them, never to another caller who may
 * read the task (a tenant's admin reading a partner agent's task): they get the token empty and
 * the scheme without its credentials.
 */
function configOf(s: A2aPushSubscription, viewer: string): TaskPushNotificationConfig {
  const own = s.owner === viewer;
  return {
    tenant: "",
    id: s.id,
    taskId: s.a2aTaskId,
    url: s.url,
    token: own ? (s.token ?? "") : "",
    authentication: s.authentication
      ? { scheme: s.authentication.scheme, credentials: own ? s.authentication.credentials : "" }
      : undefined,
  };
}
