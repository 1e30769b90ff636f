import type { Actor } from "../../domain/events.ts";
import type { Assistant, InteractionResource, TaskResource } from "../../domain/resources.ts";
import { schedule } from "../../domain/scheduler.ts";
import { isTerminal } from "../../domain/task-state.ts";
import type { TaskView } from "../../domain/task-view.ts";
import { parentUrn, type Urn } from "../../domain/urn.ts";
import { repairDocuments } from "../../knowledge/documents.ts";
import { indexRecorded } from "../../knowledge/resource-index.ts";
import { indexTools } from "../../tools/service/tool-index.ts";
import {
  agentActor,
  COMMANDS,
  type EngineDeps,
  type PlanCommand,
  type ResumeCommand,
  recordTask,
  send,
  sendReady,
  type TaskCommand,
} from "../context.ts";
import { requestInteraction } from "../interactions.ts";
import { admitLeaves, releaseLeaves, repairLeafSlots, sendReadyAsAllowed } from "../leaf-slots.ts";
import { redriveActivities } from "../turn/activity-step.ts";
import { type FreshLeaf, leafContext, runTurn } from "../turn/direct.ts";
import { waitsOnRemote } from "../turn/remote-calls.ts";
import { childrenOf } from "./children.ts";
import { ASSISTANT_TYPE } from "./election.ts";
import { announceOutput } from "./outcome.ts";
import { checkPlan, materialiseUnder } from "./planner.ts";
import { supervise } from "./supervisor.ts";

/**
 * Starting a task: a parent starts its children (supervisory mode), a leaf starts its inner loop
 * (direct mode). A task nobody fits waits for a person to assign it.
 */
export async function startTask(
  deps: EngineDeps,
  cmd: TaskCommand,
  /** Its child counts, when the caller just read them (startTasks). */
  known?: { counts: ChildCountsRead; leaves: string[] },
  /** Its view, or the task itself, when the caller just read or wrote it (the step queue, the plan step). */
  given: { view?: TaskView | undefined; task?: TaskResource | undefined } = {},
): Promise<void> {
  // The task's view, its parent's, the task itself and its child counts, read at once (a root's
  // parent is its message: no view).
  const parentId = parentUrn(cmd.taskId);
  const [view, parentView, task, counts] = await Promise.all([
    given.view ?? deps.tasks.view(cmd.taskId),
    parentId ? deps.tasks.view(parentId) : undefined,
    given.task ?? deps.resources.getAs("plan.Task", cmd.taskId),
    known ? known.counts : deps.tasks.childCounts(cmd.taskId),
  ]);
  // A leaf's start delivered again (Lambda's retry of a start that timed out in its first turn, a
  // duplicate) goes on from its transcript; the turn's claim keeps a turn still running from running
  // twice. A parent's children were started by its first start (or get re-driven by the watchdog).
  if (view?.status === "in_progress") {
    if (counts?.created) return;
    if ((await deps.resources.childUrns(cmd.taskId, "plan.Task")).length > 0) return;
    return runTurn(deps, { taskId: cmd.taskId });
  }
  if (view?.status !== "open") return;
  if (view.parentTaskId) {
    const parent = view.parentTaskId === parentId ? parentView : await deps.tasks.view(view.parentTaskId);
    if (parent?.status !== "in_progress") return;
  }
  if (!task) return;
  const assistant = task.election?.assistant;
  // A leaf's prompt context is read while its start is recorded (the leaf goes on in this step).
  const context = assistant && !counts?.created ? leafContext(deps, task) : undefined;
  const started = await recordTask(
    deps,
    "TaskStarted",
    { taskId: cmd.taskId as Urn, ...(assistant ? { assistant: assistant as Urn } : {}) },
    agentActor(assistant),
    "",
    view,
  );
  if (!assistant) return askForAssistant(deps, cmd.taskId);
  // Started just now (not a repeat): a leaf has no transcript yet.
  await proceed(
    deps,
    cmd.taskId,
    started.duplicate ? undefined : { view: started.view, task, context },
    counts,
    known?.leaves,
  );
}

