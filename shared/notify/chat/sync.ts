import { createHash } from "node:crypto";
import type { InteractionResource } from "../../domain/resources.ts";
import type { EngineDeps } from "../../engine/context.ts";
import { ConflictError } from "../../kernel/errors.ts";
import { type DeliveryData, deliveryId, getDelivery } from "../deliveries.ts";
import type { SubscriptionData } from "../subscriptions.ts";
import { answeredBy, questionOf } from "./snapshot.ts";
import { type HeldThread, type ThreadData, takeThread } from "./thread-record.ts";
import {
  type ChatRender,
  ChatSendError,
  type ChatSurface,
  type SlackThread,
  type SurfaceContext,
  type TeamsThread,
  type ThreadQuestion,
  type ThreadSnapshot,
} from "./types.ts";

/**
 * The thread sync: one chat delivery (a ThreadSnapshot, recorded by notify/reconcile.ts) applied to
 * its thread through the channel's surface. NotifyService.attempt hands it a chat delivery instead
 * of POSTing it. How to drive it:
 *
 *   const r = await syncThread(deps, delivery, surfaces, { holder, leaseMs });
 *   // { delivered: true } | { delivered: false, retryable, error, retryAfterMs? }
 *
 * Under the thread's lease (thread-record.ts: two workers never sync one thread at once; the second
 * is told to retry soon), the newest snapshot recorded for the thread is applied (the delivery's
 * own, or a later delivery's: the thread catches up in one attempt), unless it was applied already
 * (a delivery older than the last applied is done: a newer snapshot shows more). In this order:
 *   1. progress: posted once (its id kept; when the ref has no thread of its own, it heads the
 *      thread: SurfaceContext.threadHead), then updated; posted anew when someone deleted it (an
 *      update the surface says is `gone`), so later deliveries do not all end dead;
 *   2. each question waiting that was not posted yet: posted;
 *   3. each question posted and no longer waiting: updated once to show who answered what (read
 *      from the interaction: response.actor, the chosen option's label or a short value), or that
 *      the request ended without it;
 *   4. once the request ended: the answer (or how it failed), posted once.
 * Each message's id is recorded right after the call that made it, so a retry does not post it
 * again. The one window: a crash (or a lost lease) between the platform's answer and that record
 * posts the message again on the retry; the platforms have no idempotency key for a post to close it.
 * ChatSendError decides: retryable (with the platform's retryAfterMs) or not (dead).
 */
export interface ChatSurfaces {
  slack?: ChatSurface<SlackThread>;
  teams?: ChatSurface<TeamsThread>;
}

export type SyncResult =
  | { delivered: true }
  | {
      delivered: false;
      retryable: boolean;
      error: string;
      retryAfterMs?: number;
      /** Not a failure (the thread is busy, or the platform asked to wait): again after retryAfterMs, no backoff. */
      soon?: boolean;
    };

export type SyncDeps = Pick<EngineDeps, "state" | "resources" | "clock">;

/** Who answered what, as a question's message shows it: the option's label, or the value cut short. */
export function answerSummary(i: InteractionResource): string {
  const r = i.response;
  if (!r) return "answered";
  const option = r.selectedOptionId ? i.options?.find((o) => o.id === r.selectedOptionId) : undefined;
  if (option) return option.label;
  if (r.selectedOptionId) return r.selectedOptionId;
  const value = (r.inputValue ?? r.comment ?? "").trim();
  if (!value) return "answered";
  return value.length > 200 ? `${value.slice(0, 199)}…` : value;
}

/** How soon a delivery whose thread another attempt holds is tried again (at least: the backoff decides). */
export const BUSY_RETRY_MS = 1_000;

/** The engine's actor id, shown as the one who "answered" a question the request ended without. */
export const ENDED_BY = "system_engine";

const isFinal = (s: ThreadSnapshot) =>
  s.state === "completed" || s.state === "failed" || s.state === "canceled";

