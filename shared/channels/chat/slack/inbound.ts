import type { SubmitRequest, Submitted } from "../../../engine/engine.ts";
import type { ArborLogger } from "../../../kernel/logger.ts";
import type { SlackSettings, SlackWorkspace } from "../../../notify/chat/types.ts";
import { type RateLimiter, throttledMessage } from "../../http/rate-limit.ts";
import { type ChatRouteParts, chatReply } from "../chat-parts.ts";
import { slackClient } from "./client.ts";
import { type SlackPerson, slackThread } from "./identity.ts";

/**
 * What the three Slack routes share once a request is verified: starting work for a person in a
 * thread (submit, subscribe the thread, all before the ack), telling a person something only they
 * see, and what to tell them when the engine refuses. How to drive it:
 *
 *   const x: Inbound = { parts, slack, ws, team, log, limiter };
 *   const refused = throttled(x, person);                   // a message, or undefined
 *   await startWork(x, person, { channel, threadTs, text, key, conversation });
 *   await tell(x, { channel, user, threadTs }, "You may not answer this question");
 *   refusalText(error, retried)                            // what a person is told of an error, if anything
 */
export interface Inbound {
  parts: ChatRouteParts;
  slack: SlackSettings;
  ws: SlackWorkspace;
  team: string;
  log: Pick<ArborLogger, "info" | "warn" | "error">;
  limiter: RateLimiter;
}

export type ConversationRef = { urn: string } | { name: string };

export interface WorkRequest {
  channel: string;
  /** The thread it is said in; absent: Arbor's first message in the channel starts the thread. */
  threadTs: string | undefined;
  text: string;
  /** The submit's idempotency key. */
  key: string;
  conversation: ConversationRef;
  title?: string;
}

export async function startWork(x: Inbound, person: SlackPerson, w: WorkRequest): Promise<Submitted> {
  const { engine } = x.parts;
  const request: SubmitRequest = {
    tenant: person.caller.tenant,
    roles: person.caller.roles,
    actor: person.actor,
    text: w.text,
    idempotencyKey: w.key,
    ...("urn" in w.conversation
      ? { conversationUrn: w.conversation.urn }
      : { conversationName: w.conversation.name }),
    ...(w.title ? { title: w.title } : {}),
  };
  const submitted = await engine.submit(request);
  await subscribeThread(x, submitted.rootTaskId, w.channel, w.threadTs);
  return submitted;
}

/** Subscribes a Slack thread (or, without a ts, the channel) to a request; durable before the ack. */
export async function subscribeThread(
  x: Inbound,
  rootTaskUrn: string,
  channel: string,
  threadTs: string | undefined,
): Promise<void> {
  const thread = slackThread(x.ws.tenant, x.team, channel, threadTs, rootTaskUrn);
  await x.parts.notify.subscribe(rootTaskUrn, thread);
  await x.parts.engine.deps.untilDurable();
}

/** Why `person` may not make a request now (the workspace's or their own rate), or undefined. */
export function throttled(x: Inbound, person: SlackPerson): string | undefined {
  const t = x.limiter.take({
    actor: person.actor,
    caller: { tenant: `slack.${x.team}`, roles: [] },
  });
  if (!t) return undefined;
  return throttledMessage(t)
    .replace("with this API key", "from you")
    .replace("from this tenant", "from this workspace");
}

/** The bound on the one Slack call a route makes before it acks: the ack must come within 3 s. */
export const EPHEMERAL_TIMEOUT_MS = 1500;

/**
 * Tells one person something only they see (chat.postEphemeral). Made inline, before the ack,
 * because a refusal writes nothing: there is no delivery on the notify path to carry it, and it
 * is worth nothing later. Bounded (EPHEMERAL_TIMEOUT_MS) so the ack stays within Slack's 3 s; a
 * failure is logged (without the token) and the ack goes on.
 */
export async function tell(
  x: Inbound,
  where: { channel: string; user: string; threadTs?: string | undefined },
  text: string,
): Promise<void> {
  try {
    const client = slackClient(x.ws.botToken, x.slack.apiUrl, { timeoutMs: EPHEMERAL_TIMEOUT_MS });
    await client.chat.postEphemeral({
      channel: where.channel,
      user: where.user,
      text,
      ...(where.threadTs ? { thread_ts: where.threadTs } : {}),
    });
  } catch (error) {
    x.log.warn("slack: could not tell a person ephemerally", {
      team: x.team,
      channel: where.channel,
      error: (error as Error).message,
    });
  }
}

/**
 * What a person is told when the engine refuses (policy, validation, a question already answered),
 * or undefined: the route throws the error (chat-parts.ts's chatReply decides, by the one error
 * table). `retried`: Slack sends the request again after a failure (events), so an error worth
 * retrying is thrown for it rather than told.
 */
export function refusalText(error: unknown, retried = false): string | undefined {
  const told = chatReply(error, retried);
  if (told?.code !== "FORBIDDEN") return told?.text;
  return `Refused: ${told.text.replace(/ \(policy decision [^)]*\)$/, "")}. Only the person who started the conversation, or an admin, may do this.`;
}

export const FOREIGN_TEXT =
  "Arbor takes requests and answers from members of this workspace only, not from other organisations in a shared channel.";

export const HELP_TEXT = [
  "*Arbor* runs a team of assistants on your request and keeps you posted in a thread.",
  "• `/arbor <request>`: start a request in this channel (its progress, questions and answer come in a thread)",
  "• `/arbor watch <task URN>`: follow a request started elsewhere (the HTTP API, the CLI) in this channel",
  "• `/arbor help`: this help",
  "• Mention the app in a channel, or write to it directly, to start a request; reply in the thread to follow up.",
].join("\n");