type ChildCountsRead = Awaited<ReturnType<EngineDeps["tasks"]["childCounts"]>>;

/**
 * After TaskStarted (or an answer): children start (startTasks: a child that is itself a parent
 * right here, so a request's first leaves get their commands from this step, not from a chain of
 * steps one level each), or the leaf's inner loop runs, in this step.
 */
async function proceed(
  deps: EngineDeps,
  taskId: string,
  fresh?: FreshLeaf,
  counts?: ChildCountsRead,
  /** Where the leaves to start go, when a caller above starts them all at once (startTasks). */
  leaves?: string[],
): Promise<void> {
  // A task just started has its children's count (each TaskCreated adds to it in its
  // transaction): none is a leaf, without listing its children (a listing of the object store).
  if (fresh && !counts?.created) return runTurn(deps, { taskId }, fresh);
  const children = await childrenOf(deps, taskId, counts);
  if (children.length > 0) {
    await startTasks(
      deps,
      schedule(children.filter((c) => c.status === "open")).map((c) => c.taskId),
      leaves,
    );
    return;
  }
  await runTurn(deps, { taskId }, fresh);
}

/**
 * Starts tasks from this step: a parent here (its start recorded, its children started the same
 * way), a leaf by its ready command (it runs in a step of its own, with the tools' grants on AWS).
 * The leaves of the whole subtree are started together, once every parent in it is: their slots
 * taken in one change of the request's (leaf-slots.ts), their commands in one publish. The plan
 * step starts a request's root so. `leaves`: a caller above collects them (proceed, recursively).
 *
 * `keepRoot`: a single task that is itself a leaf, once it has a slot, is not sent but returned,
 * for the caller to start in its own step: the plan step does, so that a request of one task runs
 * without a hop to another step. Should that step die, the plan command delivered again starts
 * it again (planner.ts), as the leaf's ready command would have (its turns' and its calls' claims
 * keep a turn or a call that may still be running from running twice).
 */
export async function startTasks(
  deps: EngineDeps,
  taskIds: readonly string[],
  leaves?: string[],
  keepRoot = false,
): Promise<string | undefined> {
  const collected = leaves ?? [];
  const counts = await Promise.all(taskIds.map((id) => deps.tasks.childCounts(id)));
  const isParent = (i: number) => (counts[i]?.created ?? 0) > 0;
  collected.push(...taskIds.filter((_, i) => !isParent(i)));
  await Promise.all(
    taskIds.flatMap((taskId, i) =>
      isParent(i) ? [startTask(deps, { taskId }, { counts: counts[i], leaves: collected })] : [],
    ),
  );
  if (leaves !== undefined) return undefined;
  const admitted = await admitLeaves(deps, collected);
  const kept = keepRoot && taskIds.length === 1 && admitted[0] === taskIds[0] ? admitted.shift() : undefined;
  await sendReady(deps, admitted);
  return kept;
}

async function askForAssistant(deps: EngineDeps, taskId: string): Promise<void> {
  const tenantAssistants = await deps.resources.childUrns(taskId.split("/")[0] as string, ASSISTANT_TYPE);
  // Retired assistants (removed from the team) are not offered.
  const options = (await deps.resources.getMany(tenantAssistants.slice(0, 200)))
    .flatMap((a) => (a?.meta.type === "common.Assistant" ? [a as Assistant] : []))
    .filter((a) => a.retiredAt === undefined)
    .map((a) => ({ id: a.meta.id, label: a.meta.name }))
    .slice(0, 20);
  await requestInteraction(deps, taskId, "assign", {
    kind: "select",
    purpose: "assign_subtask",
    display: { title: "No assistant fits this task well enough. Who should take it?" },
    options,
  });
}

