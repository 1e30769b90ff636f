import type { Usage } from "../../../domain/budgets.ts";
import { actorLabel } from "../../../domain/events.ts";
import type { Assistant } from "../../../domain/resources.ts";
import { isTerminal, type TaskStatus } from "../../../domain/task-state.ts";
import type { TaskView } from "../../../domain/task-view.ts";
import type { Engine } from "../../../engine/engine.ts";
import { ForbiddenError } from "../../../kernel/errors.ts";
import type { Authenticated } from "../../../ports/key-store.ts";
import { type RequestEntry, requestPage } from "../../../store/request-index.ts";
import {
  CONSOLE,
  clip,
  costOf,
  duration,
  type Html,
  html,
  isAdmin,
  requestPath,
  statusBadge,
  time,
  tokensOf,
} from "../html.ts";

/**
 * The console's front page: the requests (a person's own; the tenant's for an admin who asks),
 * newest first, filtered by state, each with its cost and how long it ran; and the form that
 * starts a new one (eager or lazy), with the team's assistants shown beside it.
 *
 * The list is the request index (store/request-index.ts), a page at a time; each line's state and
 * cost are read from its root task as the caller may read it (a line the policy hides is left out).
 * With a filter, index pages are read until a page of matches is full or SCAN_PAGES were read.
 */
export const STATE_FILTERS = ["all", "running", "waiting", "done", "failed", "canceled"] as const;
export type StateFilter = (typeof STATE_FILTERS)[number];

const PAGE_SIZE = 25;
const SCAN_PAGES = 8;

const matches = (filter: StateFilter, status: TaskStatus): boolean => {
  switch (filter) {
    case "all":
      return true;
    case "running":
      return status === "open" || status === "in_progress";
    case "waiting":
      return status === "awaiting_user";
    default:
      return status === filter;
  }
};

interface Row {
  entry: RequestEntry;
  view: TaskView;
  usage: Usage;
}

export interface RequestsQuery {
  state: StateFilter;
  scope: "mine" | "all";
  cursor?: string;
}

/** Reads one page of the list as `who` may see it. */
export async function requestRows(
  engine: Engine,
  who: Authenticated,
  q: RequestsQuery,
): Promise<{ rows: Row[]; cursor?: string }> {
  const rows: Row[] = [];
  let cursor = q.cursor;
  for (let scanned = 0; scanned < SCAN_PAGES && rows.length < PAGE_SIZE; scanned++) {
    const page = await requestPage(engine.deps.state, {
      tenant: who.caller.tenant,
      ...(q.scope === "mine" ? { actor: who.actor.id } : {}),
      limit: PAGE_SIZE,
      ...(cursor ? { cursor } : {}),
    });
    const read = await Promise.all(page.items.map((entry) => rowOf(engine, who, entry)));
    for (const row of read) if (row && matches(q.state, row.view.status)) rows.push(row);
    cursor = page.cursor;
    if (!cursor) break;
  }
  return { rows, ...(cursor ? { cursor } : {}) };
}

async function rowOf(engine: Engine, who: Authenticated, entry: RequestEntry): Promise<Row | undefined> {
  const summary = await readableSummary(engine, who, entry.rootTaskId);
  return summary && { entry, ...summary };
}

/** A request's state and usage (Engine.summary), or undefined when there is none or the policy hides it from `who`. */
export async function readableSummary(engine: Engine, who: Authenticated, rootTaskId: string) {
  try {
    return await engine.summary(rootTaskId, who);
  } catch (e) {
    if (e instanceof ForbiddenError) return undefined;
    throw e;
  }
}

/** How long a request ran (ended), or has run so far. */
export function ranFor(view: Pick<TaskView, "status" | "createdAt" | "updatedAt">, now: Date): string {
  const end = isTerminal(view.status) ? Date.parse(view.updatedAt) : now.getTime();
  return duration(end - Date.parse(view.createdAt));
}

