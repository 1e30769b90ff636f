import * as z from "zod";
import { addSharedFiles, SlackFileSchema } from "./files.ts";
import { personOf, slackConversationName, slackSubmitKey } from "./identity.ts";
import { FOREIGN_TEXT, HELP_TEXT, type Inbound, refusalText, startWork, tell, throttled } from "./inbound.ts";
import { threadHead } from "./thread-heads.ts";

/**
 * One Events API callback (`event_callback`), once verified and its workspace known: what it asks
 * for, and the work it starts. How to drive it (routes.ts does):
 *
 *   const outcome = await onEvent(x, payload);   // "ignored" | "started" | "told" (a refusal, told ephemerally)
 *
 * Taken: `app_mention` in a channel, and `message` in a direct message (channel_type `im`, no
 * subtype: not an edit, a join, a bot's message; but `file_share`, whose files are added as the
 * tenant's documents, files.ts); never a bot's message nor our own. The thread
 * is the event's `thread_ts` (a follow-up) or its own `ts` (a new thread); its conversation is the
 * one named after the thread, or the request's whose head Arbor posted (thread-heads.ts). The
 * event id is the submit's idempotency key: Slack's retries (X-Slack-Retry-Num) of an event whose
 * first delivery was recorded write nothing new, and one whose first attempt crashed completes it.
 */
const EventSchema = z
  .object({
    type: z.string(),
    user: z.string().max(64).optional(),
    /** The person's own workspace: another organisation's in a shared (Slack Connect) channel. */
    user_team: z.string().max(32).optional(),
    text: z.string().max(200_000).optional(),
    channel: z.string().max(64).optional(),
    channel_type: z.string().max(32).optional(),
    ts: z.string().max(32).optional(),
    thread_ts: z.string().max(32).optional(),
    subtype: z.string().max(64).optional(),
    bot_id: z.string().max(64).optional(),
    /** Files shared with the message (subtype `file_share`): added as documents (files.ts). */
    files: z.array(SlackFileSchema).max(50).optional(),
  })
  .loose();

export const CallbackSchema = z
  .object({
    type: z.literal("event_callback"),
    team_id: z.string().max(32),
    event_id: z.string().min(1).max(100),
    event: EventSchema,
    authorizations: z
      .array(z.object({ user_id: z.string().max(64).optional() }).loose())
      .max(10)
      .optional(),
  })
  .loose();
export type EventCallback = z.output<typeof CallbackSchema>;

export type EventOutcome = "ignored" | "started" | "told";

export async function onEvent(x: Inbound, payload: EventCallback): Promise<EventOutcome> {
  const e = payload.event;
  const botUsers = new Set((payload.authorizations ?? []).flatMap((a) => (a.user_id ? [a.user_id] : [])));
  // A message with files shared is taken too (its files become documents); other subtypes are not.
  const sharing = (e.files?.length ?? 0) > 0 && (e.subtype === undefined || e.subtype === "file_share");
  if (
    !e.user ||
    !e.channel ||
    !e.ts ||
    e.bot_id ||
    (e.subtype && e.subtype !== "file_share") ||
    botUsers.has(e.user)
  )
    return "ignored";
  const mention = e.type === "app_mention" && !e.channel.startsWith("D");
  const direct = e.type === "message" && e.channel_type === "im";
  if (!mention && !direct) return "ignored";

  const threadTs = e.thread_ts ?? e.ts;
  const where = { channel: e.channel, user: e.user, threadTs };
  // Someone of another organisation in a shared channel is not a person of this tenant.
  if (e.user_team !== undefined && e.user_team !== x.team) {
    await tell(x, where, FOREIGN_TEXT);
    return "told";
  }
  const person = personOf(x.team, e.user, x.ws);
  const limited = throttled(x, person);
  if (limited) {
    await tell(x, where, limited);
    return "told";
  }
  // The app's own mention is not part of the request.
  const text = (e.text ?? "")
    .replace(/<@[A-Z0-9]+(\|[^>]*)?>/g, (m) => {
      const id = /^<@([A-Z0-9]+)/.exec(m)?.[1] ?? "";
      return botUsers.has(id) ? "" : m;
    })
    .trim();
  if (sharing) {
    await tell(x, where, (await addSharedFiles(x, person, e.files ?? [])).join("\n"));
    if (text === "") return "told";
  }
  if (text === "" || /^help$/i.test(text)) {
    await tell(x, where, HELP_TEXT);
    return "told";
  }
  const head = e.thread_ts
    ? await threadHead(x.parts.engine.deps.state, x.team, e.channel, e.thread_ts)
    : undefined;
  const conversation =
    head && head.tenant === x.ws.tenant
      ? { urn: head.conversationUrn }
      : { name: slackConversationName(x.team, e.channel, threadTs) };
  try {
    await startWork(x, person, {
      channel: e.channel,
      threadTs,
      text,
      key: slackSubmitKey(x.team, payload.event_id),
      conversation,
    });
    return "started";
  } catch (error) {
    // A refused follow-up (someone else's conversation), a request too long: nothing was written.
    const message = refusalText(error, true);
    if (!message) throw error;
    await tell(x, where, message);
    return "told";
  }
}
