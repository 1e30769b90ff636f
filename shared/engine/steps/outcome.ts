import { withMeta } from "../../domain/resources.ts";
import type { TaskView } from "../../domain/task-view.ts";
import { parentUrn, type Urn } from "../../domain/urn.ts";
import type { PutResult } from "../../store/resource-store.ts";
import { agentActor, announcePut, ENGINE, type EngineDeps, recordTask, SimulatedCrash } from "../context.ts";
import { releaseLeaves } from "../leaf-slots.ts";

/**
 * How a task ends. Every ending writes the task's `output` Message under its URN, records the
 * terminal event, then announces the output: that RESOURCE_PUT is what wakes the parent's
 * supervisor, whatever the outcome; while the engine runs its steps, the step that ended the task
 * counts and judges the parent itself first (EngineDeps.judgeParent), and the delivery finds it done. Each part is idempotent, so a crash anywhere is repaired by
 * running the same ending again.
 */
export const outputMeta = (taskId: string) =>
  withMeta({ type: "common.Message", name: "output", parent: taskId });

export async function completeTask(
  deps: EngineDeps,
  taskId: string,
  content: string,
  assistant?: string,
  /** The task's view as the caller has just read it (recordTask's `known`). */
  known?: TaskView,
  made: Made = {},
): Promise<void> {
  // The view its end is recorded on, read beside the output's write when the caller has none (a
  // write in between makes the record conflict, and it reads again).
  const [written, view] = await Promise.all([
    deps.resources.put({
      meta: outputMeta(taskId),
      role: "assistant",
      content,
      ...(made.citations?.length ? { citations: made.citations } : {}),
    }),
    known ?? deps.tasks.view(taskId),
  ]);
  return completed(deps, taskId, written, content, assistant, view, made);
}

/** What a task's end records beside its answer. */
export interface Made {
  /** What the answer cites of its context (knowledge/search.ts citationsIn): on the output. */
  citations?: readonly string[];
  /** The files it made (its tools' artifacts; a parent's, its children's): on TaskCompleted. */
  artifacts?: readonly string[];
}

/** The rest of completeTask, once the output is written (a leaf writes its final answer as the output). */
export async function completed(
  deps: EngineDeps,
  taskId: string,
  { urn, contentHash }: PutResult,
  content: string,
  assistant?: string,
  known?: TaskView,
  made: Made = {},
): Promise<void> {
  deps.faults?.hit("after-write", "complete");
  const artifacts = made.artifacts?.slice(0, 100) as Urn[] | undefined;
  await recordTask(
    deps,
    "TaskCompleted",
    {
      taskId: taskId as Urn,
      output: urn,
      summary: content.slice(0, 500),
      ...(artifacts?.length ? { artifacts } : {}),
    },
    agentActor(assistant),
    "",
    known,
  );
  await announcedAndJudged(deps, urn, contentHash);
}

/**
 * The task's end announced (for the notify path, the index, operators and the supervise step), and
 * its parent judged here, at once: the judgment reads the end's record, not its notice.
 */
async function announcedAndJudged(deps: EngineDeps, urn: string, contentHash: string): Promise<void> {
  const taskId = parentUrn(urn);
  await Promise.all([
    announcePut(deps, urn, "common.Message", "output", contentHash),
    judgeParentHere(deps, urn),
    // A leaf's slot goes to the next leaf of its request waiting for one (leaf-slots.ts).
    taskId ? releaseLeaves(deps, [taskId]) : undefined,
  ]);
}

/**
 * The parent of the task whose output `urn` is, counted (and judged, when it was the last child)
 * in this step (EngineDeps.judgeParent). A failure here fails nothing of the task that ended: its
 * output's delivery to the supervise step judges the parent instead. A simulated crash is the
 * process dying, and runs out.
 */
async function judgeParentHere(deps: EngineDeps, urn: string): Promise<void> {
  if (!deps.judgeParent) return;
  try {
    await deps.judgeParent(urn);
  } catch (error) {
    if (error instanceof SimulatedCrash) throw error;
    deps.log.warn(
      "the parent could not be judged in the step that ended its child; its supervise step will",
      {
        output: urn,
        error: error instanceof Error ? error : String(error),
      },
    );
  }
}

/**
 * Writes and announces the output of a task that ended without a result (canceled), without
 * recording an event (the caller already did).
 */
export async function announceOutput(deps: EngineDeps, taskId: string, content: string): Promise<void> {
  const { urn, contentHash } = await deps.resources.put({
    meta: outputMeta(taskId),
    role: "assistant",
    content,
    isError: true,
  });
  await announcedAndJudged(deps, urn, contentHash);
}

export async function failTask(deps: EngineDeps, taskId: string, reason: string): Promise<void> {
  const { urn, contentHash } = await deps.resources.put({
    meta: outputMeta(taskId),
    role: "assistant",
    content: `Task failed: ${reason}`,
    isError: true,
  });
  const view = await deps.tasks.view(taskId);
  if (view?.status !== "failed")
    await recordTask(deps, "TaskFailed", { taskId: taskId as Urn, reason: reason.slice(0, 8000) }, ENGINE);
  await announcedAndJudged(deps, urn, contentHash);
}

/**
 * Indexes a finished task's output so later tasks of the tenant find it as context. Runs from its
 * own subscription, off the completion path: a parent never waits for the index.
 */
export async function indexOutput(
  deps: EngineDeps,
  detail: { urn?: unknown; name?: unknown },
): Promise<void> {
  if (detail.name !== "output" || typeof detail.urn !== "string") return;
  const message = await deps.resources.getAs("common.Message", detail.urn);
  const content = message?.content;
  if (!content || message.isError) return;
  const [vector] = await deps.embedder.embed([content]);
  if (vector)
    await deps.index.upsert([
      { key: detail.urn, vector, type: "common.Message", metadata: { task: message.meta.parent ?? "" } },
    ]);
}

/** The output of a finished task, or undefined. */
export async function outputOf(deps: EngineDeps, taskId: string): Promise<string | undefined> {
  return (await deps.resources.getAs("common.Message", outputMeta(taskId).id))?.content;
}