export async function syncThread(
  deps: SyncDeps,
  delivery: DeliveryData,
  surfaces: ChatSurfaces | undefined,
  /** `holder`: this attempt (unique per attempt: two attempts of one worker are two holders). */
  options: { holder: string; leaseMs: number },
): Promise<SyncResult> {
  if (delivery.channel !== "slack" && delivery.channel !== "teams")
    return { delivered: false, retryable: false, error: `${delivery.channel} is no chat channel` };
  const surface = surfaces?.[delivery.channel] as ChatSurface<SlackThread | TeamsThread> | undefined;
  if (!surface)
    return {
      delivered: false,
      retryable: true,
      error:
        `no ${delivery.channel} surface on this worker: configure ${delivery.channel === "slack" ? "Slack" : "Teams"} ` +
        `in the chat settings (the "${delivery.channel}" section) of the runtime that sends notifications`,
    };
  const sub = await deps.state.get<SubscriptionData>(delivery.subscriptionKey);
  const ref = sub?.data.subscription;
  if (!sub || sub.status === "deleted" || ref?.kind !== delivery.channel) return { delivered: true }; // nobody to tell
  const taken = await takeThread(
    deps.state,
    delivery.subscriptionKey,
    { rootTaskUrn: delivery.rootTaskUrn, channel: delivery.channel },
    options.holder,
    deps.clock,
    options.leaseMs,
  );
  if ("busy" in taken)
    return {
      delivered: false,
      retryable: true,
      error: "another worker syncs this thread now",
      retryAfterMs: BUSY_RETRY_MS,
      soon: true,
    };
  const { held } = taken;
  const wait = held.thread.data.waitUntil
    ? Date.parse(held.thread.data.waitUntil) - deps.clock().getTime()
    : 0;
  if (wait > 0) {
    await held.release();
    return {
      delivered: false,
      retryable: true,
      error: `the platform asked to wait until ${held.thread.data.waitUntil}`,
      retryAfterMs: wait,
      soon: true,
    };
  }
  delete held.thread.data.waitUntil;
  try {
    // The newest snapshot recorded for the thread (this delivery's, or a later one's): the thread
    // shows how the request stands now; the deliveries before it are done once it is applied.
    const newest = await newestFor(deps, delivery, sub.data.sent);
    if (newest.seq > held.thread.data.appliedSeq) {
      await apply(deps, held, surface, ref, parseSnapshot(newest.body));
      held.thread.data.appliedSeq = newest.seq;
      await held.save();
    }
    await held.release();
    return { delivered: true };
  } catch (e) {
    // A rate limit holds the whole thread (its other deliveries wait too), not only this delivery.
    if (e instanceof ChatSendError && e.retryAfterMs !== undefined)
      held.thread.data.waitUntil = new Date(deps.clock().getTime() + e.retryAfterMs).toISOString();
    await held.release().catch(() => undefined);
    return failure(e);
  }
}

async function newestFor(deps: SyncDeps, delivery: DeliveryData, sent: number): Promise<DeliveryData> {
  if (sent <= delivery.seq) return delivery;
  const later = await getDelivery(deps.state, deliveryId(delivery.subscriptionKey, sent));
  return later?.data ?? delivery;
}

function parseSnapshot(body: string): ThreadSnapshot {
  try {
    return JSON.parse(body) as ThreadSnapshot;
  } catch (e) {
    throw new ChatSendError("the delivery's body is not a thread snapshot", {
      retryable: false,
      cause: e,
      code: "INTERNAL",
    });
  }
}

function failure(e: unknown): SyncResult {
  if (e instanceof ChatSendError)
    return {
      delivered: false,
      retryable: e.retryable,
      error: e.message,
      ...(e.retryAfterMs !== undefined ? { retryAfterMs: e.retryAfterMs } : {}),
    };
  if (e instanceof ConflictError)
    return {
      delivered: false,
      retryable: true,
      error: "the thread's lease was taken over by another worker",
    };
  return { delivered: false, retryable: true, error: (e as Error).message ?? String(e) };
}

