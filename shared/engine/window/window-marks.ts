import type { Actor } from "../../domain/events.ts";
import { isTerminal } from "../../domain/task-state.ts";
import { ConflictError, NotFoundError } from "../../kernel/errors.ts";
import type { EngineDeps } from "../context.ts";
import { childrenOf } from "../steps/children.ts";

/**
 * `truncate(taskId, keepLast)` and `clear(taskId)` on a leaf's conversation (its inner loop's
 * transcript). The transcript's Messages are the engine's resumable state and its record, so
 * nothing is deleted: a mark says from which turn on the conversation is sent to the model, and
 * the window (window.ts) leaves out every turn before it. The task's prompt is always sent: without
 * it the model would not know what it is working on.
 *
 *   window#<task URN>   kind "conversation-window", parent the task:
 *                       { fromTurn, marks: [{ at, by, action, keepLast?, turns, fromTurn }, ...] }
 *
 * Rules:
 * - truncate keeps the newest `keepLast` turns stored now: fromTurn = turns - keepLast + 1;
 *   clear keeps none: fromTurn = turns + 1 (the turns taken from now on are sent).
 * - A mark never moves back: fromTurn is the larger of the old and the new one (a truncate after a
 *   clear does not bring cleared turns back).
 * - Each mark is added to `marks` with who made it and when; marks are only ever added (the record
 *   is written on its version, so two at once both land, one after the other). At most MAX_MARKS.
 * - Only a leaf that has not ended: a task that is not a leaf (its children have the
 *   conversations), or that has ended, is refused (ConflictError), and nothing is written.
 * - The window honours a mark from the next step of the loop (window-context.ts).
 * Who may: the caller checks first (a write to the task: the conversation's owner or an admin;
 * http-conversation.ts).
 */
export const WINDOW_MARK_KIND = "conversation-window";
export const MAX_MARKS = 500;
export const windowMarkKey = (taskId: string) => `window#${taskId}`;

export interface WindowMark {
  at: string;
  by: Actor;
  action: "truncate" | "clear";
  keepLast?: number;
  /** Turns stored when the mark was made. */
  turns: number;
  /** The first turn sent from then on. */
  fromTurn: number;
}

export interface WindowMarks {
  fromTurn: number;
  marks: WindowMark[];
}

/** The first turn of `taskId`'s conversation the window may send (1 when none was truncated). */
export async function windowStart(deps: Pick<EngineDeps, "state">, taskId: string): Promise<number> {
  const record = await deps.state.get<WindowMarks>(windowMarkKey(taskId));
  return record?.data.fromTurn ?? 1;
}

export async function windowMarks(
  deps: Pick<EngineDeps, "state">,
  taskId: string,
): Promise<WindowMarks | undefined> {
  return (await deps.state.get<WindowMarks>(windowMarkKey(taskId)))?.data;
}

/** Marks the conversation of leaf `taskId`: keep the newest `keepLast` turns (0 = clear). */
export async function markWindow(
  deps: EngineDeps,
  taskId: string,
  request: { action: "truncate"; keepLast: number } | { action: "clear" },
  by: Actor,
): Promise<WindowMark> {
  const view = await deps.tasks.view(taskId);
  if (!view) throw new NotFoundError("Task", taskId);
  if (isTerminal(view.status))
    throw new ConflictError(`Task ${taskId} has ended (${view.status}): its conversation is kept as it is`);
  const task = await deps.resources.getAs("plan.Task", taskId);
  if ((task?.subtasks?.length ?? 0) > 0 || (await childrenOf(deps, taskId)).length > 0)
    throw new ConflictError(
      `Task ${taskId} is not a leaf: its subtasks hold the conversations; truncate or clear one of them`,
    );
  const turns = await storedTurns(deps, taskId);
  const keep = request.action === "clear" ? 0 : Math.min(request.keepLast, turns);
  for (let attempt = 1; ; attempt++) {
    const current = await deps.state.get<WindowMarks>(windowMarkKey(taskId));
    const marks = current?.data.marks ?? [];
    if (marks.length >= MAX_MARKS)
      throw new ConflictError(`Task ${taskId} has ${MAX_MARKS} marks already: no more are recorded`);
    const fromTurn = Math.max(current?.data.fromTurn ?? 1, turns - keep + 1);
    const at = deps.clock().toISOString();
    const mark: WindowMark = {
      at,
      by,
      action: request.action,
      ...(request.action === "truncate" ? { keepLast: request.keepLast } : {}),
      turns,
      fromTurn,
    };
    try {
      await deps.state.transact([
        {
          op: "put",
          record: {
            key: windowMarkKey(taskId),
            kind: WINDOW_MARK_KIND,
            parent: taskId,
            updatedAt: at,
            data: { fromTurn, marks: [...marks, mark] } satisfies WindowMarks,
          },
          expectedVersion: current?.version ?? 0,
        },
      ]);
    } catch (e) {
      if (e instanceof ConflictError && attempt < 5) continue; // another mark landed first: add after it
      throw e;
    }
    deps.log.info("conversation marked", { taskId, ...mark, by: by.id });
    await deps.untilDurable(); // a mark acknowledged is a mark on disk
    return mark;
  }
}

/** How many turns of `taskId`'s inner loop are stored (turn-0001 ... turn-NNNN, without gaps). */
async function storedTurns(deps: EngineDeps, taskId: string): Promise<number> {
  const names = new Set((await deps.resources.children(taskId, "common.Message")).map((m) => m.meta.name));
  let n = 0;
  while (names.has(`turn-${String(n + 1).padStart(4, "0")}`)) n++;
  return n;
}
