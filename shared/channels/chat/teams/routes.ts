import { Hono } from "hono";
import type { SubmitRequest } from "../../../engine/engine.ts";
import { componentLogger } from "../../../kernel/logger.ts";
import type { TeamsThread } from "../../../notify/chat/types.ts";
import { BodyTooLargeError, readBounded } from "../../http/http-read.ts";
import { type ChatRouteParts, chatReply } from "../chat-parts.ts";
import { addSharedFiles } from "../shared-files.ts";
import {
  type Activity,
  messageText,
  parseActivity,
  teamsConversationName,
  teamsFiles,
  teamsIdempotencyKey,
  teamsThreadId,
  unreadableFiles,
} from "./activity.ts";
import { checkActivity, TeamsKeySet, verifyToken } from "./auth.ts";
import { BotConnector } from "./connector.ts";
import { cardAction, type Person, personOf } from "./invoke.ts";
import { rootOf } from "./watch.ts";

/**
 * The Teams bot's messaging endpoint, `POST /teams/messages` (the Azure Bot resource's
 * "Messaging endpoint" is `<public URL>/teams/messages`). How to drive it:
 *
 *   const app = teamsRoutes({ engine, notify, settings, clock, fetch: guardedFetch });
 *   createServerApp({ ..., chat: app });     // or chat-routes.ts composing it with Slack's
 *
 * Every activity's token is checked first (auth.ts: 401, 403 for an unconfigured tenant, 503 when
 * the signing keys cannot be fetched): nothing of an activity that fails is read further or
 * written. Then:
 *   message   in a personal chat, a group chat or a channel (the bot's `<at>` mention cut): the
 *             text is submitted as the person (idempotency key from the activity id, so a retried
 *             activity is one request; the conversation named after the Teams conversation, so a
 *             follow-up in the chat or channel thread continues it), the conversation subscribed
 *             on the notify path (progress, questions and the answer come from there), 202 at
 *             once. `watch <task URN>` subscribes this conversation to a request started
 *             elsewhere (the HTTP API, the CLI, Slack), when the person may read it.
 *   invoke    `adaptiveCard/action` (Action.Execute): the answer or refresh of invoke.ts, its body
 *             the invoke response (the refreshed card, or an error).
 *   conversationUpdate  the bot added: a short welcome in the conversation.
 *   others    200, nothing done.
 * What the person must be told at once (a refused watch, a message that does not fit) is a short
 * reply through the Bot Connector with `fetch` (the outbound guard's: pass it as parts.fetch).
 */
const BODY_LIMIT = 256 * 1024;
const WATCH = /^watch\s+(cld:\S+)$/i;
const CHANNEL_FILES =
  "Files shared in a channel or a group chat are not added to the documents (Teams gives Arbor no way " +
  "to read them there). Share the file with Arbor in a personal chat to add it.";
const WELCOME =
  "Hi, I'm Arbor. Tell me what you need done (mention me in a channel): I plan it with my team of " +
  "assistants, keep one card here up to date, ask before anything risky, and post the answer. " +
  "`watch <task URN>` follows a request you started elsewhere.";

