import { actorLabel, type StoredEvent } from "../../../domain/events.ts";
import type { InteractionResource, Message } from "../../../domain/resources.ts";
import type { TaskView } from "../../../domain/task-view.ts";
import { lastElement, parentUrn } from "../../../domain/urn.ts";
import type { TreeNode } from "../../../engine/task-tree.ts";
import type { deliveryView } from "../../../notify/deliveries.ts";
import type { ToolCallRecord } from "../../../ports/audit-log.ts";
import {
  CONSOLE,
  clip,
  costOf,
  type Html,
  html,
  requestPath,
  statusBadge,
  taskPagePath,
  time,
} from "../html.ts";
import { questionForm } from "./question.ts";
import { budgetLeft } from "./request.ts";
import { ranFor } from "./requests.ts";

/**
 * A task's timeline: everything recorded of it, in the order it happened. Its events (the task
 * log: created, started, questions asked and answered, completed or failed), its conversation with
 * the model turn by turn (the prompt, each answer with the tools it called and their results, the
 * final answer; a turn the window no longer sends and a result shown to the model once are
 * marked), its tool calls from the audit log with their outcome (a call the policy denied says so,
 * with the decision), its questions with who answered, and, for a request's root task, the
 * webhook and chat deliveries sent for it. A long answer opens in pages.
 */
export const OUTPUT_PAGE_CHARS = 20_000;
export const EVENTS_PAGE = 100;
/** How much of one message or result is shown before it folds away. */
const SHOWN_CHARS = 2_000;
/** How many of a transcript's messages one page shows: the prompt, then the newest. */
export const SHOWN_MESSAGES = 200;

export interface TaskPageData {
  view: TaskView;
  node: TreeNode;
  rootTaskId: string;
  output: string | undefined;
  outputPage: number;
  events: StoredEvent[];
  eventsFrom: number;
  messages: Message[];
  /** The first turn the model's window still sends (1: nothing left out). */
  windowFrom: number;
  toolCalls: ToolCallRecord[];
  questions: InteractionResource[];
  deliveries: ReturnType<typeof deliveryView>[];
  now: Date;
}

export function taskBody(d: TaskPageData): Html {
  const { view, node } = d;
  const parent =
    view.parentTaskId ??
    (parentUrn(view.taskId) && lastElement(parentUrn(view.taskId) as string).type === "Task"
      ? parentUrn(view.taskId)
      : undefined);
  const a = node.assistant;
  const left = budgetLeft(node.budgets, node.usage);
  const own = ownUsage(node);
  return html`<p class="crumbs"><a href="${CONSOLE}">Requests</a> › <a href="${requestPath(d.rootTaskId)}">the request</a>${parent ? html` › <a href="${taskPagePath(parent)}">the parent task</a>` : ""} ›</p>
<h1>${clip(view.title, 200)}</h1>
<dl class="facts">
  <div><dt>State</dt><dd>${statusBadge(view.status)}</dd></div>
  <div><dt>Assistant</dt><dd>${a ? html`${a.name} (${a.score.toFixed(2)})${a.runnerUp ? html`<br><span class="muted">next: ${a.runnerUp.name} (${a.runnerUp.score.toFixed(2)})</span>` : ""}` : "none"}</dd></div>
  <div><dt>Cost${node.childCount ? " (with its subtasks)" : ""}</dt><dd>${costOf(node.usage)}${own ? html`<br><span class="muted">its own: ${costOf(own)}, ${own.tokens.toLocaleString("en-US")} tokens</span>` : ""}</dd></div>
  <div><dt>Tokens</dt><dd>${node.usage.inputTokens.toLocaleString("en-US")} in, ${node.usage.outputTokens.toLocaleString("en-US")} out</dd></div>
  <div><dt>Ran</dt><dd>${ranFor(view, d.now)}</dd></div>
  ${node.round > 0 ? html`<div><dt>Round</dt><dd>corrective round ${node.round}</dd></div>` : ""}
  ${left ? html`<div><dt>Budget</dt><dd>${left}</dd></div>` : ""}
</dl>
${view.intent && view.intent !== view.title ? html`<section aria-labelledby="intent"><h2 id="intent">What it is to do</h2><p class="description">${view.intent}</p></section>` : ""}
${node.children.length ? html`<section aria-labelledby="subtasks"><h2 id="subtasks">Subtasks</h2><ul class="plain">${node.children.map((c) => html`<li>${statusBadge(c.status)} <a href="${taskPagePath(c.taskId)}">${clip(c.title, 160)}</a> <span class="muted">${costOf(c.usage)}</span></li>`)}</ul></section>` : ""}
${d.questions.length ? html`<section aria-labelledby="asked"><h2 id="asked">Questions</h2>${d.questions.map((q) => questionForm(q))}</section>` : ""}
${outputSection(d)}
${conversation(d)}
${toolCallSection(d.toolCalls)}
${eventsSection(d)}
${d.deliveries.length ? deliveriesSection(d.deliveries) : ""}`;
}

