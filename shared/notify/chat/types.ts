import * as z from "zod";
import { DisplayNameSchema, type InteractionResource } from "../../domain/resources.ts";
import type { TaskStatus } from "../../domain/task-state.ts";
import { ArborError, type ErrorCode } from "../../kernel/errors.ts";

/**
 * Chat channels (Slack, Teams): what the two have in common, so each channel keeps only what is
 * its own (verifying its caller, parsing its payloads, rendering Block Kit or Adaptive Cards,
 * calling its API). How the pieces fit:
 *
 *   inbound   a channel's routes (shared/channels/chat/slack/, shared/channels/chat/teams/) verify the
 *             platform's signature or token, map the workspace or Teams tenant to an Arbor tenant
 *             and the person to an actor (ChatSettings below), submit the message (idempotently:
 *             the platform's event id is the submit's idempotency key) or answer an interaction
 *             (engine.respond: the policy decides), subscribe the thread on the notify path, and
 *             acknowledge at once.
 *   outbound  the notify path records deliveries for a chat subscription as for a webhook, with a
 *             ThreadSnapshot as the body (how the request stands, its tree, its questions); the
 *             thread sync (shared/notify/chat/sync.ts) sends one through the channel's ChatSurface: one
 *             progress message kept up to date, one message per question (updated once answered:
 *             who answered what), and the answer.
 *
 * Secrets (bot tokens, signing secrets, the Teams app's client secret) are ChatSettings: a file
 * with owner-only permissions locally, a Secrets Manager secret on AWS (shared/notify/chat/settings.ts).
 */

// ---- settings ------------------------------------------------------------------------------------

const tenantId = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "a tenant id: 1-64 of A-Z a-z 0-9 _ -");
const actorId = z.string().regex(/^user_[A-Za-z0-9._@-]{1,100}$/, "user_<name>");
const roles = z.array(z.string().min(1).max(64)).max(50);

/**
 * Who a platform user is in Arbor: by default `user_slack.<team>.<user>` /
 * `user_teams.<aadObjectId>` with `defaultRoles`; `users` maps a platform user to the Arbor actor
 * id their API key has (so the same person answers in Slack and over the HTTP API), `admins` (Arbor
 * actor ids or platform user ids) get the admin role, `names` names them.
 */
const PeopleSchema = {
  users: z.record(z.string().min(1).max(200), actorId).default({}),
  /**
   * How people are named in Arbor (approvals, threads, the console), by platform user id or Arbor
   * actor id; absent: Teams's own name for them, or their id (Slack).
   */
  names: z.record(z.string().min(1).max(200), DisplayNameSchema).optional(),
  admins: z.array(z.string().min(1).max(200)).max(1000).default([]),
  defaultRoles: roles.default([]),
};

export const SlackWorkspaceSchema = z
  .object({
    /** The Arbor tenant this workspace's people work in. */
    tenant: tenantId,
    /** The bot token (`xoxb-...`) Arbor posts with in this workspace. */
    botToken: z.string().min(10).max(500),
    ...PeopleSchema,
  })
  .strict();

export const SlackSettingsSchema = z
  .object({
    /** The app's signing secret (Basic Information > App Credentials). */
    signingSecret: z.string().min(8).max(500),
    /** Workspaces by team id (`T...`): a request from any other workspace is refused. */
    workspaces: z.record(
      z.string().regex(/^[A-Z0-9]{2,32}$/, "a Slack team id (T...)"),
      SlackWorkspaceSchema,
    ),
    /** The Web API's base URL (tests point it at the fake Slack API). */
    apiUrl: z.url().default("https://slack.com/api/"),
  })
  .strict();

export const TeamsTenantSchema = z
  .object({
    /** The Arbor tenant this Microsoft Entra tenant's people work in. */
    tenant: tenantId,
    ...PeopleSchema,
  })
  .strict();

