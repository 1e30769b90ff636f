import type { ChatSettingsSource, ChatSurface, TeamsThread } from "../../../notify/chat/types.ts";
import { answerCard, asRender, progressCard, questionCard } from "./cards.ts";
import { BotConnector } from "./connector.ts";

/**
 * The Teams surface the thread sync sends through (ChatSurface<TeamsThread>): renders with the
 * Adaptive Cards of cards.ts, posts and replaces activities with the Bot Connector client of
 * connector.ts. How to drive it:
 *
 *   const surface = teamsSurface(settingsSource, { fetch: guardedFetch, clock });
 *   const id = await surface.post(thread, surface.render.progress(snapshot), context);
 *   await surface.update(thread, id, surface.render.progress(later), context);
 *
 * `fetch` must be the outbound guard's (the service URL came from an activity); the allowed
 * service URLs are checked again before every call. Failures are ChatSendError (connector.ts).
 */
export interface TeamsSurfaceOptions {
  fetch: typeof fetch;
  clock?: () => Date;
  /** How long one Bot Connector call may take (default 10 s). */
  timeoutMs?: number;
}

export function teamsSurface(
  settings: ChatSettingsSource,
  options: TeamsSurfaceOptions,
): ChatSurface<TeamsThread> {
  const connector = new BotConnector(settings, options);
  const activity = (m: { text: string; payload: Record<string, unknown> }) => ({
    type: "message" as const,
    text: m.text,
    ...m.payload,
  });
  return {
    channel: "teams",
    render: {
      progress: (s) => asRender(progressCard(s), `${s.title}: ${s.state}`),
      question: (q, s) => asRender(questionCard(q, s.title), q.display.title),
      answer: (s) =>
        asRender(answerCard(s), s.state === "completed" ? (s.answer ?? s.title) : `${s.title}: ${s.state}`),
    },
    post: (ref, message) => connector.send(ref, activity(message)),
    update: async (ref, messageId, message) => {
      await connector.send(ref, activity(message), messageId);
    },
  };
}
