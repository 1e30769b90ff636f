import { createHash } from "node:crypto";
import type { InteractionResource } from "../../domain/resources.ts";
import { conversationOf } from "../../domain/urn.ts";
import type { EngineDeps } from "../../engine/context.ts";
import { waitingInTree } from "../../engine/interactions.ts";
import { type TreeNode, taskTree } from "../../engine/task-tree.ts";
import { notifiedAnswer } from "../payloads.ts";
import { type Standing, standing } from "../standing.ts";
import type { ThreadQuestion, ThreadSnapshot, ThreadTask } from "./types.ts";

/**
 * What a chat thread shows of a request, read from the state (never from an event): built when a
 * delivery is recorded for a chat subscription (notify/reconcile.ts) and sent as it is. How to
 * drive it:
 *
 *   const s = await threadSnapshot(deps, rootTaskUrn);          // reads the standing too
 *   const s = await threadSnapshot(deps, rootTaskUrn, { standing, at });   // one already read
 *   threadDigest(s)   // what the thread shows, as a short hash: the same digest, the same view
 *
 * The tasks: the request's tree breadth first (engine/task-tree.ts), at most THREAD_TASKS of them,
 * each with its depth and its elected assistant's name (`taskCount` counts those read, `truncated`
 * says the tree has more). The questions: those waiting anywhere in the tree (waitingInTree),
 * at most THREAD_QUESTIONS. The answer is cut as notifications cut it (notifiedAnswer).
 */
export const THREAD_TASKS = 30;
export const THREAD_QUESTIONS = 20;

export async function threadSnapshot(
  deps: EngineDeps,
  rootTaskUrn: string,
  known: { standing?: Standing; at?: Date } = {},
): Promise<ThreadSnapshot> {
  const s = known.standing ?? (await standing(deps, rootTaskUrn));
  const at = (known.at ?? deps.clock()).toISOString();
  const view = s.view;
  const tree = view ? await taskTree(deps, view, [], THREAD_TASKS) : undefined;
  const tasks = tree ? await flatten(deps, tree.root) : [];
  const waiting =
    s.state === "working" || s.state === "input-required" ? await waitingInTree(deps, rootTaskUrn) : [];
  const snapshot: ThreadSnapshot = {
    rootTaskUrn,
    conversationUrn: conversationOf(rootTaskUrn) ?? "",
    title: view?.title ?? "",
    state: s.state,
    tasks,
    taskCount: tree?.taskCount ?? 0,
    truncated: tree?.truncated ?? false,
    questions: waiting.slice(0, THREAD_QUESTIONS).map(questionOf),
    at,
    ...(tree
      ? {
          usage: {
            tokens: tree.root.usage.tokens,
            costUsd: tree.root.usage.costUsd,
            unpricedCalls: tree.root.usage.unpricedCalls,
          },
        }
      : {}),
  };
  if (s.state === "completed") snapshot.answer = notifiedAnswer(s.output);
  if (s.state === "failed" || s.state === "canceled") snapshot.reason = s.reason.slice(0, 4000);
  return bounded(snapshot);
}

/**
 * A delivery's body is stored with it (a DynamoDB item holds 400 KB): past MAX_SNAPSHOT_CHARS the
 * questions' content (a plan's JSON, a tool call's arguments) is left out; their titles, options
 * and bindings stay (the full question is one read away: GET /v1/tasks/<urn>/interactions).
 */
export const MAX_SNAPSHOT_CHARS = 200_000;

function bounded(s: ThreadSnapshot): ThreadSnapshot {
  if (JSON.stringify(s).length <= MAX_SNAPSHOT_CHARS) return s;
  return {
    ...s,
    questions: s.questions.map((q) => {
      const { content: _, ...display } = q.display;
      return { ...q, display };
    }),
  };
}

/** The tree's tasks breadth first, with depth and the elected assistant's name (its resource's). */
async function flatten(deps: EngineDeps, root: TreeNode): Promise<ThreadTask[]> {
  const order: { node: TreeNode; depth: number }[] = [];
  const queue = [{ node: root, depth: 0 }];
  for (let next = queue.shift(); next; next = queue.shift()) {
    order.push(next);
    for (const child of next.node.children) queue.push({ node: child, depth: next.depth + 1 });
  }
  const assistantUrns = [
    ...new Set(order.flatMap(({ node }) => (node.assistant ? [node.assistant.urn] : []))),
  ];
  const names = new Map<string, string>();
  const found = await deps.resources.getMany(assistantUrns);
  assistantUrns.forEach((urn, i) => {
    const a = found[i];
    if (a?.meta.type === "common.Assistant") names.set(urn, a.meta.name);
  });
  return order.map(({ node, depth }) => ({
    taskId: node.taskId,
    depth,
    title: node.title,
    status: node.status,
    ...(node.assistant ? { assistant: names.get(node.assistant.urn) ?? node.assistant.name } : {}),
  }));
}

/** A question as a thread shows it (waiting: no `answered`). */
export function questionOf(i: InteractionResource): ThreadQuestion {
  return {
    urn: i.meta.id,
    kind: i.kind,
    purpose: i.purpose,
    display: i.display,
    ...(i.options ? { options: i.options } : {}),
    ...(i.validation ? { validation: i.validation } : {}),
    ...(i.binding ? { binding: i.binding } : {}),
  };
}

/**
 * What the thread shows, as 16 hex characters: the state, each task's status and assistant, the
 * waiting questions. Any visible move changes it (and records one delivery); `at` does not.
 */
export function threadDigest(s: ThreadSnapshot): string {
  const shown = [
    s.state,
    s.taskCount,
    s.truncated,
    s.tasks.map((t) => [t.taskId, t.status, t.assistant ?? ""]),
    s.questions.map((q) => q.urn),
  ];
  return createHash("sha256").update(JSON.stringify(shown)).digest("hex").slice(0, 16);
}

/** An answerer's capabilities as a thread shows them after their name (` (admin, approver)`), or "". */
export const capabilitiesOf = (answered: { byCapabilities?: readonly string[] | undefined }): string =>
  answered.byCapabilities?.length ? ` (${answered.byCapabilities.slice(0, 5).join(", ")})` : "";

/** Who answered, as a thread names them: their id, their name when they have one, and their capabilities. */
export const answeredBy = (response: {
  actor: string;
  actorName?: string | undefined;
  actorCapabilities?: readonly string[] | undefined;
}) => ({
  by: response.actor,
  ...(response.actorName ? { byName: response.actorName } : {}),
  ...(response.actorCapabilities?.length ? { byCapabilities: [...response.actorCapabilities] } : {}),
});
