import * as z from "zod";
import { answerRegexProblem, regexProblem } from "../domain/ask-question.ts";
import type { Actor } from "../domain/events.ts";
import {
  InteractionDisplaySchema,
  InteractionKindSchema,
  InteractionOptionSchema,
  InteractionPurposeSchema,
  type InteractionResource,
  type InteractionResponseSchema,
  withMeta,
} from "../domain/resources.ts";
import { isTerminal } from "../domain/task-state.ts";
import { lastElement, parentUrn, qualifiedType, tenantOf, type Urn } from "../domain/urn.ts";
import {
  ConflictError,
  ForbiddenError,
  InvalidTransitionError,
  NotFoundError,
  ValidationError,
} from "../kernel/errors.ts";
import { ATTR, activeSpanLink, recordSpan, taskSpanRef, tracingOn } from "../kernel/tracing.ts";
import { type Caller, holdTenantBoundary, ownerOf, principalOf } from "../store/resource-access.ts";
import { COMMANDS, ENGINE, type EngineDeps, recordTask, send } from "./context.ts";

/**
 * Interactions (UIP): a task asks a person to select, confirm or give input. The task waits in
 * `awaiting_user` with nothing running, and resumes when an answer arrives from any channel.
 */
export const InteractionRequestSchema = z.object({
  kind: InteractionKindSchema,
  purpose: InteractionPurposeSchema,
  display: InteractionDisplaySchema,
  options: z.array(InteractionOptionSchema).optional(),
  validation: z.object({ regex: z.string().optional(), required: z.boolean().optional() }).optional(),
  binding: z.object({ tool: z.string(), argumentsHash: z.string() }).optional(),
});
export type InteractionRequest = z.infer<typeof InteractionRequestSchema>;
export type InteractionResponse = z.infer<typeof InteractionResponseSchema>;

export const interactionMeta = (taskId: string, name: string) =>
  withMeta({ type: "uip.Interaction", name, parent: taskId });

/**
 * Announced on the bus (source `arbor.engine`, detail `{ taskId, interactionUrn }`) when a task starts
 * waiting for a person. No step consumes it: it is for the channels that wait on a request (A2A
 * `input-required`). A notice, not state: a crash before it is sent loses it, so a channel that
 * waits on it also reads the task's state now and then.
 */
export const INTERACTION_REQUESTED = "INTERACTION_REQUESTED";

/** Asks; the task (in progress) moves to awaiting_user. Asking again under the same name is a no-op. */
export async function requestInteraction(
  deps: EngineDeps,
  taskId: string,
  name: string,
  request: InteractionRequest,
): Promise<Urn> {
  const meta = interactionMeta(taskId, name);
  // Every answer is checked against the regex in the process that takes it: one that could hang it is never asked.
  const unsafe = request.validation?.regex === undefined ? undefined : regexProblem(request.validation.regex);
  if (unsafe) throw new ValidationError(`The question "${request.display.title}" cannot be asked`, [unsafe]);
  const existing = await deps.resources.getAs("uip.Interaction", meta.id);
  // When it was asked: how long a person took is the span of the wait (recordWait).
  if (!existing)
    await deps.resources.put({
      meta: { ...meta, createdAt: deps.clock().toISOString() },
      ...request,
      status: "pending",
    });
  const view = await deps.tasks.view(taskId);
  if (view?.status === "in_progress") {
    await recordTask(
      deps,
      "UserInteractionRequested",
      {
        taskId: taskId as Urn,
        interactionId: meta.id,
        kind: request.kind,
        purpose: request.purpose,
        display: request.display,
        ...(request.options ? { options: request.options } : {}),
        ...(request.validation ? { validation: request.validation } : {}),
      },
      ENGINE,
      name,
    );
    // Nothing else is published while a task waits: channels waiting on the request wake on this.
    await send(deps, INTERACTION_REQUESTED, { taskId, interactionUrn: meta.id }, meta.id);
  }
  return meta.id;
}

/**
 * Announces a question that is stored and pending, asked by a step that crashed before its task
 * moved to awaiting_user: nobody was told, and the watchdog would drive the task for ever. A no-op
 * once the task waits (the request's event and notice have ids of their own).
 */
export async function announceStored(deps: EngineDeps, interaction: InteractionResource): Promise<void> {
  const { kind, purpose, display, options, validation, binding } = interaction;
  await requestInteraction(deps, parentUrn(interaction.meta.id) as string, interaction.meta.name, {
    kind,
    purpose,
    display,
    ...(options ? { options } : {}),
    ...(validation ? { validation } : {}),
    ...(binding ? { binding } : {}),
  });
}

/**
 * Records a person's answer. Checks that the interaction is still pending and that the answer
 * fits it (a known option, input matching the regex); then the task resumes.
 *
 * Two answers to one question must not both pass the pending check: Engine.respond takes them one
 * at a time within a process, and across processes that share a store (AWS: several function
 * instances) the answer is claimed with a conditional write before anything else is (takeAnswer).
 */
