import type { TaskEvent } from "../domain/events.ts";
import { isTerminal } from "../domain/task-state.ts";
import type { TaskView } from "../domain/task-view.ts";
import { lastElement, taskDepth, tenantOf } from "../domain/urn.ts";
import {
  ATTR,
  contentCaptured,
  countTask,
  countWaiting,
  recordTaskSpan as writeTaskSpan,
} from "../kernel/tracing.ts";
import type { StateStore } from "../ports/state-store.ts";
import type { ResourceStore } from "../store/resource-store.ts";
import { usageOf } from "./usage.ts";

/**
 * The engine's spans that are written after the fact (see kernel/tracing.ts): a task's
 * `invoke_agent` span, when the task ends. Called only while tracing is on.
 */

/** What a task event just recorded (not a duplicate) tells the metrics, and the task's span when it ended. */
export async function observeTaskEvent(
  deps: { resources: ResourceStore; state: StateStore },
  event: TaskEvent,
  view: TaskView,
): Promise<void> {
  const entered = ENTERS[event.type];
  if (entered) countTask(entered, tenantOf(view.taskId));
  if (event.type === "UserInteractionRequested") countWaiting(1);
  else if (event.type === "UserInteractionResponded") countWaiting(-1);
  // A task that ends while it waits for a person: the question waits no more.
  else if (isTerminal(view.status) && view.pendingInteractionId) countWaiting(-1);
  if (isTerminal(view.status)) await recordTaskSpan(deps, view, event.at);
}

/** The state a task enters with each event that moves it. */
const ENTERS: Partial<Record<TaskEvent["type"], string>> = {
  TaskCreated: "open",
  TaskStarted: "in_progress",
  UserInteractionRequested: "awaiting_user",
  TaskCompleted: "done",
  TaskFailed: "failed",
  TaskCanceled: "canceled",
};

/** Writes the task's `invoke_agent` span: created .. ended, its assistant, election, usage and cost. */
export async function recordTaskSpan(
  deps: { resources: ResourceStore; state: StateStore },
  view: TaskView,
  endedAt: string,
): Promise<void> {
  if (!view.traceparent) return;
  const [task, usage] = await Promise.all([
    deps.resources.getAs("plan.Task", view.taskId),
    usageOf(deps, view.taskId),
  ]);
  const election = task?.election;
  const assistant = election?.assistant ?? view.assistant;
  const agent = assistant ? lastElement(assistant).id : "unassigned";
  writeTaskSpan(view, {
    name: `invoke_agent ${agent}`,
    end: endedAt,
    attributes: {
      [ATTR.operation]: "invoke_agent",
      [ATTR.agentName]: agent,
      [ATTR.agentId]: assistant,
      [ATTR.taskUrn]: view.taskId,
      [ATTR.tenant]: tenantOf(view.taskId),
      [ATTR.depth]: taskDepth(view.taskId),
      [ATTR.status]: view.status,
      [ATTR.electionScore]: election?.score,
      [ATTR.runnerUp]: election?.runnerUp ? lastElement(election.runnerUp.assistant).id : undefined,
      [ATTR.runnerUpScore]: election?.runnerUp?.score,
      // The task's and its subtree's, as the tree shows them.
      [ATTR.inputTokens]: usage.inputTokens,
      [ATTR.outputTokens]: usage.outputTokens,
      [ATTR.costUsd]: usage.costUsd,
      [ATTR.costUnknown]: usage.unpricedCalls,
      // A title is the planner's words, often the person's: content, kept out unless content is captured.
      ...(contentCaptured() ? { "arbor.task.title": view.title } : {}),
    },
    ...(view.status === "failed" ? { error: view.failureReason ?? "failed" } : {}),
  });
}
