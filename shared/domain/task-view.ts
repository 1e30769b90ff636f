import { isTaskEvent, type StoredEvent } from "./events.ts";
import type { Priority } from "./resources.ts";
import { type TaskStatus, transition } from "./task-state.ts";

/**
 * TaskView: the read model of one task, projected from its event stream by a pure reducer.
 * Children are not listed on the parent: each child names its `parentTaskId`, and the state store
 * indexes records by parent (so ten children finishing at once never contend for one record).
 * `version` is the seq of the last event applied, which makes the reducer idempotent (an event
 * at or below it changes nothing) and doubles as the expected version for the next append.
 */
export interface TaskView {
  taskId: string;
  parentTaskId?: string;
  title: string;
  intent: string;
  createdBy: string;
  assistant?: string;
  priority: Priority;
  status: TaskStatus;
  pendingInteractionId?: string;
  lastInteractionId?: string;
  summary?: string;
  output?: string;
  /** The files it made (its tools' artifacts; a parent's: its children's), by URN. */
  artifacts?: string[];
  failureReason?: string;
  createdAt: string;
  updatedAt: string;
  version: number;
  /** The trace context its TaskCreated was recorded in: its spans derive from it (kernel/tracing.ts). */
  traceparent?: string;
}

/**
 * Applies one stored event of the task's own stream. Returns the same object when the event does
 * not concern this task or was already applied. Throws InvalidTransitionError on an event the
 * state machine forbids (the log never holds one: appends are checked by the same function).
 */
export function reduceTaskView(view: TaskView | undefined, event: StoredEvent): TaskView | undefined {
  if (!isTaskEvent(event)) return view;
  if (view && (event.payload.taskId !== view.taskId || event.seq <= view.version)) return view;
  if (!view && event.type !== "TaskCreated") {
    // A stream that does not begin with TaskCreated is not a task stream.
    transition(event.payload.taskId, undefined, event.type);
  }
  const status = transition(event.payload.taskId, view?.status, event.type);
  const touched = { status, updatedAt: event.at, version: event.seq };

  switch (event.type) {
    case "TaskCreated": {
      const p = event.payload;
      const created: TaskView = {
        taskId: p.taskId,
        title: p.title,
        intent: p.intent,
        createdBy: event.actor.id,
        priority: p.priority,
        createdAt: event.at,
        ...touched,
      };
      if (p.parentTaskId) created.parentTaskId = p.parentTaskId;
      if (p.assistant) created.assistant = p.assistant;
      if (event.traceparent) created.traceparent = event.traceparent;
      return created;
    }
    case "TaskStarted": {
      const next: TaskView = { ...(view as TaskView), ...touched };
      if (event.payload.assistant) next.assistant = event.payload.assistant;
      return next;
    }
    case "UserInteractionRequested":
      return {
        ...(view as TaskView),
        ...touched,
        pendingInteractionId: event.payload.interactionId,
        lastInteractionId: event.payload.interactionId,
      };
    case "UserInteractionResponded": {
      const { pendingInteractionId: _answered, ...rest } = view as TaskView;
      return { ...rest, ...touched };
    }
    case "TaskCompleted": {
      const next: TaskView = { ...(view as TaskView), ...touched };
      if (event.payload.summary !== undefined) next.summary = event.payload.summary;
      if (event.payload.output !== undefined) next.output = event.payload.output;
      if (event.payload.artifacts?.length) next.artifacts = event.payload.artifacts;
      return next;
    }
    case "TaskFailed":
      return { ...(view as TaskView), ...touched, failureReason: event.payload.reason };
    case "TaskCanceled": {
      const { pendingInteractionId: _dropped, ...rest } = view as TaskView;
      return { ...rest, ...touched };
    }
  }
}

/** Folds a whole stream. */
export function projectTaskView(events: Iterable<StoredEvent>): TaskView | undefined {
  let view: TaskView | undefined;
  for (const e of events) view = reduceTaskView(view, e);
  return view;
}
