import type { Budgets, InteractionResource } from "../domain/resources.ts";
import type { TaskStatus } from "../domain/task-state.ts";
import type { TaskView } from "../domain/task-view.ts";
import { lastElement, parentUrn } from "../domain/urn.ts";
import type { EngineDeps } from "./context.ts";
import { childrenOf } from "./steps/children.ts";
import { usageOf } from "./usage.ts";

/**
 * The whole tree of a request as a person reads it: per task its status, the elected assistant with
 * its score, tokens and cost, and the questions waiting on it, children nested.
 *
 * Bounded: at most `maxTasks` tasks are read, breadth first (the top levels are what a person looks
 * at first; a 10,000-task tree is never one unbounded response nor 10,000 reads per call). When the
 * bound cuts the tree, `truncated` is true and each cut task says how many children it has
 * (`childCount`) with an empty `children`; its own subtree is one more call away.
 */
export const DEFAULT_TREE_TASKS = 200;
export const MAX_TREE_TASKS = 2000;

export interface PendingQuestion {
  urn: string;
  purpose: string;
  title: string;
}

export interface TreeNode {
  taskId: string;
  parentTaskId: string | null;
  title: string;
  status: TaskStatus;
  /** The assistant elected, its similarity score, and the one that came second (when there was one). */
  assistant: {
    urn: string;
    name: string;
    score: number;
    runnerUp?: { urn: string; name: string; score: number };
  } | null;
  /** The corrective round that made the task (0: the plan itself). */
  round: number;
  /** The limits in force for the task's subtree (inherited from its parent's, never above them). */
  budgets: Budgets;
  /** ISO 8601: when the task was created, and when it last changed. */
  createdAt: string;
  updatedAt: string;
  /**
   * The task's and its subtree's: `costUsd` counts the calls of priced models only; while
   * `unpricedCalls` is above 0 the cost is unknown (a model without a price answered some calls).
   */
  usage: {
    inputTokens: number;
    outputTokens: number;
    tokens: number;
    costUsd: number;
    unpricedCalls: number;
  };
  pendingInteractions: PendingQuestion[];
  childCount: number;
  children: TreeNode[];
}

export interface TaskTree {
  root: TreeNode;
  taskCount: number;
  truncated: boolean;
  /** The questions waiting anywhere below the root, whole (also those of tasks the bound left out). */
  pending: readonly InteractionResource[];
}

/** What the walk reads: the task views, the Task resources, the usage records (the CLI's Runtime has them too). */
export type TreeDeps = Pick<EngineDeps, "tasks" | "resources" | "state">;

/** The parent task of a task URN, or null at the root of the request (its parent is a message). */
function parentTaskOf(taskId: string): string | null {
  const parent = parentUrn(taskId);
  return parent && lastElement(parent).type === "Task" ? parent : null;
}

async function nodeOf(
  deps: TreeDeps,
  view: TaskView,
  pending: readonly InteractionResource[],
): Promise<TreeNode> {
  const task = await deps.resources.getAs("plan.Task", view.taskId);
  const usage = await usageOf(deps, view.taskId);
  const election = task?.election;
  return {
    taskId: view.taskId,
    parentTaskId: parentTaskOf(view.taskId),
    title: view.title,
    status: view.status,
    assistant: election
      ? {
          urn: election.assistant,
          name: lastElement(election.assistant).id,
          score: election.score,
          ...(election.runnerUp
            ? {
                runnerUp: {
                  urn: election.runnerUp.assistant,
                  name: lastElement(election.runnerUp.assistant).id,
                  score: election.runnerUp.score,
                },
              }
            : {}),
        }
      : null,
    round: task?.round ?? 0,
    budgets: task?.budgets ?? {},
    createdAt: view.createdAt,
    updatedAt: view.updatedAt,
    usage: {
      inputTokens: usage.inputTokens,
      outputTokens: usage.outputTokens,
      tokens: usage.inputTokens + usage.outputTokens,
      costUsd: usage.costUsd,
      unpricedCalls: usage.unpricedCalls,
    },
    pendingInteractions: pending.map((i) => ({
      urn: i.meta.id,
      purpose: i.purpose,
      title: i.display.title,
    })),
    childCount: 0,
    children: [],
  };
}

/**
 * Walks the tree under `root` breadth first, at most `maxTasks` tasks. `pending` are the questions
 * waiting below the root (Engine.pendingInteractions), grouped here by the task that asks.
 */
export async function taskTree(
  deps: TreeDeps,
  root: TaskView,
  pending: readonly InteractionResource[],
  maxTasks: number,
): Promise<TaskTree> {
  const asked = new Map<string, InteractionResource[]>();
  for (const i of pending) {
    const task = parentUrn(i.meta.id) as string;
    asked.set(task, [...(asked.get(task) ?? []), i]);
  }
  const top = await nodeOf(deps, root, asked.get(root.taskId) ?? []);
  let count = 1;
  let truncated = false;
  const queue: TreeNode[] = [top];
  for (let node = queue.shift(); node; node = queue.shift()) {
    // Confirmed against the base records: a lagging index would show a done task still running.
    const children = await childrenOf(deps, node.taskId);
    node.childCount = children.length;
    for (const child of children) {
      if (count >= maxTasks) {
        truncated = true;
        break;
      }
      const built = await nodeOf(deps, child, asked.get(child.taskId) ?? []);
      node.children.push(built);
      queue.push(built);
      count++;
    }
  }
  return { root: top, taskCount: count, truncated, pending };
}
