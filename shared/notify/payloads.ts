import { parentUrn } from "../domain/urn.ts";
import {
  A2A_STATE,
  artifactParts,
  interactionParts,
  type Outcome,
  type OutputMode,
  outputModes,
  type Stamp,
  statusOf,
  textPart,
} from "../protocols/a2a/a2a-mapping.ts";
import { type Artifact, type Part, serializePush, type Task } from "../protocols/a2a/a2a-push.ts";
import type { Standing } from "./standing.ts";
import type { A2aPushSubscription, CallbackSubscription } from "./subscriptions.ts";

/**
 * The bodies of notifications, built when a delivery is recorded (a snapshot of how the request
 * stood then) and sent as they are on every attempt. How to drive it:
 *
 *   a2aPushBody(sub, standing, stamp)     -> { body, contentType }: the A2A Task, serialized by the
 *                                            SDK's push serializer of the subscription's protocol
 *                                            (1.0: a StreamResponse `{"task": ...}`; 0.3: the Task)
 *   callbackBody(sub, standing, ids)      -> the HTTP callback's JSON:
 *                                            { id, type, taskId, state, answer?, question?, at }
 *
 * Headers (authorization, ids, the signature) are the sender's (sender.ts): a signature is made
 * at each attempt, with the time of that attempt.
 */
export interface Body {
  body: string;
  contentType: string;
}

/**
 * At most this much of an answer goes into a notification: the body is recorded with its delivery
 * (a DynamoDB item holds 400 KB), and a webhook is a notice, not the place to fetch a long answer.
 */
export const MAX_NOTIFIED_ANSWER_CHARS = 64_000;

/** The answer as a notification carries it: whole, or cut with a note saying where the rest is. */
export function notifiedAnswer(output: string): string {
  if (output.length <= MAX_NOTIFIED_ANSWER_CHARS) return output;
  return (
    `${output.slice(0, MAX_NOTIFIED_ANSWER_CHARS)}\n\n[cut at ${MAX_NOTIFIED_ANSWER_CHARS} of ${output.length} ` +
    "characters: read the whole answer with GetTask (0.3: tasks/get) or GET /v1/tasks/<task URN>]"
  );
}

/** The A2A view of a standing (a2a-mapping.ts's Outcome). */
export function outcomeOf(s: Standing): Outcome {
  switch (s.state) {
    case "working":
      return { state: "working" };
    case "input-required":
      return { state: "input-required", interaction: s.interaction };
    case "completed":
      return { state: "completed", title: s.view.title, output: notifiedAnswer(s.output) };
    default:
      return { state: s.state, reason: s.reason };
  }
}

/**
 * The answer's parts as the caller accepts them: the one shape every A2A answer has (the artifact,
 * a stream, a push: a2a-parts.ts), text and/or a data part `{ result, title }`. Modes the
 * subscription kept that name neither fall back to text: the config was accepted, so the caller is
 * told something it can read.
 */
export function answerParts(
  outcome: { output: string; title?: string },
  accepted: readonly string[] | undefined,
): Part[] {
  let modes: OutputMode[];
  try {
    modes = outputModes(accepted ?? []);
  } catch {
    modes = ["text/plain"];
  }
  return artifactParts(outcome, modes);
}

/** The A2A Task a push carries: its status and, once done, the answer as an artifact. */
export function a2aTask(sub: A2aPushSubscription, s: Standing, stamp: Stamp, rootTaskUrn: string): Task {
  const ids = { taskId: sub.a2aTaskId, contextId: sub.contextId };
  const outcome = outcomeOf(s);
  const parts: Part[] =
    outcome.state === "completed"
      ? [textPart(`Done: ${outcome.title}`)]
      : outcome.state === "failed" || outcome.state === "canceled"
        ? [textPart(outcome.reason)]
        : outcome.state === "input-required"
          ? interactionParts(outcome.interaction)
          : [textPart("Arbor is working on the request.")];
  const artifacts: Artifact[] =
    outcome.state === "completed"
      ? [
          {
            artifactId: "answer",
            name: "answer",
            description: `Arbor's answer to "${outcome.title}"`,
            parts: answerParts(outcome, sub.acceptedOutputModes),
            metadata: undefined,
            extensions: [],
          },
        ]
      : [];
  return {
    id: sub.a2aTaskId,
    contextId: sub.contextId,
    status: statusOf(stamp, A2A_STATE[outcome.state], ids, parts),
    artifacts,
    history: [],
    metadata: { arbor: { rootTaskId: rootTaskUrn } },
  };
}

/** The push body in the subscription's protocol version, by the SDK's serializers. */
export function a2aPushBody(sub: A2aPushSubscription, task: Task): Body {
  return serializePush(sub.protocol, task);
}

/** What a callback names its event: `task.working`, `task.input_required`, `task.completed`... */
export const callbackType = (s: Standing) => `task.${s.state.replace("-", "_")}`;

export interface CallbackPayload {
  /** The event id: the same on every attempt; receivers deduplicate on it. */
  id: string;
  type: string;
  taskId: string;
  state: Standing["state"];
  answer?: string;
  reason?: string;
  question?: Record<string, unknown>;
  at: string;
}

export function callbackBody(
  _sub: CallbackSubscription,
  s: Standing,
  ids: { eventId: string; rootTaskUrn: string; at: string },
): Body {
  const payload: CallbackPayload = {
    id: ids.eventId,
    type: callbackType(s),
    taskId: ids.rootTaskUrn,
    state: s.state,
    ...(s.state === "completed" ? { answer: notifiedAnswer(s.output) } : {}),
    ...(s.state === "failed" || s.state === "canceled" ? { reason: s.reason } : {}),
    ...(s.state === "input-required"
      ? {
          question: {
            urn: s.interaction.meta.id,
            taskId: parentUrn(s.interaction.meta.id),
            kind: s.interaction.kind,
            purpose: s.interaction.purpose,
            title: s.interaction.display.title,
            ...(s.interaction.display.description ? { description: s.interaction.display.description } : {}),
            ...(s.interaction.options
              ? { options: s.interaction.options.map((o) => ({ id: o.id, label: o.label })) }
              : {}),
            answerPath: `/v1/interactions/${encodeURIComponent(s.interaction.meta.id)}/answer`,
          },
        }
      : {}),
    at: ids.at,
  };
  return { body: JSON.stringify(payload), contentType: "application/json" };
}
