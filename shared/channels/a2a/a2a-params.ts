import { RequestMalformedError } from "@a2a-js/sdk/errors";
import type { A2aVersion } from "./a2a-transport.ts";

/**
 * What the methods that name a task need in their params, checked on the request as sent (as
 * a2a-input.ts checks a send) before the SDK translates it: the SDK's 0.3 layer reads
 * `params.pushNotificationConfig.id` of a config that is not there, and hands an absent task id
 * on, so that a request missing one would end as an internal error (-32603) or a task not found
 * instead of what it is, invalid params (-32602).
 *
 *   - a task id (`id`, or `taskId` where the method has it so) is a non-empty string;
 *   - `historyLength` is a whole number, 0 or more (A2A 1.0 §3.2.4: a negative one means nothing);
 *   - a 0.3 push config to set is an object, and a config to delete names its id.
 *
 * 1.0's JSON takes either case for a field (the SDK reads `history_length` as `historyLength`).
 */
type Check = (value: unknown) => string | undefined;

const taskId: Check = (v) =>
  typeof v === "string" && v.trim() !== "" ? undefined : "is required: the task's id (a non-empty string)";
const configId: Check = (v) =>
  typeof v === "string" && v.trim() !== ""
    ? undefined
    : "is required: the push config's id (a non-empty string)";
const optional =
  (check: Check): Check =>
  (v) =>
    v === undefined || v === null ? undefined : check(v);
const count: Check = (v) =>
  Number.isInteger(v) && (v as number) >= 0 ? undefined : "must be a whole number, 0 or more";
const text: Check = (v) => (typeof v === "string" ? undefined : "must be a string");
const object: Check = (v) =>
  typeof v === "object" && v !== null && !Array.isArray(v)
    ? undefined
    : "is required: an object with the url to push to";

/** Per version and method: each field and its check (a field under both its names in 1.0). */
const PARAMS: Record<A2aVersion, Record<string, Record<string, Check>>> = {
  "0.3": {
    "tasks/get": { id: taskId, historyLength: optional(count) },
    "tasks/cancel": { id: taskId },
    "tasks/resubscribe": { id: taskId },
    "tasks/pushNotificationConfig/set": { taskId, pushNotificationConfig: object },
    "tasks/pushNotificationConfig/get": { id: taskId, pushNotificationConfigId: optional(text) },
    "tasks/pushNotificationConfig/list": { id: taskId },
    "tasks/pushNotificationConfig/delete": { id: taskId, pushNotificationConfigId: configId },
  },
  "1.0": {
    GetTask: { id: taskId, historyLength: optional(count) },
    CancelTask: { id: taskId },
    SubscribeToTask: { id: taskId },
    ListTasks: { historyLength: optional(count) },
    CreateTaskPushNotificationConfig: { taskId },
    GetTaskPushNotificationConfig: { taskId, id: configId },
    ListTaskPushNotificationConfigs: { taskId },
    DeleteTaskPushNotificationConfig: { taskId, id: configId },
  },
};

/** snake_case of a camelCase field: the other name 1.0's JSON reads it by. */
const snake = (field: string) => field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** The error for params the method cannot act on, or undefined (the SDK checks the rest). */
export function paramsProblem(body: Record<string, unknown>, version: A2aVersion): Error | undefined {
  const fields = PARAMS[version][body.method as string];
  const params = body.params;
  if (!fields || typeof params !== "object" || params === null || Array.isArray(params)) return undefined;
  const p = params as Record<string, unknown>;
  for (const [field, check] of Object.entries(fields)) {
    const value = p[field] ?? (version === "1.0" ? p[snake(field)] : undefined);
    const problem = check(value);
    if (problem) return new RequestMalformedError(`Invalid params: params.${field} ${problem}`);
  }
  return undefined;
}
