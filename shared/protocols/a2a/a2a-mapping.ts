import { type Message, type Part, Role, TaskState } from "@a2a-js/sdk";
import {
  JsonRpcTransportError,
  RequestMalformedError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from "@a2a-js/sdk/errors";
import { AgentEvent, type AgentExecutionEvent } from "@a2a-js/sdk/server";
import type { InteractionResource } from "../../domain/resources.ts";
import { isTerminal } from "../../domain/task-state.ts";
import { isUrn, lastElement, tenantOf } from "../../domain/urn.ts";
import type { Asker, Engine } from "../../engine/engine.ts";
import type { InteractionResponse } from "../../engine/interactions.ts";
import { waitingInTree } from "../../engine/interactions.ts";
import { ERROR_EDGES, JSON_RPC } from "../../kernel/error-edges.ts";
import { ArborError } from "../../kernel/errors.ts";
import type { Authenticated } from "../../ports/key-store.ts";
import { artifactParts, dataPart, filePart, type OutputMode, textPart } from "./a2a-parts.ts";

export {
  artifactParts,
  checkParts,
  dataPart,
  type OutputMode,
  outputModes,
  outputModesOf,
  requestText,
  textPart,
} from "./a2a-parts.ts";

/**
 * How Arbor's task state reads over A2A. The A2A task is a view of the request's root task, never
 * state of its own: a request recorded but not yet planned (no root task yet) -> submitted, done
 * -> completed (the output as an artifact), failed -> failed, canceled -> canceled (each with its
 * reason), a task anywhere in the tree waiting for a person -> input-required (the question as the
 * status message), anything else -> working.
 *
 * Two A2A states have no Arbor state behind them, so they are never produced:
 *   - rejected ("the agent decided not to perform the task"): the engine refuses a request (its
 *     policy, its limits) in `submit`, before anything is recorded, and that refusal is the answer
 *     to the send (an error: no task is created for it); once recorded, a request is never refused
 *     by a decision, only failed (a planner that gives no valid plan, a budget spent: failed) or
 *     canceled (a plan a person does not approve: canceled, by that person).
 *   - auth-required: Arbor's tasks wait only for a person's answer (input-required); a tool whose
 *     credentials are missing fails its call (the model is told), it never waits for credentials.
 */
export type Outcome =
  | { state: "submitted" }
  | { state: "working" }
  | { state: "completed"; title: string; output: string; files?: readonly OutcomeFile[] }
  | { state: "failed" | "canceled"; reason: string }
  | { state: "input-required"; interaction: InteractionResource };

/**
 * A file of the answer (an artifact a task made): its bytes when small (INLINE_FILE_BYTES), else
 * where to download it (an API link, a signed S3 URL); neither when it has no link here.
 */
export interface OutcomeFile {
  id: string;
  name: string;
  mediaType: string;
  size: number;
  bytes?: Uint8Array;
  url?: string;
}

/** Files up to this size travel inside the answer (base64 in JSON); larger ones by link. */
export const INLINE_FILE_BYTES = 256 * 1024;

export const A2A_STATE: Record<Outcome["state"], TaskState> = {
  submitted: TaskState.TASK_STATE_SUBMITTED,
  working: TaskState.TASK_STATE_WORKING,
  completed: TaskState.TASK_STATE_COMPLETED,
  failed: TaskState.TASK_STATE_FAILED,
  canceled: TaskState.TASK_STATE_CANCELED,
  "input-required": TaskState.TASK_STATE_INPUT_REQUIRED,
};

/** Whether a request is still on its way (submitted or working): nothing for a caller to read yet. */
export const isUnderway = (outcome: Outcome) => outcome.state === "submitted" || outcome.state === "working";

/** The state of a request as `asker` may read it (throws ForbiddenError when they may not). */
export async function readOutcome(engine: Engine, rootTaskId: string, asker: Asker): Promise<Outcome> {
  const { view, output } = await engine.result(rootTaskId, asker);
  if (!view) return { state: "submitted" }; // recorded, not planned yet
  // Every ending writes the output before it is announced: until it is there, the ending is not over.
  if (isTerminal(view.status)) {
    if (output === undefined) return { state: "working" };
    if (view.status === "done") {
      const files = view.artifacts?.length ? await filesOf(engine, view.artifacts) : [];
      return { state: "completed", title: view.title, output, ...(files.length ? { files } : {}) };
    }
    return { state: view.status === "failed" ? "failed" : "canceled", reason: output };
  }
  const [interaction] = await waitingInteractions(engine, rootTaskId);
  return interaction ? { state: "input-required", interaction } : { state: "working" };
}

/** The answer's files: each one's bytes when small, else its link. */
async function filesOf(engine: Engine, urns: readonly string[]): Promise<OutcomeFile[]> {
  const { artifacts, artifactLink } = engine.deps;
  if (!artifacts) return [];
  const files = await Promise.all(
    urns.map(async (urn): Promise<OutcomeFile | undefined> => {
      const info = await artifacts.describe(urn);
      if (!info) return undefined;
      const file = {
        id: lastElement(info.urn).id,
        name: info.name,
        mediaType: info.contentType,
        size: info.size,
      };
      if (info.size <= INLINE_FILE_BYTES) {
        const found = await artifacts.get(urn);
        return found ? { ...file, bytes: found.body } : undefined;
      }
      const url = await artifactLink?.(info);
      return url ? { ...file, url } : file;
    }),
  );
  return files.filter((f): f is OutcomeFile => f !== undefined);
}

/** Interactions that tasks of the tree (the root first) wait on now; terminal subtrees are skipped. */
export const waitingInteractions = (engine: Engine, rootTaskId: string): Promise<InteractionResource[]> =>
  waitingInTree(engine.deps, rootTaskId);

// ---- messages and parts ---------------------------------------------------------------------------

export function agentMessage(
  messageId: string,
  ids: { taskId: string; contextId: string },
  parts: Part[],
): Message {
  return {
    messageId,
    ...ids,
    role: Role.ROLE_AGENT,
    parts,
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

/** What an A2A caller reads while Arbor waits for an answer: the question as text, and as data. */
export function interactionParts(interaction: InteractionResource): Part[] {
  const { display, options = [] } = interaction;
  const lines = [display.title];
  if (display.description) lines.push(display.description);
  if (display.content !== undefined) lines.push(JSON.stringify(display.content, null, 2).slice(0, 4000));
  const choices = options.map((o) => `${o.id} (${o.label})`).join(", ");
  const regex = interaction.validation?.regex;
  lines.push(
    interaction.kind === "composite"
      ? `Answer with one of: ${choices}; or with an answer of your own${regex ? ` matching ${regex}` : ""}.`
      : options.length
        ? `Answer with one of: ${choices}.`
        : `Answer with the value asked for${regex ? `, matching ${regex}` : ""}.`,
  );
  return [
    textPart(lines.join("\n\n")),
    dataPart({
      interaction: {
        id: interaction.meta.id,
        kind: interaction.kind,
        purpose: interaction.purpose,
        title: display.title,
        ...(display.description ? { description: display.description } : {}),
        ...(display.content !== undefined ? { content: display.content } : {}),
        options: options.map((o) => ({ id: o.id, label: o.label })),
        ...(interaction.validation ? { validation: interaction.validation } : {}),
      },
    }),
  ];
}

/**
 * The answer a follow-up message gives to the interactions the task waits on: which interaction
 * (a data part's `interactionId`, else the first), and the option its text or data names (by id
 * or label), or its text as the input value. Throws RequestMalformedError when it fits none.
 */
export function answerFrom(
  message: Message,
  waiting: readonly InteractionResource[],
): { interaction: InteractionResource; response: InteractionResponse } {
  const texts: string[] = [];
  let data: Record<string, unknown> = {};
  for (const part of message.parts) {
    const c = part.content;
    if (c?.$case === "text") texts.push(c.value.trim());
    else if (c?.$case === "data" && typeof c.value === "string") texts.push(c.value.trim());
    else if (c?.$case === "data" && c.value && typeof c.value === "object") data = { ...data, ...c.value };
  }
  const str = (v: unknown) => (typeof v === "string" && v.trim() ? v.trim() : undefined);
  const wanted = str(data.interactionId);
  const interaction = wanted ? waiting.find((i) => i.meta.id === wanted) : waiting[0];
  if (!interaction)
    throw new RequestMalformedError(
      `The task is not waiting on interaction ${wanted}: answer the one it asks`,
    );
  const text = texts.filter(Boolean).join("\n");
  const comment = str(data.comment);
  const options = interaction.options ?? [];
  const named = [str(data.selectedOptionId), str(data.optionId), text].filter((v) => v !== undefined);
  const chosen = options.find((o) =>
    named.some((n) => n.toLowerCase() === o.id.toLowerCase() || n.toLowerCase() === o.label.toLowerCase()),
  );
  const inputValue = str(data.inputValue);
  const base = comment ? { comment } : {};
  if (chosen)
    return {
      interaction,
      // A composite question takes an option or a text, not both (domain/ask-question.ts).
      response: {
        ...base,
        selectedOptionId: chosen.id,
        ...(inputValue && interaction.kind !== "composite" ? { inputValue } : {}),
      },
    };
  // An approval may come as an edited plan: JSON, with nothing else.
  if (interaction.purpose === "approve_plan" && (inputValue ?? text).startsWith("{"))
    return {
      interaction,
      response: { ...base, selectedOptionId: "approve", inputValue: inputValue ?? text },
    };
  if (
    interaction.kind === "input" ||
    interaction.kind === "composite" ||
    (options.length === 0 && interaction.kind !== "confirm")
  ) {
    const value = inputValue ?? text;
    if (value) return { interaction, response: { ...base, inputValue: value } };
  }
  throw new RequestMalformedError(
    `That answer does not fit "${interaction.display.title}": ` +
      (options.length
        ? `answer with one of ${options.map((o) => `${o.id} (${o.label})`).join(", ")}`
        : "answer with the value asked for"),
  );
}

export const SUBMITTED_TEXT = "Arbor has the request; planning starts shortly.";

/** How an event is stamped: a new message id, and the time. */
export interface Stamp {
  newId: () => string;
  now: () => Date;
}

export function statusOf(
  stamp: Stamp,
  state: TaskState,
  ids: { taskId: string; contextId: string },
  parts: Part[],
) {
  return { state, message: agentMessage(stamp.newId(), ids, parts), timestamp: stamp.now().toISOString() };
}

/**
 * The events that bring an A2A task to `outcome`: the executor publishes them, and a GetTask on a
 * task nobody waits on applies them (through the SDK's ResultManager), so both read alike.
 */
export function outcomeEvents(
  ids: { taskId: string; contextId: string },
  outcome: Outcome,
  stamp: Stamp,
  modes: readonly OutputMode[] = ["text/plain"],
  /** Merged into the task's metadata by the SDK (each top-level key replaced whole). */
  metadata?: Record<string, unknown>,
): AgentExecutionEvent[] {
  const status = (parts: Part[]) =>
    AgentEvent.statusUpdate({
      ...ids,
      status: statusOf(stamp, A2A_STATE[outcome.state], ids, parts),
      metadata,
    });
  switch (outcome.state) {
    case "completed":
      return [
        AgentEvent.artifactUpdate({
          ...ids,
          artifact: {
            artifactId: "answer",
            name: "answer",
            description: `Arbor's answer to "${outcome.title}"`,
            parts: artifactParts(outcome, modes),
            metadata: undefined,
            extensions: [],
          },
          append: false,
          lastChunk: true,
          metadata: undefined,
        }),
        ...(outcome.files ?? []).map((file) =>
          AgentEvent.artifactUpdate({
            ...ids,
            artifact: {
              artifactId: `file-${file.id}`,
              name: file.name,
              description: `A file of the answer (${file.mediaType}, ${file.size} bytes)`,
              parts: [filePart(file)],
              metadata: undefined,
              extensions: [],
            },
            append: false,
            lastChunk: true,
            metadata: undefined,
          }),
        ),
        status([textPart(`Done: ${outcome.title}`)]),
      ];
    case "failed":
    case "canceled":
      return [status([textPart(outcome.reason)])];
    case "input-required":
      return [status(interactionParts(outcome.interaction))];
    case "submitted":
      return [status([textPart(SUBMITTED_TEXT)])];
    case "working":
      return [status([textPart("Arbor is working on the request.")])];
  }
}

// ---- errors at the edge ---------------------------------------------------------------------------

/**
 * Who may not call, or may not do this: JSON-RPC has no code for either, so both are the
 * implementation-defined server error -32000; the HTTP status tells them apart (401: no known key,
 * 403: the policy of the caller's own tenant refuses).
 */
export const AUTH_ERROR_CODE = JSON_RPC.PERMISSION_DENIED;

export const permissionDenied = (message: string) =>
  new JsonRpcTransportError({
    jsonrpc: "2.0",
    id: null,
    error: { code: AUTH_ERROR_CODE, message: `Permission denied: ${message}` },
  });

/**
 * Arbor's errors as A2A errors, by the JSON-RPC code of their row in kernel/error-edges.ts.
 * Whatever belongs to another tenant is answered as if it did not exist (`missing`), so that no
 * key can learn what another tenant has; a refusal by the caller's own tenant's policy is a
 * permission error; bad input is invalid params; a conflict is an unsupported operation; the rest
 * is an internal error (the SDK answers it with -32603, the server hides its message).
 */
export function toA2aError(
  error: unknown,
  who: Authenticated,
  missing: { urn: string; error: () => Error },
): unknown {
  if (!(error instanceof ArborError)) return error;
  // Anything about another tenant's URN (refused, not found, malformed) is the one "not found".
  if (!isUrn(missing.urn) || tenantOf(missing.urn) !== who.caller.tenant) return missing.error();
  const { message } = error;
  switch (ERROR_EDGES[error.code].jsonRpc) {
    case JSON_RPC.PERMISSION_DENIED:
      return permissionDenied(message);
    case JSON_RPC.TASK_NOT_FOUND:
      return missing.error();
    case JSON_RPC.INVALID_PARAMS:
      return new RequestMalformedError({ message, cause: error });
    case JSON_RPC.UNSUPPORTED_OPERATION:
      return new UnsupportedOperationError({ message, cause: error });
    case JSON_RPC.INTERNAL_ERROR:
      return error;
  }
}

export const taskNotFound = (id: string) => () => new TaskNotFoundError(`Task not found: ${id}`);
