import { html, raw } from "hono/html";
import type { HtmlEscapedString } from "hono/utils/html";
import { costText } from "../../domain/budgets.ts";
import { actorLabel } from "../../domain/events.ts";
import type { TaskStatus } from "../../domain/task-state.ts";
import type { Authenticated } from "../../ports/key-store.ts";

/**
 * What every console page shares: the frame around a page (its head, the navigation, who is signed
 * in), and how numbers, times and states read. Pages are HTML made on the server with hono/html's
 * `html` template: every value put into one is escaped (text from a model, a tool, a team file or a
 * remote agent can never become markup); `raw` is for markup this code wrote, never for data.
 */
export type Html = HtmlEscapedString | Promise<HtmlEscapedString>;
export { html, raw };

export const CONSOLE = "/console";
export const ASSETS = `${CONSOLE}/assets`;

/** A console path for a URN (one path segment, URL-encoded, as the API takes them). */
export const requestPath = (urn: string) => `${CONSOLE}/requests/${encodeURIComponent(urn)}`;
export const taskPagePath = (urn: string) => `${CONSOLE}/tasks/${encodeURIComponent(urn)}`;
/** The HTTP API's path for a URN, where the console's scripts send changes. */
export const apiPath = (kind: "tasks" | "interactions", urn: string) =>
  `/v1/${kind}/${encodeURIComponent(urn)}`;

export interface PageFrame {
  title: string;
  who: Authenticated;
  csrf: string;
  /** Which entry of the navigation is this page's. */
  nav: "requests" | "questions" | "team" | "keys" | "deliveries" | "evals" | "policy" | "";
  body: Html;
}

const NAV: { id: PageFrame["nav"]; label: string; path: string; admin?: boolean }[] = [
  { id: "requests", label: "Requests", path: CONSOLE },
  { id: "questions", label: "Questions", path: `${CONSOLE}/questions` },
  { id: "team", label: "Team", path: `${CONSOLE}/admin/team`, admin: true },
  { id: "keys", label: "Keys", path: `${CONSOLE}/admin/keys`, admin: true },
  { id: "deliveries", label: "Deliveries", path: `${CONSOLE}/admin/deliveries`, admin: true },
  { id: "evals", label: "Experiments", path: `${CONSOLE}/admin/evals`, admin: true },
  { id: "policy", label: "Policy", path: `${CONSOLE}/admin/policy`, admin: true },
];

/** Whether the signed-in principal has the admin role: what the navigation shows (the policy decides). */
export const isAdmin = (who: Authenticated) => who.caller.roles.includes("admin");

export function page(frame: PageFrame): Html {
  const admin = isAdmin(frame.who);
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="arbor-csrf" content="${frame.csrf}">
<title>${frame.title} · Arbor</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${ASSETS}/console.css">
<script src="${ASSETS}/console.js" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to the content</a>
<header class="top">
  <a class="brand" href="${CONSOLE}">Arbor</a>
  <nav aria-label="Console">
    <ul>
      ${NAV.filter((n) => !n.admin || admin).map(
        (n) =>
          html`<li><a href="${n.path}"${n.id === frame.nav ? raw(' aria-current="page"') : ""}>${n.label}</a></li>`,
      )}
    </ul>
  </nav>
  <form class="account" method="post" action="${CONSOLE}/logout">
    <span>${actorLabel(frame.who.actor)} · ${frame.who.caller.tenant}</span>
    <input type="hidden" name="csrf" value="${frame.csrf}">
    <button type="submit" class="link">Sign out</button>
  </form>
</header>
<main id="main" tabindex="-1">
${frame.body}
</main>
</body>
</html>`;
}

/** A page of its own for the sign-in form and errors met before a session exists. */
export function barePage(title: string, body: Html): Html {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · Arbor</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${ASSETS}/console.css">
</head>
<body class="bare">
<main id="main">
${body}
</main>
</body>
</html>`;
}

const STATUS_LABEL: Record<TaskStatus, string> = {
  open: "waiting to start",
  in_progress: "running",
  awaiting_user: "waiting for a person",
  done: "done",
  failed: "failed",
  canceled: "canceled",
};

/** A task's state as a badge (its words, not only its colour). */
export const statusBadge = (status: TaskStatus) =>
  html`<span class="badge s-${status}">${STATUS_LABEL[status]}</span>`;

/** A cost as people read it (`$0.0042`, `cost unknown`): domain/budgets.ts's costText. */
export const costOf = costText;

export const tokensOf = (n: number) => `${n.toLocaleString("en-US")} tokens`;

/** A span of time as people say it: 850 ms, 12 s, 3 min 5 s, 2 h 10 min. */
export function duration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min${s % 60 ? ` ${s % 60} s` : ""}`;
  const h = Math.floor(m / 60);
  return `${h} h${m % 60 ? ` ${m % 60} min` : ""}`;
}

/** A time, machine-readable and as UTC text (the script shows it in the reader's own zone). */
export const time = (iso: string) =>
  html`<time datetime="${iso}">${iso.replace("T", " ").slice(0, 19)} UTC</time>`;

/** Text cut to `max` characters, with an ellipsis when cut. */
export const clip = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

/**
 * JSON for a page's script, in a data block (`<script type="application/json">`, which a strict
 * CSP lets the page hold and never runs): `<` is escaped so no text in it can close the block.
 */
export const jsonBlock = (id: string, value: unknown) =>
  html`<script type="application/json" id="${id}">${raw(JSON.stringify(value).replace(/</g, "\\u003c"))}</script>`;

/** The notice a page shows for a refused or failed step, with what to do next. */
export const notice = (kind: "error" | "info", text: string) =>
  html`<p class="notice ${kind}" role="${kind === "error" ? "alert" : "status"}">${text}</p>`;
