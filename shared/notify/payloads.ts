import type { Artifact, Part, Task } from "@a2a-js/sdk";
import { V03PushNotificationSerializer } from "@a2a-js/sdk/compat/v0_3/server";
import { V1PushNotificationSerializer } from "@a2a-js/sdk/server";
import {
  A2A_STATE,
  interactionParts,
  type Outcome,
  type Stamp,
  statusOf,
  textPart,
} from "../channels/a2a-mapping.ts";
import { parentUrn } from "../domain/urn.ts";
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

/** The A2A view of a standing (a2a-mapping.ts's Outcome). */
export function outcomeOf(s: Standing): Outcome {
  switch (s.state) {
    case "working":
      return { state: "working" };
    case "input-required":
      return { state: "input-required", interaction: s.interaction };
    case "completed":
      return { state: "completed", title: s.view.title, output: s.output };
    default:
      return { state: s.state, reason: s.reason };
  }
}

const dataPart = (value: Record<string, unknown>): Part => ({
  content: { $case: "data", value },
  metadata: undefined,
  filename: "",
  mediaType: "application/json",
});

/**
 * The answer's parts as the caller accepts them: text unless its acceptedOutputModes leave text
 * out and take `application/json`, then a data part `{ answer }`.
 */
export function answerParts(output: string, accepted: readonly string[] | undefined): Part[] {
  const modes = (accepted ?? []).map((m) => m.toLowerCase());
  const textOk = modes.length === 0 || modes.some((m) => m === "text/plain" || m === "text/*" || m === "*/*");
  if (!textOk && modes.includes("application/json")) return [dataPart({ answer: output })];
  return [textPart(output)];
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
            parts: answerParts(outcome.output, sub.acceptedOutputModes),
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
  const serializer =
    sub.protocol === "0.3" ? new V03PushNotificationSerializer() : new V1PushNotificationSerializer();
  return serializer.serialize({ payload: { $case: "task", value: task } }, task);
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
    ...(s.state === "completed" ? { answer: s.output } : {}),
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