export const TeamsSettingsSchema = z
  .object({
    /** The bot's Microsoft App ID: the audience of every token Teams sends. */
    appId: z.string().min(1).max(200),
    /** The bot's client secret: Arbor gets its own tokens for the Bot Connector with it. */
    appPassword: z.string().min(1).max(500),
    /** The Entra tenant the bot is registered in (single-tenant bots): the token endpoint's. */
    appTenantId: z.string().min(1).max(200).optional(),
    /** Where the signing keys are published (tests: the local key set's OpenID metadata). */
    openIdMetadataUrl: z.url().default("https://login.botframework.com/v1/.well-known/openidconfiguration"),
    /** Issuers a token may have. */
    issuers: z.array(z.string().min(1).max(500)).min(1).default(["https://api.botframework.com"]),
    /** Where Arbor gets its own token (client credentials); absent: derived from appTenantId. */
    tokenUrl: z.url().optional(),
    /** Service URLs replies may go to (prefixes): an activity naming any other is refused. */
    allowedServiceUrls: z.array(z.url()).min(1).default(["https://smba.trafficmanager.net/"]),
    /** Entra tenants by id (the activity's `conversation.tenantId`): any other is refused. */
    tenants: z.record(z.string().min(1).max(200), TeamsTenantSchema),
  })
  .strict();

export const ChatSettingsSchema = z
  .object({ slack: SlackSettingsSchema.optional(), teams: TeamsSettingsSchema.optional() })
  .strict();

export type SlackWorkspace = z.output<typeof SlackWorkspaceSchema>;
export type SlackSettings = z.output<typeof SlackSettingsSchema>;
export type TeamsTenant = z.output<typeof TeamsTenantSchema>;
export type TeamsSettings = z.output<typeof TeamsSettingsSchema>;
export type ChatSettings = z.output<typeof ChatSettingsSchema>;

/**
 * The settings as the channels read them: loaded once, read again after `ttlMs` (a rotated secret
 * is picked up without a restart). Undefined: no chat channel is configured.
 */
export type ChatSettingsSource = () => Promise<ChatSettings | undefined>;

// ---- what a thread shows ------------------------------------------------------------------------

/** One task of the request's tree as a thread shows it (breadth first). */
export interface ThreadTask {
  taskId: string;
  depth: number;
  title: string;
  status: TaskStatus;
  /** The elected assistant's name. */
  assistant?: string;
}

/** A question a thread shows: waiting, or answered (who answered what). */
export interface ThreadQuestion {
  urn: string;
  kind: InteractionResource["kind"];
  purpose: InteractionResource["purpose"];
  display: InteractionResource["display"];
  options?: InteractionResource["options"];
  validation?: InteractionResource["validation"];
  binding?: InteractionResource["binding"];
  /** Set once answered: the answerer's actor id (and name, when they have one) and what they chose or wrote (short). */
  answered?: { by: string; byName?: string; byCapabilities?: string[]; summary: string };
}

/**
 * How a request stands, as a chat thread shows it: built from the state when a delivery is
 * recorded (shared/notify/chat/snapshot.ts), sent as it is on every attempt.
 */
export interface ThreadSnapshot {
  rootTaskUrn: string;
  conversationUrn: string;
  title: string;
  state: "working" | "input-required" | "completed" | "failed" | "canceled";
  tasks: ThreadTask[];
  taskCount: number;
  truncated: boolean;
  /** Questions waiting now. */
  questions: ThreadQuestion[];
  /** The answer (completed), cut as notifiedAnswer cuts it. */
  answer?: string;
  /** Why it failed or was canceled. */
  reason?: string;
  /** When the snapshot was taken (ISO 8601). */
  at: string;
  /**
   * The whole request's tokens and cost so far (the root task's usage; `unpricedCalls` above 0: a
   * model without a price answered some calls, so the cost is unknown). Not part of the digest: a
   * model call alone changes no message; what is shown is as of the last visible change.
   */
  usage?: { tokens: number; costUsd: number; unpricedCalls: number };
}

// ---- the channel's side of the outbound path ------------------------------------------------------

/** A rendered message: text for notifications and fallbacks, and the channel's own payload. */
export interface ChatRender {
  text: string;
  /** Slack: `{ blocks }`; Teams: `{ attachments }` (an Adaptive Card). */
  payload: Record<string, unknown>;
}

/** What the sync knows of the thread when it calls a surface. */
export interface SurfaceContext {
  rootTaskUrn: string;
  conversationUrn: string;
  /** The message that heads the thread, once posted (Slack: its ts, for a slash command's thread). */
  threadHead?: string;
}