export async function respond(
  deps: EngineDeps,
  interactionUrn: string,
  response: InteractionResponse,
  actor: Actor,
  principal: AnswerPrincipal = {},
  /** Checks the answer further, once the answerer is known to be allowed (an edited plan, say). */
  check?: (interaction: InteractionResource) => void,
): Promise<void> {
  // What is not a question (a task, a conversation) is answered as one that is not there.
  const isQuestion = qualifiedType(lastElement(interactionUrn)) === "uip.Interaction";
  const interaction = isQuestion ? await deps.resources.getAs("uip.Interaction", interactionUrn) : undefined;
  if (!interaction) {
    // Within the caller's tenant, that there is nothing to answer is told only to whoever could
    // answer there (the owner of the conversation, an admin): anyone else is refused as for an
    // interaction that exists. Outside it, nothing is told either way (not found).
    const tenant = tenantOf(interactionUrn);
    if (tenant !== undefined && principalOf(actor, principal, tenant).tenant === tenant)
      await mayAnswer(deps, { urn: interactionUrn, title: interactionUrn }, actor, principal);
    throw new NotFoundError("Interaction", interactionUrn);
  }
  await mayAnswer(
    deps,
    { urn: interactionUrn, title: `"${interaction.display.title}"`, purpose: interaction.purpose },
    actor,
    principal,
  );
  if (interaction.status !== "pending")
    throw new ConflictError(`Interaction ${interactionUrn} was already answered`);
  checkAnswer(interaction, response);
  check?.(interaction);
  const taskId = parentUrn(interactionUrn) as Urn;
  // A task that ended (canceled, failed: its wait is over) takes no answer: refused before anything is written.
  const ended = (await deps.tasks.view(taskId))?.status;
  if (ended !== undefined && isTerminal(ended)) throw noLongerWaiting(interactionUrn, ended);
  // The answer that won the claim is the one written, recorded and acted on, whoever writes it.
  const won = await takeAnswer(deps, interactionUrn, response, actor);
  await deps.resources.put({
    ...interaction,
    status: "answered",
    response: {
      ...won.response,
      actor: won.actor.id,
      ...(won.actor.name ? { actorName: won.actor.name } : {}),
      ...(won.actor.capabilities?.length ? { actorCapabilities: won.actor.capabilities } : {}),
    },
  });
  try {
    await recordTask(
      deps,
      "UserInteractionResponded",
      { taskId, interactionId: interaction.meta.id, ...won.response },
      won.actor,
      interaction.meta.name,
    );
  } catch (error) {
    // The task ended while the answer was on its way (a cancel in between): the answer is not kept.
    if (!(error instanceof InvalidTransitionError)) throw error;
    await deps.resources.put(interaction);
    throw noLongerWaiting(interactionUrn, error.details.from);
  }
  if (won.ours && tracingOn()) await recordWait(deps, taskId, interaction, won);
  await send(deps, COMMANDS.resume, { interactionUrn }, interactionUrn);
  if (!won.ours) throw new ConflictError(`Interaction ${interactionUrn} was already answered`);
}

/**
 * The wait for a person as a span of the task (asked .. answered, however long that was), linked to
 * the answer's own trace (the click, the message, the call that answered it).
 */
async function recordWait(
  deps: EngineDeps,
  taskId: string,
  interaction: InteractionResource,
  won: { response: InteractionResponse; actor: Actor },
): Promise<void> {
  const view = await deps.tasks.view(taskId);
  const asked = interaction.meta.createdAt;
  if (!view || !asked) return;
  const answering = activeSpanLink();
  recordSpan(`await_person ${interaction.purpose}`, {
    parent: taskSpanRef(view),
    start: new Date(asked),
    attributes: {
      [ATTR.taskUrn]: taskId,
      [ATTR.interactionPurpose]: interaction.purpose,
      [ATTR.answeredBy]: won.actor.id,
      "arbor.interaction.kind": interaction.kind,
      "arbor.interaction.option": won.response.selectedOptionId,
    },
    ...(answering ? { links: [answering] } : {}),
  });
}

/**
 * The one answer a question takes, claimed with a conditional write before anything else is
 * written: of answers racing from two processes (two Lambda instances, say), exactly one creates
 * the claim, and the stored question, the event log and what runs follow it. Whoever loses gets
 * the claimed answer back and writes it too (each write is idempotent: the same question, the same
 * event id), then hears 409: so a process that crashed between its claim and the rest leaves no
 * question claimed and unanswered: the next answer finishes it.
 */