/**
 * What a parent task spent itself (its evaluations): its subtree's usage less its children's,
 * when all its children are at hand; undefined for a leaf (its usage is its own) or a cut tree.
 */
export function ownUsage(
  node: TreeNode,
): { tokens: number; costUsd: number; unpricedCalls: number } | undefined {
  if (node.childCount === 0 || node.children.length < node.childCount) return undefined;
  const sum = (pick: (u: TreeNode["usage"]) => number) =>
    pick(node.usage) - node.children.reduce((n, c) => n + pick(c.usage), 0);
  return {
    tokens: Math.max(
      0,
      sum((u) => u.tokens),
    ),
    costUsd: Math.max(0, Math.round(sum((u) => u.costUsd) * 1e9) / 1e9), // no float dust
    unpricedCalls: Math.max(
      0,
      sum((u) => u.unpricedCalls),
    ),
  };
}

function outputSection(d: TaskPageData): Html | string {
  const out = d.output ?? d.view.output;
  if (out === undefined || out === "") return "";
  const pages = Math.max(1, Math.ceil(out.length / OUTPUT_PAGE_CHARS));
  const n = Math.min(Math.max(1, d.outputPage), pages);
  const part = out.slice((n - 1) * OUTPUT_PAGE_CHARS, n * OUTPUT_PAGE_CHARS);
  const link = (p: number) => `${taskPagePath(d.view.taskId)}?page=${p}#output`;
  return html`<section aria-labelledby="output"><h2 id="output">Output</h2>
  ${pages > 1 ? html`<p class="muted">Page ${n} of ${pages} (${out.length.toLocaleString("en-US")} characters)</p>` : ""}
  <div class="output">${part}</div>
  ${pages > 1 ? html`<nav class="pager" aria-label="Output pages">${n > 1 ? html`<a href="${link(n - 1)}">Previous page</a>` : ""}${n < pages ? html`<a href="${link(n + 1)}">Next page</a>` : ""}</nav>` : ""}
</section>`;
}

/** The turn a transcript message belongs to (`turn-0003`, `turn-0003-tool-1`), or undefined. */
const turnOf = (m: Message): number | undefined => {
  const match = /^turn-(\d+)/.exec(m.meta.name);
  return match ? Number(match[1]) : undefined;
};

function folded(text: string): Html {
  if (text.length <= SHOWN_CHARS) return html`<pre class="msg">${text}</pre>`;
  return html`<pre class="msg">${text.slice(0, SHOWN_CHARS)}</pre><details><summary>${(text.length - SHOWN_CHARS).toLocaleString("en-US")} more characters</summary><pre class="msg">${text.slice(SHOWN_CHARS)}</pre></details>`;
}

function conversation(d: TaskPageData): Html | string {
  if (d.messages.length === 0) return "";
  // A long conversation: its prompt and its newest messages (the rest are in the event log and the API).
  const shown =
    d.messages.length > SHOWN_MESSAGES
      ? [...d.messages.slice(0, 1), ...d.messages.slice(-(SHOWN_MESSAGES - 1))]
      : d.messages;
  const left = d.messages.length - shown.length;
  return html`<section aria-labelledby="turns"><h2 id="turns">The conversation with the model</h2>
${d.windowFrom > 1 ? html`<p class="muted">Turns before turn ${d.windowFrom} are no longer sent to the model (the conversation was truncated or cleared); they are kept here.</p>` : ""}
${left > 0 ? html`<p class="muted">${left.toLocaleString("en-US")} messages after the prompt are not shown: this page shows the newest ${SHOWN_MESSAGES - 1}. Every message is a resource under the task (<code>arbor ls</code>, <code>GET /v1/resources/&lt;task&gt;/children</code>).</p>` : ""}
<ol class="turns">${shown.map((m) => {
    const turn = turnOf(m);
    const outside = turn !== undefined && turn < d.windowFrom;
    const label =
      m.meta.name === "prompt"
        ? "The task as the assistant first sees it"
        : m.meta.name === "output"
          ? "The final answer"
          : m.role === "tool"
            ? `Result of ${m.toolCallId}`
            : `Turn ${turn ?? m.meta.name}`;
    return html`<li class="turn role-${m.role}${outside ? " outside" : ""}">
  <p class="turn-head"><strong>${label}</strong> <span class="muted">${m.role}</span>${outside ? html` <span class="tag">outside the window</span>` : ""}${m.ephemeral ? html` <span class="tag">shown to the model once</span>` : ""}${m.isError ? html` <span class="tag bad">error</span>` : ""}</p>
  ${m.content ? folded(m.content) : ""}
  ${m.toolCalls?.length ? html`<ul class="calls">${m.toolCalls.map((c) => html`<li><code>${c.name}</code> <span class="muted">${c.id}</span>${folded(JSON.stringify(c.arguments, null, 2))}</li>`)}</ul>` : ""}
</li>`;
  })}</ol></section>`;
}