/**
 * A failed call to the platform: `retryable` (rate limited, 5xx, timeout: the delivery is tried
 * again, after `retryAfterMs` when the platform said) or not (the channel is gone, the bot was
 * removed: the delivery ends dead, visible to operators). The sync decides by these fields, not
 * by the code; the code (kernel/error-edges.ts) follows from them unless given: THROTTLED (with a
 * wait), UNAVAILABLE (retryable), NOT_FOUND (`gone`), CONFIG (the platform refuses: the operator's
 * to fix). None of it is ever shown to a person in a chat: it happens on Arbor's way out.
 */
export class ChatSendError extends ArborError {
  readonly retryable: boolean;
  readonly retryAfterMs: number | undefined;
  /**
   * An update whose message is not there any more (someone deleted it: Slack `message_not_found`,
   * the Bot Connector's 404 on the activity): the sync posts the message anew instead of ending dead.
   */
  readonly gone: boolean;
  constructor(
    message: string,
    options: { retryable: boolean; retryAfterMs?: number; gone?: boolean; cause?: unknown; code?: ErrorCode },
  ) {
    const { retryable, retryAfterMs, gone = false } = options;
    const code =
      options.code ??
      (retryable
        ? retryAfterMs !== undefined
          ? "THROTTLED"
          : "UNAVAILABLE"
        : gone
          ? "NOT_FOUND"
          : "CONFIG");
    super(code, message, options.cause === undefined ? {} : { cause: options.cause });
    this.retryable = retryable;
    this.retryAfterMs = retryAfterMs;
    this.gone = gone;
  }
}

/**
 * A channel's outbound side, for the thread sync. `Ref` is the channel's subscription (where the
 * thread is: Slack team, channel and thread ts; Teams service URL and conversation id).
 */
export interface ChatSurface<Ref> {
  readonly channel: "slack" | "teams";
  render: {
    /** The progress message: the request's state and tree (statuses, assistants). */
    progress(s: ThreadSnapshot): ChatRender;
    /** A question, with its buttons / selects / input (waiting), or who answered what (answered). */
    question(q: ThreadQuestion, s: ThreadSnapshot): ChatRender;
    /** The answer, or how it failed. */
    answer(s: ThreadSnapshot): ChatRender;
  };
  /** Posts in the thread; returns the new message's id (Slack ts, Teams activity id). */
  post(ref: Ref, message: ChatRender, context: SurfaceContext): Promise<string>;
  /** Replaces a message it posted. */
  update(ref: Ref, messageId: string, message: ChatRender, context: SurfaceContext): Promise<void>;
}

// ---- where a thread is: the notify subscriptions of the chat channels ------------------------------

/**
 * A Slack thread subscribed to a request (shared/notify/subscriptions.ts takes it as a
 * subscription kind). `threadTs` absent: the thread is started by the first message Arbor posts
 * (a slash command's request); the sync keeps that message's ts as the thread's head.
 */
export const SlackThreadSchema = z
  .object({
    kind: z.literal("slack"),
    /** One per request and thread: slackThreadId(team, channel, threadTs ?? requestUrn). */
    id: z.string().min(1).max(200),
    tenant: tenantId,
    team: z.string().min(1).max(32),
    channel: z.string().min(1).max(32),
    threadTs: z.string().min(1).max(32).optional(),
  })
  .strict();

/** A Teams conversation subscribed to a request: replies go to `serviceUrl` (checked when subscribed). */
export const TeamsThreadSchema = z
  .object({
    kind: z.literal("teams"),
    id: z.string().min(1).max(200),
    tenant: tenantId,
    serviceUrl: z.url().max(2048),
    conversationId: z.string().min(1).max(1000),
    /** The Entra tenant (conversation.tenantId). */
    aadTenantId: z.string().min(1).max(200),
    /** The activity replied to (a channel thread's root), when there is one. */
    replyToId: z.string().min(1).max(1000).optional(),
  })
  .strict();

export type SlackThread = z.output<typeof SlackThreadSchema>;
export type TeamsThread = z.output<typeof TeamsThreadSchema>;