async function takeAnswer(
  deps: EngineDeps,
  interactionUrn: string,
  response: InteractionResponse,
  actor: Actor,
): Promise<{ response: InteractionResponse; actor: Actor; ours: boolean }> {
  const key = answerKey(interactionUrn);
  try {
    await deps.state.transact([
      {
        op: "put",
        record: { key, kind: "answer", updatedAt: deps.clock().toISOString(), data: { actor, response } },
        expectedVersion: 0,
      },
    ]);
    return { response, actor, ours: true };
  } catch (error) {
    if (!(error instanceof ConflictError)) throw error;
    const taken = (await deps.state.get<{ actor: Actor; response: InteractionResponse }>(key))?.data;
    if (!taken) throw error;
    return { ...taken, ours: false };
  }
}

export const answerKey = (interactionUrn: string) => `answer#${interactionUrn}`;

const noLongerWaiting = (interactionUrn: string, status: unknown) =>
  new ConflictError(`Interaction ${interactionUrn} can no longer be answered: its task is ${String(status)}`);

/** Who answers, as a channel vouches for them (see Caller and principalOf). */
export type AnswerPrincipal = Caller;

/**
 * Policy decides who may answer (interaction.answer); default deny. It is told who owns the
 * interaction: whoever started the conversation it lies in.
 */
async function mayAnswer(
  deps: EngineDeps,
  interaction: { urn: string; title: string; purpose?: string },
  actor: Actor,
  principal: AnswerPrincipal,
): Promise<void> {
  const tenant = tenantOf(interaction.urn) ?? "(none)";
  const { roles, ...who } = principalOf(actor, principal, tenant);
  holdTenantBoundary(who, tenant, `answer ${interaction.title}`);
  const owner = who.kind === "system" ? undefined : await ownerOf(deps.resources, interaction.urn);
  const decision = await deps.policy.decide({
    principal: { ...who, roles: [...(roles ?? [])] },
    action: "interaction.answer",
    resource: {
      id: interaction.urn,
      tenant,
      type: "uip.Interaction",
      ...(interaction.purpose ? { purpose: interaction.purpose } : {}),
      ...(owner ? { owner } : {}),
    },
  });
  if (!decision.allow)
    throw new ForbiddenError(
      `${actor.id} may not answer ${interaction.title} (policy decision ${decision.id})`,
      { decisionId: decision.id },
    );
}

/**
 * Whether an answer fits its question, by kind: `select`/`confirm` take one of the options;
 * `input` takes a text (non-empty when `required`); `composite` takes EITHER one of the options OR
 * a non-empty text of the answerer's own, never both and never neither (domain/ask-question.ts).
 * A text is held to `validation.regex` (an empty text of a question that does not require one is
 * no answer to check), within the bounds that keep a regex from hanging the process.
 */
function checkAnswer(interaction: InteractionResource, response: InteractionResponse): void {
  const problems: string[] = [];
  const ids = interaction.options?.map((o) => o.id) ?? [];
  const chose = response.selectedOptionId !== undefined;
  const text = response.inputValue;
  const wrote = text !== undefined && text !== "";
  if (chose && !ids.includes(response.selectedOptionId as string)) {
    problems.push(`selectedOptionId must be one of ${ids.join(", ")}`);
  }
  const v = interaction.validation;
  switch (interaction.kind) {
    case "select":
    case "confirm":
      if (ids.length > 0 && !chose) problems.push(`choose one of ${ids.join(", ")}`);
      break;
    case "input":
      if (v?.required && !wrote) problems.push("an input value is required");
      break;
    case "composite":
      if (chose === wrote)
        problems.push(
          `answer with either one of the options (${ids.join(", ")}) as selectedOptionId, or your own text as inputValue: ${
            chose ? "not both" : "one of them is needed"
          }`,
        );
      break;
  }
  if (v?.regex && text !== undefined && (wrote || v.required)) {
    const problem = answerRegexProblem(v.regex, text);
    if (problem) problems.push(problem);
  }
  if (problems.length)
    throw new ValidationError(`That answer does not fit "${interaction.display.title}"`, problems);
}

/** Interactions of a task that still wait for an answer. */
export async function pendingInteractions(deps: EngineDeps, taskId: string): Promise<InteractionResource[]> {
  const all = await deps.resources.children(taskId, "uip.Interaction");
  return all.filter(
    (r): r is InteractionResource =>
      r.meta.type === "uip.Interaction" && (r as InteractionResource).status === "pending",
  );
}

/** Interactions that tasks of a tree (the root first) wait on now; terminal subtrees are skipped. */
export async function waitingInTree(deps: EngineDeps, rootTaskId: string): Promise<InteractionResource[]> {
  const out: InteractionResource[] = [];
  const walk = async (taskId: string): Promise<void> => {
    const view = await deps.tasks.view(taskId);
    if (!view || isTerminal(view.status)) return;
    if (view.status === "awaiting_user") out.push(...(await pendingInteractions(deps, taskId)));
    for (const child of await deps.tasks.children(taskId))
      if (!isTerminal(child.status)) await walk(child.taskId);
  };
  await walk(rootTaskId);
  return out;
}