export function teamsRoutes(parts: ChatRouteParts): Hono {
  const clock = parts.clock ?? (() => new Date());
  const outbound = parts.fetch ?? fetch;
  const keys = new TeamsKeySet({ fetch: outbound, clock });
  const connector = new BotConnector(parts.settings, { fetch: outbound, clock, timeoutMs: 5_000 });
  const log = componentLogger("teams");
  const app = new Hono();

  /** A short text reply in the activity's conversation; failures are logged, never thrown. */
  const reply = async (thread: TeamsThread, text: string) => {
    try {
      await connector.send(thread, { type: "message", text });
    } catch (error) {
      log.warn("teams reply failed", { conversation: thread.id, error: error as Error });
    }
  };

  app.post("/teams/messages", async (c) => {
    const settings = (await parts.settings())?.teams;
    if (!settings) return c.json({ error: "Teams is not configured on this Arbor" }, 404);
    const token = await verifyToken(c.req.header("authorization"), settings, keys, clock);
    if (!token.ok) return c.json({ error: token.reason }, token.status);
    let activity: Activity | undefined;
    try {
      activity = parseActivity(JSON.parse(await readBounded(c.req.raw, BODY_LIMIT)));
    } catch (error) {
      if (error instanceof BodyTooLargeError) return c.json({ error: "the activity is too large" }, 413);
      activity = undefined;
    }
    if (!activity) return c.json({ error: "the body is not a Bot Framework activity" }, 400);
    const checked = checkActivity(token, activity, settings);
    if (!checked.ok) return c.json({ error: checked.reason }, checked.status);
    const who = personOf(checked.tenant, activity.from.aadObjectId, activity.from.name);
    const thread = threadOf(activity, checked.tenant.tenant, checked.aadTenantId);

    if (activity.type === "invoke") {
      if (activity.name !== "adaptiveCard/action") return c.body(null, 200);
      if (!who)
        return c.json({
          statusCode: 403,
          type: "application/vnd.microsoft.error",
          value: { code: "Forbidden", message: "Only people can answer." },
        });
      return c.json(await cardAction(parts.engine, who, activity.value), 200);
    }
    if (activity.type === "conversationUpdate") {
      const added = activity.membersAdded?.some((m) => m.id === activity?.recipient?.id);
      if (added) await reply(thread, WELCOME);
      return c.body(null, 200);
    }
    if (activity.type !== "message" || !who || !activity.id) return c.body(null, 200);
    const text = messageText(activity);
    // Files shared with the bot become the tenant's documents (../shared-files.ts).
    const files = teamsFiles(activity);
    if (files.length) {
      const person = { actor: who.actor, caller: { tenant: who.tenant, roles: who.roles } };
      await reply(thread, (await addSharedFiles(parts.engine, person, files)).join("\n"));
    } else if (unreadableFiles(activity)) await reply(thread, CHANNEL_FILES);
    if (!text) return c.body(null, 200);
    const watch = WATCH.exec(text);
    try {
      if (watch?.[1]) await watchRequest(parts, who, thread, watch[1], reply);
      else await submit(parts, who, thread, activity.id, text);
    } catch (error) {
      // The person's mistake or a refusal: told in the conversation; Teams is answered 200 (no
      // retry). Arbor unavailable or throttled, or anything internal: thrown (5xx), so that Teams
      // tries the activity again, and the person is told nothing of it (chat-parts.ts).
      const told = chatReply(error, true);
      if (!told) throw error;
      const refusal = watch
        ? "You may not do that here."
        : "This conversation was started by someone else: Arbor takes its follow-ups from them or an admin. Start your own in a personal chat with Arbor.";
      await reply(thread, told.code === "FORBIDDEN" ? refusal : told.text.slice(0, 500));
      return c.body(null, 200);
    }
    return c.body(null, 202);
  });
  return app;
}

function threadOf(activity: Activity, tenant: string, aadTenantId: string): TeamsThread {
  const conversationId = activity.conversation.id;
  // A channel post outside a thread id (no `;messageid=`) is replied to as a thread of its own.
  const replyToId =
    activity.type === "message" &&
    activity.conversation.conversationType === "channel" &&
    !conversationId.includes(";messageid=")
      ? activity.id
      : undefined;
  return {
    kind: "teams",
    id: teamsThreadId(activity.serviceUrl, conversationId),
    tenant,
    serviceUrl: activity.serviceUrl,
    conversationId,
    aadTenantId,
    ...(replyToId ? { replyToId } : {}),
  };
}

async function submit(
  parts: ChatRouteParts,
  who: Person,
  thread: TeamsThread,
  activityId: string,
  text: string,
) {
  const request: SubmitRequest = {
    tenant: who.tenant,
    text,
    actor: who.actor,
    roles: who.roles,
    idempotencyKey: teamsIdempotencyKey(thread.conversationId, activityId),
    conversationName: teamsConversationName(thread.aadTenantId, thread.conversationId),
  };
  const submitted = await parts.engine.submit(request);
  await parts.notify.subscribe(submitted.rootTaskId, thread);
}

async function watchRequest(
  parts: ChatRouteParts,
  who: Person,
  thread: TeamsThread,
  taskUrn: string,
  reply: (thread: TeamsThread, text: string) => Promise<void>,
) {
  const asker = { actor: who.actor, caller: { tenant: who.tenant, roles: who.roles } };
  const root = await rootOf(parts.engine, taskUrn, asker);
  if (!root) {
    // Not there and not theirs are told alike: nothing about other people's requests leaks.
    await reply(thread, `There is no request ${taskUrn} you may follow.`);
    return;
  }
  await parts.notify.subscribe(root, thread);
}