const digest = (r: ChatRender) => createHash("sha256").update(JSON.stringify(r)).digest("hex").slice(0, 16);

/** A ref with no thread of its own (a slash command's request): the first message Arbor posts heads it. */
const hasOwnThread = (ref: SlackThread | TeamsThread) => ref.kind === "teams" || ref.threadTs !== undefined;

async function apply(
  deps: SyncDeps,
  held: HeldThread,
  surface: ChatSurface<SlackThread | TeamsThread>,
  ref: SlackThread | TeamsThread,
  s: ThreadSnapshot,
): Promise<void> {
  const t: ThreadData = held.thread.data;
  const context = (): SurfaceContext => ({
    rootTaskUrn: s.rootTaskUrn,
    conversationUrn: s.conversationUrn,
    ...(t.threadHead ? { threadHead: t.threadHead } : {}),
  });
  // 1. progress (updated only when what it shows changed: the platforms rate-limit updates)
  const progress = surface.render.progress(s);
  const shown = digest(progress);
  if (t.progress === undefined) {
    const id = await surface.post(ref, progress, context());
    t.progress = id;
    t.progressShown = shown;
    if (!hasOwnThread(ref) && t.threadHead === undefined) t.threadHead = id;
    await held.save(); // the window: a crash before this line posts the progress again
  } else if (t.progressShown !== shown) {
    if (!(await updated(surface, ref, t.progress, progress, context()))) {
      // Someone deleted the progress message: posted anew (in the same thread), then kept up to date.
      t.progress = await surface.post(ref, progress, context());
      t.progressShown = shown;
      await held.save(); // the same window as the first post
    }
    t.progressShown = shown;
  }
  // 2. new questions
  for (const q of s.questions) {
    if (t.questions[q.urn]) continue;
    const id = await surface.post(ref, surface.render.question(q, s), context());
    t.questions[q.urn] = { messageId: id, answered: false };
    await held.save();
  }
  // 3. questions no longer waiting
  const waiting = new Set(s.questions.map((q) => q.urn));
  for (const [urn, posted] of Object.entries(t.questions)) {
    if (posted.answered || waiting.has(urn)) continue;
    const shown = await answeredQuestion(deps, urn, s);
    if (!shown) continue; // still pending, and the request goes on: it may be waiting again later
    // A question's message someone deleted is not posted again: the answer is recorded, nothing waits on it.
    await updated(surface, ref, posted.messageId, surface.render.question(shown, s), context());
    posted.answered = true;
    await held.save();
  }
  // 4. the answer
  if (isFinal(s) && t.answer === undefined) {
    t.answer = await surface.post(ref, surface.render.answer(s), context());
    await held.save();
  }
}

/** Replaces a message; false when it is not there any more (ChatSendError `gone`): the caller decides. */
async function updated(
  surface: ChatSurface<SlackThread | TeamsThread>,
  ref: SlackThread | TeamsThread,
  id: string,
  message: ChatRender,
  context: SurfaceContext,
): Promise<boolean> {
  try {
    await surface.update(ref, id, message, context);
    return true;
  } catch (e) {
    if (e instanceof ChatSendError && e.gone) return false;
    throw e;
  }
}

/** The question as answered (who answered what), or ended unanswered; undefined while it still waits. */
async function answeredQuestion(
  deps: SyncDeps,
  urn: string,
  s: ThreadSnapshot,
): Promise<ThreadQuestion | undefined> {
  const i = await deps.resources.getAs("uip.Interaction", urn);
  if (!i) return undefined;
  if (i.status === "answered" && i.response)
    return { ...questionOf(i), answered: { ...answeredBy(i.response), summary: answerSummary(i) } };
  if (!isFinal(s)) return undefined;
  return { ...questionOf(i), answered: { by: ENDED_BY, summary: `not answered: the request ${s.state}` } };
}
