import type { Message } from "@a2a-js/sdk";
import { RequestMalformedError, TaskNotFoundError, UnsupportedOperationError } from "@a2a-js/sdk/errors";
import type { ServerCallContext } from "@a2a-js/sdk/server";
import { isWithin, tenantUrn } from "../../domain/urn.ts";
import type { Engine } from "../../engine/engine.ts";
import type { ArborLogger } from "../../kernel/logger.ts";
import type { Authenticated } from "../../ports/key-store.ts";
import {
  answerFrom,
  type OutputMode,
  requestText,
  taskNotFound,
  toA2aError,
  waitingInteractions,
} from "../../protocols/a2a/a2a-mapping.ts";
import { type ArborContexts, type ArborLink, type ArborTaskStore, isFinal, linkOf } from "./a2a-store.ts";

/**
 * What a SendMessage does in Arbor before the SDK runs its execution: a message without a taskId
 * is a new request (engine.submit), a message on a task answers what the task waits on
 * (engine.respond). Both check the caller with the engine before anything is written.
 */

/** What a send hands its execution (the request context's state): the request it runs or continues. */
export interface Started extends ArborLink {
  contextId: string;
  /** The caller's output modes for this send (undefined: a follow-up that named none keeps the task's). */
  outputModes?: OutputMode[];
}

export interface SendDeps {
  engine: Engine;
  store: ArborTaskStore;
  contexts: ArborContexts;
  log: ArborLogger;
}

/** A new request: submitted to the engine, in the conversation the contextId names (or a new one). */
export async function submitRequest(deps: SendDeps, message: Message, who: Authenticated): Promise<Started> {
  const { engine, contexts, log } = deps;
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
      : await contexts.conversationOf(tenant, contextId);
  let submitted: Awaited<ReturnType<Engine["submit"]>>;
  try {
    submitted = await engine.submit({
      tenant,
      roles: who.caller.roles,
      actor: who.actor,
      text,
      mode: "eager",
      ...(conversationUrn ? { conversationUrn } : {}),
    });
  } catch (e) {
    throw toA2aError(e, who, { urn: conversationUrn ?? tenantUrn(tenant), error: noConversation });
  }
  if (contextId && !conversationUrn) {
    const named = await contexts.name(tenant, contextId, submitted.conversationUrn);
    if (named !== submitted.conversationUrn)
      log.warn("A2A contextId was named by another send at the same time", {
        actor: who.actor.id,
        rootTaskId: submitted.rootTaskId,
      });
  }
  log.info("A2A request submitted", { actor: who.actor.id, rootTaskId: submitted.rootTaskId });
  return {
    rootTaskId: submitted.rootTaskId,
    conversationUrn: submitted.conversationUrn,
    contextId: contextId || submitted.conversationUrn,
  };
}

/** A message on an existing task answers what it waits on; undefined leaves the refusal to the SDK. */
export async function answerTask(
  deps: SendDeps,
  message: Message,
  context: ServerCallContext,
  who: Authenticated,
): Promise<Started | undefined> {
  const { engine, store, log } = deps;
  const task = await store.load(message.taskId, context);
  if (!task) throw new TaskNotFoundError(`Task not found: ${message.taskId}`);
  const link = linkOf(task);
  if (!link || isFinal(task) || (message.contextId && message.contextId !== task.contextId)) return undefined;
  try {
    const waiting = await waitingInteractions(engine, link.rootTaskId);
    if (waiting.length === 0)
      throw new UnsupportedOperationError(
        `Task ${task.id} is not waiting for input: wait until it ends or asks (input-required), ` +
          "or send a new message without a taskId",
      );
    const { interaction, response } = answerFrom(message, waiting);
    await engine.respond(interaction.meta.id, response, who.actor, who.caller);
    log.info("A2A answer recorded", { actor: who.actor.id, interaction: interaction.meta.id });
  } catch (e) {
    throw toA2aError(e, who, { urn: link.rootTaskId, error: taskNotFound(task.id) });
  }
  return { ...link, contextId: task.contextId };
}
