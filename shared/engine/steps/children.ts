import { isTerminal } from "../../domain/task-state.ts";
import type { TaskView } from "../../domain/task-view.ts";
import type { EngineDeps } from "../context.ts";

/**
 * A task's children as the engine decides on them. The byParent index (a DynamoDB GSI) is only
 * eventually consistent: right after a write it may miss a new child, or show a child in a status
 * it has left. So it only finds keys, and the base records decide:
 * - a child it lists in a terminal status is done with (terminal statuses never change); any
 *   other is read again, consistently;
 * - the parent's child count (a consistent read; `created` is added in the transaction of each
 *   TaskCreated) says how many there are: when the index lists fewer, the keys come from the
 *   object store instead, whose listings are consistent (S3, files, SQLite) and where every
 *   child's Task resource is written before its TaskCreated is recorded.
 * Children in URN order, as TaskLog.children.
 */
export async function childrenOf(
  deps: Pick<EngineDeps, "tasks" | "resources">,
  taskId: string,
  /** The parent's child counts, when the caller just read them (consistently). */
  givenCounts?: Awaited<ReturnType<EngineDeps["tasks"]["childCounts"]>>,
): Promise<TaskView[]> {
  const [counts, listed] = await Promise.all([
    givenCounts ?? deps.tasks.childCounts(taskId),
    deps.tasks.children(taskId),
  ]);
  const confirmed = await Promise.all(
    listed.map(async (c) => (isTerminal(c.status) ? c : await deps.tasks.view(c.taskId))),
  );
  const found = confirmed.filter((v): v is TaskView => v !== undefined);
  if (counts && found.length >= (counts.created ?? 0)) return found;
  // The index lags (or the parent predates child counts): keys from the object store.
  const known = new Map(found.map((v) => [v.taskId, v]));
  const urns = await deps.resources.childUrns(taskId, "plan.Task");
  const views = await Promise.all(urns.map(async (u) => known.get(u) ?? (await deps.tasks.view(u))));
  // A Task resource without a view: its TaskCreated is not recorded (yet), it is no child so far.
  return views.filter((v): v is TaskView => v?.parentTaskId === taskId);
}
