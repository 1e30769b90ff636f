import type { KnownBlock } from "@slack/types";
import {
  type ChatRender,
  ChatSendError,
  type ChatSettingsSource,
  type ChatSurface,
  type SlackThread,
  type SurfaceContext,
} from "../../../notify/chat/types.ts";
import type { StateStore } from "../../../ports/state-store.ts";
import { answerBlocks, progressBlocks, questionBlocks } from "./blocks.ts";
import { slackClient, toChatSendError } from "./client.ts";
import { workspaceOf } from "./identity.ts";
import { rememberThreadHead } from "./thread-heads.ts";

/**
 * Slack's side of the thread sync (shared/notify/chat/sync.ts): renders a ThreadSnapshot with Block Kit
 * (blocks.ts) and posts or updates it with the official Web API client. How to drive it:
 *
 *   const surface = slackSurface(settingsSource, { state: engine.deps.state });
 *   new NotifyService({ ..., surfaces: { slack: surface } });     // the sync calls post/update
 *
 * post -> chat.postMessage in the thread (`thread_ts`: the thread's ts, or the head Arbor posted for
 * a slash command's request); update -> chat.update. A post that starts a thread (no thread ts,
 * no head yet) is remembered as the thread's head (thread-heads.ts, with `state`), so a follow-up
 * in that thread continues the request's conversation. Failures are ChatSendError (client.ts):
 * rate limits and Slack's own trouble retryable, a channel or token that is gone not. The bot token
 * is read from the settings on every call (a rotated secret is picked up) and never logged.
 */
export interface SlackSurfaceOptions {
  /** Where thread heads are remembered (the engine's state store); without it follow-ups in a slash command's thread start a new conversation. */
  state?: StateStore;
  clock?: () => Date;
  /** How long one Web API call may take (default 10 s). */
  timeoutMs?: number;
}

export function slackSurface(
  settings: ChatSettingsSource,
  options: SlackSurfaceOptions = {},
): ChatSurface<SlackThread> {
  const clock = options.clock ?? (() => new Date());
  const timeoutMs = options.timeoutMs ?? 10_000;

  const clientFor = async (ref: SlackThread) => {
    const slack = (await settings())?.slack;
    const ws = workspaceOf(slack, ref.team);
    // Retried: the settings may be back in a moment (a file being replaced, a secret mid-rotation);
    // a workspace left out for good ends dead when the delivery's retries run out.
    if (!slack || !ws)
      throw new ChatSendError(`Slack workspace ${ref.team} is not in the chat settings (now)`, {
        retryable: true,
      });
    if (ws.tenant !== ref.tenant)
      throw new ChatSendError(`Slack workspace ${ref.team} now maps to another tenant: not posting there`, {
        retryable: false,
      });
    return slackClient(ws.botToken, slack.apiUrl, { timeoutMs });
  };

  return {
    channel: "slack",
    render: { progress: progressBlocks, question: questionBlocks, answer: answerBlocks },

    async post(ref: SlackThread, message: ChatRender, context: SurfaceContext): Promise<string> {
      const client = await clientFor(ref);
      const threadTs = ref.threadTs ?? context.threadHead;
      let ts: string | undefined;
      try {
        const res = await client.chat.postMessage({
          channel: ref.channel,
          text: message.text,
          ...blocksOf(message),
          ...(threadTs ? { thread_ts: threadTs } : {}),
          unfurl_links: false,
          unfurl_media: false,
        });
        ts = res.ts;
      } catch (error) {
        throw toChatSendError(error, "chat.postMessage");
      }
      if (!ts) throw new ChatSendError("chat.postMessage answered without a ts", { retryable: true });
      if (!threadTs && options.state) {
        // The head of a thread Arbor started: remembered before the sync records the post, so a
        // follow-up that comes as soon as people see it finds its conversation.
        await rememberThreadHead(
          options.state,
          clock,
          { team: ref.team, channel: ref.channel, ts },
          { tenant: ref.tenant, conversationUrn: context.conversationUrn, rootTaskUrn: context.rootTaskUrn },
        ).catch(() => undefined); // the message stands; a lost record costs follow-ups their continuity only
      }
      return ts;
    },

    async update(ref: SlackThread, messageId: string, message: ChatRender): Promise<void> {
      const client = await clientFor(ref);
      try {
        await client.chat.update({
          channel: ref.channel,
          ts: messageId,
          text: message.text,
          ...blocksOf(message),
        });
      } catch (error) {
        throw toChatSendError(error, "chat.update");
      }
    },
  };
}

/** The blocks of a message rendered by blocks.ts (its payload is `{ blocks }`). */
function blocksOf(message: ChatRender): { blocks?: KnownBlock[] } {
  const blocks = message.payload.blocks;
  return Array.isArray(blocks) ? { blocks: blocks as KnownBlock[] } : {};
}
