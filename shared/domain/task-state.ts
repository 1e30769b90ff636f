import { InvalidTransitionError } from "../kernel/errors.ts";
import type { TaskEvent } from "./events.ts";

/**
 * The task state machine (seeds/002 section 7.3), enforced on every transition:
 *
 *   (TaskCreated) open ──TaskStarted──> in_progress ──TaskCompleted──> done
 *                  │                     │  ▲    └──TaskFailed──> failed
 *                  │                     │  └─UserInteractionResponded─┐
 *                  │                     └─UserInteractionRequested──> awaiting_user
 *                  ├──TaskFailed──> failed
 *                  └──TaskCanceled──> canceled
 *
 * Arbor adds three edges the seed leaves out, because cancelling a subtree and ending a wait
 * must work on running tasks too: in_progress -> canceled, awaiting_user -> canceled and
 * awaiting_user -> failed (an interaction that can never be answered, or a wall-time budget).
 * done, failed and canceled are terminal.
 */
export const TASK_STATUSES = ["open", "in_progress", "awaiting_user", "done", "failed", "canceled"] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

type Transitions = { readonly [S in TaskStatus]: Partial<Record<TaskEvent["type"], TaskStatus>> };

export const TRANSITIONS: Transitions = {
  open: { TaskStarted: "in_progress", TaskFailed: "failed", TaskCanceled: "canceled" },
  in_progress: {
    UserInteractionRequested: "awaiting_user",
    TaskCompleted: "done",
    TaskFailed: "failed",
    TaskCanceled: "canceled",
  },
  awaiting_user: { UserInteractionResponded: "in_progress", TaskFailed: "failed", TaskCanceled: "canceled" },
  done: {},
  failed: {},
  canceled: {},
};

export const isTerminal = (s: TaskStatus): boolean => s === "done" || s === "failed" || s === "canceled";

/** The state after `eventType`, or undefined when the machine does not allow it. */
export function nextStatus(
  from: TaskStatus | undefined,
  eventType: TaskEvent["type"],
): TaskStatus | undefined {
  if (from === undefined) return eventType === "TaskCreated" ? "open" : undefined;
  return TRANSITIONS[from][eventType];
}

/** Like nextStatus, but throws InvalidTransitionError naming the task, its state and the event. */
export function transition(
  taskId: string,
  from: TaskStatus | undefined,
  eventType: TaskEvent["type"],
): TaskStatus {
  const to = nextStatus(from, eventType);
  if (to === undefined) throw new InvalidTransitionError(taskId, from ?? "(not created)", eventType);
  return to;
}