/** An interaction was answered: continue the task it belongs to, as its purpose says. */
export async function resume(deps: EngineDeps, cmd: ResumeCommand): Promise<void> {
  const interaction = await deps.resources.getAs("uip.Interaction", cmd.interactionUrn);
  const taskId = parentUrn(cmd.interactionUrn);
  if (interaction?.status !== "answered" || !taskId) return;
  const answer = interaction.response;
  const view = await deps.tasks.view(taskId);
  if (view?.status !== "in_progress") return;
  switch (interaction.purpose) {
    case "approve_plan": {
      if (answer?.selectedOptionId === "reject")
        return cancelTask(deps, taskId, { id: answer.actor, kind: "human" }, "the plan was not approved");
      const task = await deps.resources.getAs("plan.Task", taskId);
      const edited = answer?.inputValue
        ? checkPlan(JSON.parse(answer.inputValue), task?.budgets ?? {})
        : undefined;
      const subtasks = edited?.ok ? (edited.spec.subtasks ?? []) : (task?.subtasks ?? []);
      if (!task) return;
      if (subtasks.length === 0) {
        // The approved plan is a single task: it runs as a leaf, once somebody is to run it.
        if (!task.election?.assistant) return askForAssistant(deps, taskId);
        return send(deps, COMMANDS.turn, { taskId, turn: 1 }, taskId, "1");
      }
      await materialiseUnder(deps, subtasks, task, 0);
      return proceed(deps, taskId);
    }
    case "assign_subtask": {
      const task = await deps.resources.getAs("plan.Task", taskId);
      if (!task || !answer?.selectedOptionId) return;
      await deps.resources.put({ ...task, election: { assistant: answer.selectedOptionId, score: 1 } });
      // Its children start from here; a leaf's turns run in the turn step, which may call the model.
      if ((await childrenOf(deps, taskId)).length > 0) return proceed(deps, taskId);
      return send(deps, COMMANDS.turn, { taskId, turn: 1 }, taskId, `resume:${cmd.interactionUrn}`);
    }
    case "choose_strategy":
      // The parent's supervise step of the round applies the chosen way forward, once (ask-strategy.ts).
      return supervise(deps, taskId);
    default:
      // confirm_risky_action, request_info: the inner loop reads the answer.
      return send(deps, COMMANDS.turn, { taskId, turn: 0 }, taskId, `resume:${cmd.interactionUrn}`);
  }
}

/** Cancels a task and everything below it; its parent is told through its output, as for any ending. */
export async function cancelTask(
  deps: EngineDeps,
  taskId: string,
  actor: Actor,
  reason: string,
): Promise<void> {
  const subtree: TaskView[] = [];
  const walk = async (id: string) => {
    for (const child of await childrenOf(deps, id)) {
      await walk(child.taskId);
      subtree.push(child);
    }
  };
  await walk(taskId);
  for (const t of subtree) {
    if (!isTerminal(t.status))
      await recordTask(deps, "TaskCanceled", { taskId: t.taskId as Urn, reason }, actor, "cancel");
  }
  // Its leaves' slots go to the request's other leaves (their ends are announced by no one).
  await releaseLeaves(
    deps,
    subtree.map((t) => t.taskId),
  );
  const top = await deps.tasks.view(taskId);
  if (!top) return;
  // A task that ended otherwise keeps its output; a canceled one gets (again, after a crash) its notice.
  if (top.status === "done" || top.status === "failed") return;
  if (top.status !== "canceled")
    await recordTask(deps, "TaskCanceled", { taskId: taskId as Urn, reason }, actor, "cancel");
  await announceOutput(deps, taskId, `Task canceled: ${reason}`);
}

/**
 * The watchdog finds tasks that stopped moving (no event for `staleMs`) and drives them again:
 * every step is idempotent, so a re-sent command either continues lost work or does nothing. A
 * parent that never heard that its last child ended is itself a stalled in-progress task, so the
 * supervise call below also repairs a lost announcement.
 */
