import { actorLabel } from "../../../domain/events.ts";
import type { InteractionResource } from "../../../domain/resources.ts";
import { parentUrn } from "../../../domain/urn.ts";
import { apiPath, CONSOLE, type Html, html, jsonBlock, taskPagePath } from "../html.ts";

/** One question's own part of a page, as it stands now (after a 409, the script shows who answered). */
export const questionPath = (urn: string) => `${CONSOLE}/questions/${encodeURIComponent(urn)}`;

/**
 * One question a task asks, as a form a person answers in the console: the options as buttons (a
 * risky tool call with its exact arguments; a strategy; an assistant for a subtask), a value with
 * its validation (`ask_person`), or a lazy plan in a structured editor (console.js builds it from
 * the plan in the page's data block; an edit is sent as the answer's `inputValue`, JSON, which the
 * engine checks as it checks every channel's).
 *
 * The form posts to the HTTP API's answer route (the script sends it with the session's CSRF
 * token). One answer wins: a second one (another tab, Slack) is a 409, and the script then shows
 * who answered, read again from the page.
 */
export function questionForm(i: InteractionResource, options: { showTask?: boolean } = {}): Html {
  const task = parentUrn(i.meta.id) as string;
  const id = `q-${i.meta.hash}`;
  const d = i.display;
  const isPlan = i.purpose === "approve_plan";
  const asksValue = i.kind === "input" || (!i.options?.length && !isPlan);
  return html`<article class="question" id="${id}" data-purpose="${i.purpose}" data-part="${questionPath(i.meta.id)}">
  <h3>${d.title}</h3>
  ${options.showTask ? html`<p class="muted">Asked by <a href="${taskPagePath(task)}">a task</a></p>` : ""}
  ${d.description ? html`<p class="description">${d.description}</p>` : ""}
  ${isPlan ? planEditor(i, id) : content(i)}
  ${
    i.status !== "pending"
      ? answered(i)
      : html`<form class="api answer" data-api="POST ${apiPath("interactions", i.meta.id)}/answer" data-then="reload"${isPlan ? html` data-plan="${id}-plan"` : ""}>
    ${
      asksValue
        ? html`<label for="${id}-value">Your answer</label>
    <input id="${id}-value" name="inputValue" type="text" maxlength="100000"${i.validation?.required ? html` required` : ""}${i.validation?.regex ? html` pattern="${i.validation.regex}" title="It must match ${i.validation.regex}"` : ""}>`
        : ""
    }
    ${
      i.purpose === "confirm_risky_action"
        ? html`<label for="${id}-comment">Comment (optional)</label><input id="${id}-comment" name="comment" type="text" maxlength="4000">`
        : ""
    }
    <div class="actions">
    ${
      i.options?.length
        ? i.options.map(
            (o) =>
              html`<button type="submit" name="selectedOptionId" value="${o.id}" class="${o.style === "danger" ? "danger" : o.style === "primary" ? "primary" : ""}">${o.label}</button>`,
          )
        : html`<button type="submit" class="primary">Answer</button>`
    }
    </div>
    <p class="form-error" role="alert" hidden></p>
  </form>`
  }
</article>`;
}

/** What a question shows besides its words: a risky call's exact arguments, the strategies. */
function content(i: InteractionResource): Html | string {
  const c = i.display.content;
  if (c === undefined || c === null) return "";
  const label = i.purpose === "confirm_risky_action" ? "The exact arguments" : "Details";
  const text =
    i.display.contentKind === "PlainText" && typeof c === "string" ? c : JSON.stringify(c, null, 2);
  return html`<figure class="content"><figcaption>${label}</figcaption><pre>${text}</pre></figure>`;
}

function answered(i: InteractionResource): Html {
  const r = i.response;
  const option = r?.selectedOptionId ? i.options?.find((o) => o.id === r.selectedOptionId) : undefined;
  if (i.status === "expired")
    return html`<p class="answered">Nobody answered in time: the task went on without it.</p>`;
  return html`<p class="answered">Answered by <strong>${r ? actorLabel({ id: r.actor, name: r.actorName, capabilities: r.actorCapabilities }) : "someone"}</strong>: ${option ? option.label : (r?.inputValue ?? "")}${r?.comment ? html` (“${r.comment}”)` : ""}</p>`;
}

/**
 * The plan as a structured editor: the plan itself in a data block, the editor built from it by the
 * script (the page stays readable without it: the plan shows as JSON in a textarea that may be
 * edited directly, and is what is sent).
 */
function planEditor(i: InteractionResource, id: string): Html {
  const plan = i.display.content ?? {};
  return html`<div class="plan-editor" id="${id}-plan">
  ${jsonBlock(`${id}-plan-data`, plan)}
  <label for="${id}-plan-json">The plan (JSON)</label>
  <textarea id="${id}-plan-json" class="plan-json" rows="12" spellcheck="false">${JSON.stringify(plan, null, 2)}</textarea>
</div>`;
}