function toolCallSection(records: ToolCallRecord[]): Html | string {
  if (records.length === 0) return "";
  return html`<section aria-labelledby="tools"><h2 id="tools">Tool calls</h2><div class="table-wrap"><table>
<thead><tr><th scope="col">When</th><th scope="col">Tool</th><th scope="col">What happened</th><th scope="col">Took</th></tr></thead>
<tbody>${records.map((r) => {
    const what =
      r.stage === "requested"
        ? "asked to run (it can change something: recorded before it ran)"
        : r.stage === "completed"
          ? `ran${r.resultChars !== undefined ? `; its result (${r.resultChars.toLocaleString("en-US")} characters) was stored apart` : ""}`
          : r.reason === "denied"
            ? `denied: ${r.error ?? ""}`
            : `failed (${r.reason ?? "error"}): ${r.error ?? ""}`;
    return html`<tr class="${r.stage === "failed" ? "bad" : ""}"><td>${time(r.at)}</td><td><code>${r.tool}</code>${(r.attempt ?? 1) > 1 ? html` <span class="muted">attempt ${r.attempt}</span>` : ""}</td><td>${clip(what, 600)}</td><td>${r.durationMs !== undefined ? `${Math.round(r.durationMs)} ms` : ""}</td></tr>`;
  })}</tbody></table></div></section>`;
}

/** What one event says, in a line. */
function eventLine(e: StoredEvent): string {
  const p = e.payload as Record<string, unknown>;
  switch (e.type) {
    case "TaskCreated":
      return `created${typeof p.title === "string" ? `: ${p.title}` : ""}`;
    case "TaskStarted":
      return "started";
    case "TaskCompleted":
      return `completed${typeof p.summary === "string" ? `: ${p.summary}` : ""}`;
    case "TaskFailed":
      return `failed: ${String(p.reason ?? p.failureReason ?? "")}`;
    case "TaskCanceled":
      return `canceled: ${String(p.reason ?? "")}`;
    case "UserInteractionRequested":
      return `asked: ${String((p.display as { title?: string } | undefined)?.title ?? "")}`;
    case "UserInteractionResponded":
      return `answered${p.selectedOptionId ? `: ${String(p.selectedOptionId)}` : ""}${p.inputValue ? `: ${String(p.inputValue)}` : ""}`;
    default:
      return JSON.stringify(p);
  }
}

function eventsSection(d: TaskPageData): Html {
  const more = d.events.length === EVENTS_PAGE;
  const last = d.events.at(-1);
  return html`<section aria-labelledby="events"><h2 id="events">Events</h2><div class="table-wrap"><table>
<thead><tr><th scope="col">#</th><th scope="col">When</th><th scope="col">Event</th><th scope="col">By</th></tr></thead>
<tbody>${d.events.map((e) => html`<tr><td>${e.seq}</td><td>${time(e.at)}</td><td><strong>${e.type}</strong> ${clip(eventLine(e), 400)}</td><td>${actorLabel(e.actor)}</td></tr>`)}</tbody></table></div>
${more && last ? html`<p><a class="button" href="${taskPagePath(d.view.taskId)}?from=${last.seq + 1}#events">Later events</a></p>` : ""}
${d.eventsFrom > 1 ? html`<p><a href="${taskPagePath(d.view.taskId)}#events">The first events</a></p>` : ""}
</section>`;
}

function deliveriesSection(rows: TaskPageData["deliveries"]): Html {
  return html`<section aria-labelledby="deliveries"><h2 id="deliveries">Deliveries sent for this request</h2><div class="table-wrap"><table>
<thead><tr><th scope="col">Channel</th><th scope="col">To</th><th scope="col">State</th><th scope="col">Attempts</th><th scope="col">Last</th></tr></thead>
<tbody>${rows.map((r) => html`<tr class="${r.status === "dead" ? "bad" : ""}"><td>${r.channel}</td><td>${clip(r.url, 80)}</td><td>${r.status}</td><td>${r.attempts}</td><td>${r.deliveredAt ? time(r.deliveredAt) : (r.lastError ?? "")}</td></tr>`)}</tbody></table></div></section>`;
}