export async function watchdog(deps: EngineDeps, staleMs: number): Promise<{ redriven: number }> {
  const before = new Date(deps.clock().getTime() - staleMs).toISOString();
  let redriven = 0;
  // Made searchable first, so that its writes are done before the work it drives again starts: the
  // tasks, questions, requests and conversations recorded since the last pass
  // (knowledge/resource-index.ts), and the tools of tenants whose registered set changed
  // (tools/service/tool-index.ts). A pass that fails is tried again by the next.
  const indexing = async (what: string, pass: () => Promise<number>) => {
    const indexed = await pass().catch((error: Error) => {
      deps.log.warn(`indexing the ${what} failed; the next pass tries again`, { error });
      return 0;
    });
    if (indexed > 0) deps.log.info(`watchdog indexed ${what}`, { indexed });
  };
  await indexing("recorded tasks, questions and requests", () => indexRecorded(deps));
  await indexing("registered tools", () => indexTools(deps));
  // The status index only finds candidates: each is read again (it may have moved on since).
  const stillStale = (r: { status?: string; updatedAt: string } | undefined, status: string) =>
    r?.status === status && r.updatedAt < before;
  for (const listed of (
    await deps.state.byStatus<PlanCommand>("plan", "requested", { updatedBefore: before, limit: 1000 })
  ).items) {
    const marker = await deps.state.get<PlanCommand>(listed.key);
    if (!marker || !stillStale(marker, "requested")) continue;
    redriven++;
    await send(deps, COMMANDS.plan, marker.data, marker.data.messageUrn, `watchdog:${before}`);
  }
  for (const listed of await deps.tasks.stale("in_progress", before, 1000)) {
    const t = await deps.tasks.view(listed.taskId);
    if (!t || !stillStale(t, "in_progress")) continue;
    if (await waitsOnRemote(deps, t.taskId)) continue; // nothing runs: a remote agent has the call
    redriven++;
    const children = await childrenOf(deps, t.taskId);
    if (children.length > 0) {
      await supervise(deps, t.taskId);
      await sendReadyAsAllowed(
        deps,
        children.filter((c) => c.status === "open").map((c) => c.taskId),
      );
      continue;
    }
    // An answer whose resume was lost (an approved plan, an assignment) is resumed; a leaf takes its next turn.
    const answered = (
      (await deps.resources.children(t.taskId, "uip.Interaction")) as InteractionResource[]
    ).filter(
      (i) => i.status === "answered" && (i.purpose === "approve_plan" || i.purpose === "assign_subtask"),
    );
    if (answered.length > 0) {
      for (const i of answered)
        await send(deps, COMMANDS.resume, { interactionUrn: i.meta.id }, i.meta.id, `watchdog:${before}`);
    } else {
      await send(deps, COMMANDS.turn, { taskId: t.taskId, turn: 0 }, t.taskId, `watchdog:${before}`);
    }
  }
  for (const listed of await deps.tasks.stale("open", before, 1000)) {
    const t = await deps.tasks.view(listed.taskId);
    if (!t || !stillStale(t, "open")) continue;
    // A leaf still waiting for a slot of its request is not stalled.
    const isParent = ((await deps.tasks.childCounts(t.taskId))?.created ?? 0) > 0;
    if (!isParent && (await admitLeaves(deps, [t.taskId])).length === 0) continue;
    redriven++;
    await send(deps, COMMANDS.ready, { taskId: t.taskId }, t.taskId, `watchdog:${before}`);
  }
  // Slots held by leaves that ended without freeing them (their step died).
  redriven += await repairLeafSlots(deps, before);
  // Fire-and-forget activities still to run (activity-step.ts): they may outlive their task.
  redriven += await redriveActivities(deps, before);
  // Documents a crash left pending, processing or half deleted (knowledge/documents.ts).
  redriven += await repairDocuments(deps, before);
  if (redriven > 0) deps.log.info("watchdog re-drove stalled work", { redriven });
  return { redriven };
}
