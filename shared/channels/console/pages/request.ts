import { TASK_LIFECYCLE_TYPES } from "../../../domain/events.ts";
import type { Budgets, InteractionResource } from "../../../domain/resources.ts";
import { isTerminal } from "../../../domain/task-state.ts";
import type { TaskView } from "../../../domain/task-view.ts";
import type { TaskTree, TreeNode } from "../../../engine/task-tree.ts";
import {
  apiPath,
  clip,
  costOf,
  type Html,
  html,
  notice,
  requestPath,
  statusBadge,
  taskPagePath,
  time,
  tokensOf,
} from "../html.ts";
import { questionForm } from "./question.ts";
import { ranFor } from "./requests.ts";

/**
 * A request's page: its tree, live. The page is made whole on the server; its `live` part (the
 * tree, the questions waiting, the answer) is made again by `GET <page>?part=live`, which the
 * script fetches each time the request's event stream (GET /v1/tasks/<root>/events, server-sent
 * events, resumable) says something happened, and stops when the stream ends. Without the script
 * the page is still whole: reload it.
 *
 * Per task: its state, its assistant with the election's score and the runner-up's, its tokens and
 * cost (its own and its subtree's together, as the engine counts them), the corrective round that
 * made it, and what is left of its token and dollar budgets.
 */
export interface RequestPageData {
  tree: TaskTree;
  root: TaskView;
  output: string | undefined;
  questions: InteractionResource[];
  now: Date;
}

export function requestBody(d: RequestPageData): Html {
  const ended = isTerminal(d.root.status);
  return html`<p class="crumbs"><a href="/console">Requests</a> ›</p>
<h1>${clip(d.root.title, 200)}</h1>
<section id="live" aria-live="polite" data-events="${apiPath("tasks", d.root.taskId)}/events" data-event-types="${TASK_LIFECYCLE_TYPES.join(" ")}" data-part="${requestPath(d.root.taskId)}?part=live"${ended ? html` data-ended="true"` : ""}>
${liveBody(d)}
</section>`;
}

/** The part of the page that changes as the request runs. */
export function liveBody(d: RequestPageData): Html {
  const top = d.tree.root;
  const ended = isTerminal(d.root.status);
  return html`<div class="request-actions">
  <a href="${taskPagePath(d.root.taskId)}">Timeline of the request</a>
  ${
    ended
      ? ""
      : html`<form class="api inline" data-api="POST ${apiPath("tasks", d.root.taskId)}/cancel" data-then="reload" data-confirm="Cancel this request and everything below it?">
    <button type="submit" class="danger">Cancel the request</button><span class="form-error" role="alert" hidden></span>
  </form>`
  }
</div>
<dl class="facts">
  <div><dt>State</dt><dd>${statusBadge(d.root.status)}</dd></div>
  <div><dt>Cost</dt><dd>${costOf(top.usage)}</dd></div>
  <div><dt>Tokens</dt><dd>${top.usage.tokens.toLocaleString("en-US")}</dd></div>
  <div><dt>Ran</dt><dd>${ranFor(d.root, d.now)}</dd></div>
  <div><dt>Tasks</dt><dd>${d.tree.taskCount}${d.tree.truncated ? "+" : ""}</dd></div>
  <div><dt>Sent</dt><dd>${time(d.root.createdAt)}</dd></div>
</dl>
${d.root.status === "failed" && d.root.failureReason ? notice("error", d.root.failureReason) : ""}
${
  d.questions.length
    ? html`<section class="questions" aria-labelledby="waiting"><h2 id="waiting">Waiting for an answer</h2>${d.questions.map((q) => questionForm(q, { showTask: q.meta.parent !== d.root.taskId }))}</section>`
    : ""
}
<section aria-labelledby="tree-heading">
<h2 id="tree-heading">Tasks</h2>
<ul class="tree">${treeNode(top)}</ul>
${d.tree.truncated ? html`<p class="muted">The tree is larger than this page shows: open a task to see its part.</p>` : ""}
</section>
${
  d.output !== undefined && isTerminal(d.root.status)
    ? html`<section aria-labelledby="answer"><h2 id="answer">The answer</h2><div class="output">${clip(d.output, 20_000)}</div>${d.output.length > 20_000 ? html`<p><a href="${taskPagePath(d.root.taskId)}#output">The whole answer, in pages</a></p>` : ""}</section>`
    : ""
}`;
}

function treeNode(n: TreeNode): Html {
  const a = n.assistant;
  const left = budgetLeft(n.budgets, n.usage);
  return html`<li>
  <div class="node">
    ${statusBadge(n.status)}
    <a class="title" href="${taskPagePath(n.taskId)}">${clip(n.title, 160)}</a>
    ${n.round > 0 ? html`<span class="tag" title="made by corrective round ${n.round}">round ${n.round}</span>` : ""}
    <span class="assistant">${
      a
        ? html`${a.name} <span class="score" title="election score">${a.score.toFixed(2)}</span>${a.runnerUp ? html` <span class="muted">(next: ${a.runnerUp.name} ${a.runnerUp.score.toFixed(2)})</span>` : ""}`
        : html`<span class="muted">no assistant yet</span>`
    }</span>
    <span class="usage" title="${tokensOf(n.usage.tokens)} with its subtasks">${costOf(n.usage)} · ${n.usage.tokens.toLocaleString("en-US")} tok</span>
    ${left ? html`<span class="muted budget">${left}</span>` : ""}
    ${n.pendingInteractions.length ? html`<span class="tag attention">${n.pendingInteractions.length} question${n.pendingInteractions.length === 1 ? "" : "s"}</span>` : ""}
  </div>
  ${n.children.length ? html`<ul>${n.children.map((c) => treeNode(c))}</ul>` : ""}
  ${n.childCount > n.children.length ? html`<p class="muted">${n.childCount - n.children.length} more subtasks: <a href="${taskPagePath(n.taskId)}">open the task</a></p>` : ""}
</li>`;
}

/** What is left of a task's token and dollar budgets, when it has them. */
export function budgetLeft(
  budgets: Budgets,
  usage: { tokens: number; costUsd: number; unpricedCalls: number },
): string {
  const parts: string[] = [];
  if (budgets.maxTokens !== undefined)
    parts.push(`${Math.max(0, budgets.maxTokens - usage.tokens).toLocaleString("en-US")} tokens left`);
  if (budgets.maxCostUsd !== undefined)
    parts.push(
      `${costOf({ costUsd: Math.max(0, budgets.maxCostUsd - usage.costUsd), unpricedCalls: 0 })} left${usage.unpricedCalls ? " (of known costs)" : ""}`,
    );
  return parts.join(", ");
}
