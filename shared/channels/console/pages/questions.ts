import { actorLabel } from "../../../domain/events.ts";
import type { InteractionResource } from "../../../domain/resources.ts";
import { isTerminal } from "../../../domain/task-state.ts";
import type { Engine } from "../../../engine/engine.ts";
import type { Authenticated } from "../../../ports/key-store.ts";
import { type RequestEntry, requestPage } from "../../../store/request-index.ts";
import { clip, type Html, html, isAdmin, requestPath } from "../html.ts";
import { questionForm } from "./question.ts";
import { readableSummary } from "./requests.ts";

/**
 * The questions waiting for the signed-in person: those of their own requests, and for an admin
 * those of the tenant's, from the newest QUESTION_SCAN requests that have not ended (the request
 * index, newest first). Each is answered where it stands; the page's script sends the answer.
 */
export const QUESTION_SCAN = 100;

export interface Waiting {
  request: RequestEntry;
  questions: InteractionResource[];
}

export async function waitingQuestions(engine: Engine, who: Authenticated): Promise<Waiting[]> {
  const page = await requestPage(engine.deps.state, {
    tenant: who.caller.tenant,
    ...(isAdmin(who) ? {} : { actor: who.actor.id }),
    limit: QUESTION_SCAN,
  });
  const found = await Promise.all(
    page.items.map(async (request): Promise<Waiting | undefined> => {
      const summary = await readableSummary(engine, who, request.rootTaskId);
      if (!summary || isTerminal(summary.view.status)) return undefined;
      const questions = await engine.pendingInteractions(request.rootTaskId, who);
      return questions?.length ? { request, questions } : undefined;
    }),
  );
  return found.filter((w): w is Waiting => w !== undefined);
}

export function questionsBody(waiting: Waiting[]): Html {
  const count = waiting.reduce((n, w) => n + w.questions.length, 0);
  return html`<h1>Questions waiting${count ? ` (${count})` : ""}</h1>
${
  waiting.length === 0
    ? html`<p class="empty">Nothing is waiting for an answer in your ${QUESTION_SCAN} newest requests.</p>`
    : waiting.map(
        (w) => html`<section class="panel" aria-label="${clip(w.request.text, 80)}">
  <h2><a href="${requestPath(w.request.rootTaskId)}">${clip(w.request.text, 160)}</a> <span class="muted">from ${actorLabel({ id: w.request.actor, name: w.request.actorName, capabilities: w.request.actorCapabilities })}</span></h2>
  ${w.questions.map((q) => questionForm(q, { showTask: true }))}
</section>`,
      )
}`;
}
