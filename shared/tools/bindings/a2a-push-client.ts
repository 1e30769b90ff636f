import { createHash, randomBytes } from "node:crypto";
import { StreamResponse, Task, type TaskPushNotificationConfig, TaskState } from "@a2a-js/sdk";
import { legacyPushNotificationToV1StreamResponse } from "@a2a-js/sdk/compat/v0_3";
import { ValidationError } from "../../kernel/errors.ts";
import type { GivenCallback } from "../../ports/tools.ts";

/**
 * Arbor as an A2A client that lets a remote agent push its answer (the `a2a` tool, when the
 * agent's card offers push and Arbor knows its own public URL): the push configuration a call
 * sends, and what a push that comes back says.
 *
 * Each call gets its own callback: an opaque id in the URL and a fresh random token, of which
 * Arbor keeps only the sha256. The token goes to the agent twice, as the 1.0 config's `token`
 * (the SDK's sender puts it in `X-A2A-Notification-Token`) and as its `authentication` (Bearer,
 * which the SDK's sender and Arbor's own put in `Authorization`).
 */
export const CALLBACK_PATH = "/v1/a2a-callbacks";

export interface Callback {
  callbackId: string;
  token: string;
  tokenHash: string;
  config: TaskPushNotificationConfig;
}

export const tokenHashOf = (token: string) => createHash("sha256").update(token).digest("hex");

/** A new callback under `publicUrl` (no trailing slash needed). */
export function newCallback(publicUrl: string): Callback {
  const callbackId = randomBytes(18).toString("base64url");
  const token = randomBytes(32).toString("base64url");
  const url = `${publicUrl.replace(/\/+$/, "")}${CALLBACK_PATH}/${callbackId}`;
  return callbackOf({ callbackId, token, url });
}

/** The push configuration of a callback already made (ToolContext.callback, or newCallback's). */
export function callbackOf({ callbackId, token, url }: GivenCallback): Callback {
  return {
    callbackId,
    token,
    tokenHash: tokenHashOf(token),
    config: {
      tenant: "",
      id: callbackId,
      taskId: "",
      url,
      token,
      authentication: { scheme: "Bearer", credentials: token },
    },
  };
}

/** What a push says of the remote task: the whole Task when it carried one, else its state alone. */
export interface Pushed {
  taskId: string;
  state: TaskState;
  task?: Task;
}

/**
 * Reads a push body: a 1.0 StreamResponse (`{"task": ...}`, `{"statusUpdate": ...}`...), a bare
 * 1.0 Task, or a bare 0.3 event (the SDK's V03PushNotificationSerializer). Throws ValidationError
 * when it is none of them, or names no task.
 */
export function readPush(body: unknown): Pushed {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw new ValidationError("A push body is a JSON object: an A2A Task or StreamResponse");
  const o = body as Record<string, unknown>;
  let response: StreamResponse;
  try {
    if (["task", "statusUpdate", "artifactUpdate", "message"].some((k) => k in o))
      response = StreamResponse.fromJSON(o);
    else if (isV1Task(o)) response = { payload: { $case: "task", value: Task.fromJSON(o) } };
    else response = legacyPushNotificationToV1StreamResponse(o);
  } catch (cause) {
    throw new ValidationError(
      `The push body is not an A2A Task or event (${cause instanceof Error ? cause.message : String(cause)})`,
    );
  }
  const p = response.payload;
  switch (p?.$case) {
    case "task":
      return {
        taskId: p.value.id,
        state: p.value.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED,
        task: p.value,
      };
    case "statusUpdate":
      return { taskId: p.value.taskId, state: p.value.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED };
    case "artifactUpdate":
      return { taskId: p.value.taskId, state: TaskState.TASK_STATE_WORKING };
    case "message":
      return { taskId: p.value.taskId, state: TaskState.TASK_STATE_WORKING };
    default:
      throw new ValidationError("The push body is not an A2A Task or event: it carries nothing");
  }
}

const isV1Task = (o: Record<string, unknown>) => {
  const state = (o.status as { state?: unknown } | undefined)?.state;
  return typeof o.id === "string" && typeof state === "string" && state.startsWith("TASK_STATE_");
};

/** Submitted or working: the remote is still at it. */
export const stillRunning = (s: TaskState | undefined) =>
  s === TaskState.TASK_STATE_SUBMITTED || s === TaskState.TASK_STATE_WORKING;