const query = (q: RequestsQuery, change: Partial<RequestsQuery>) => {
  const next = { ...q, ...change };
  const params = new URLSearchParams();
  if (next.state !== "all") params.set("state", next.state);
  if (next.scope !== "mine") params.set("scope", next.scope);
  if (next.cursor) params.set("cursor", next.cursor);
  const s = params.toString();
  return s ? `${CONSOLE}?${s}` : CONSOLE;
};

export function requestsBody(options: {
  who: Authenticated;
  q: RequestsQuery;
  rows: Row[];
  cursor?: string;
  team: Assistant[] | undefined;
  now: Date;
}): Html {
  const { who, q, rows, team, now } = options;
  const { cursor: _, ...here } = q;
  return html`<h1>Requests</h1>
<section class="panel" aria-labelledby="new-request">
  <h2 id="new-request">New request</h2>
  <form class="api" data-api="POST /v1/messages" data-then="request">
    <label for="text">What should the team do?</label>
    <textarea id="text" name="text" rows="3" required maxlength="100000" placeholder="Plan a two-day team offsite in Lisbon"></textarea>
    <fieldset class="inline">
      <legend>Mode</legend>
      <label><input type="radio" name="mode" value="eager" checked> Eager: plan and run</label>
      <label><input type="radio" name="mode" value="lazy"> Lazy: show me the plan first</label>
    </fieldset>
    <button type="submit" class="primary">Send</button>
    <p class="form-error" role="alert" hidden></p>
  </form>
  ${
    team
      ? html`<details class="team"><summary>The team: ${team.length} assistant${team.length === 1 ? "" : "s"}</summary>
    <ul>${team.map(
      (a) =>
        html`<li><strong>${a.meta.name}</strong>: ${clip(a.meta.purpose ?? "", 240)}${a.tools.length ? html` <span class="muted">(tools: ${a.tools.join(", ")})</span>` : ""}</li>`,
    )}</ul></details>`
      : ""
  }
</section>
<section aria-labelledby="list">
  <h2 id="list" class="visually-hidden">The list</h2>
  <nav class="filters" aria-label="Filter by state">
    ${STATE_FILTERS.map(
      (s) =>
        html`<a href="${query(here, { state: s })}"${s === q.state ? html` aria-current="true"` : ""}>${s}</a>`,
    )}
    ${
      isAdmin(who)
        ? html`<span class="sep" aria-hidden="true">·</span>
    <a href="${query(here, { scope: "mine" })}"${q.scope === "mine" ? html` aria-current="true"` : ""}>mine</a>
    <a href="${query(here, { scope: "all" })}"${q.scope === "all" ? html` aria-current="true"` : ""}>the tenant's</a>`
        : ""
    }
  </nav>
  ${
    rows.length === 0
      ? html`<p class="empty">No ${q.state === "all" ? "" : `${q.state} `}requests${q.cursor ? " on this page" : " yet"}.</p>`
      : html`<div class="table-wrap"><table class="requests">
    <thead><tr><th scope="col">Request</th><th scope="col">State</th><th scope="col">Cost</th><th scope="col">Ran</th><th scope="col">Sent</th>${q.scope === "all" ? html`<th scope="col">By</th>` : ""}</tr></thead>
    <tbody>${rows.map(
      (r) => html`<tr>
      <td><a href="${requestPath(r.entry.rootTaskId)}">${clip(r.entry.text, 120)}</a>${r.entry.mode === "lazy" ? html` <span class="tag">lazy</span>` : ""}</td>
      <td>${statusBadge(r.view.status)}</td>
      <td title="${tokensOf(r.usage.inputTokens + r.usage.outputTokens)}">${costOf(r.usage)}</td>
      <td>${ranFor(r.view, now)}</td>
      <td>${time(r.entry.at)}</td>
      ${q.scope === "all" ? html`<td>${actorLabel({ id: r.entry.actor, name: r.entry.actorName, capabilities: r.entry.actorCapabilities })}</td>` : ""}
    </tr>`,
    )}</tbody></table></div>`
  }
  ${options.cursor ? html`<p><a class="button" href="${query(q, { cursor: options.cursor })}">Older requests</a></p>` : ""}
</section>`;
}
