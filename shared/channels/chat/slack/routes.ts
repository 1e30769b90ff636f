import { type Context, Hono } from "hono";
import * as z from "zod";
import { type ArborLogger, componentLogger } from "../../../kernel/logger.ts";
import type { SlackSettings } from "../../../notify/chat/types.ts";
import { errorBody, errorHandler } from "../../http/http-kit.ts";
import type { RateLimits } from "../../http/rate-limit.ts";
import { RateLimiter } from "../../http/rate-limit.ts";
import type { ChatRouteParts } from "../chat-parts.ts";
import { type CommandForm, onCommand } from "./commands.ts";
import { CallbackSchema, onEvent } from "./events.ts";
import { workspaceOf } from "./identity.ts";
import type { Inbound } from "./inbound.ts";
import {
  type ActionPayload,
  onBlockActions,
  onViewSubmission,
  type SubmissionPayload,
} from "./interactivity.ts";
import { MAX_SLACK_BODY_BYTES, parseSlackJson, readBody, verifySlackRequest } from "./verify.ts";

/**
 * Slack's three request URLs on the one Hono app (shared/channels/chat/chat-routes.ts mounts them).
 * How to drive it:
 *
 *   app.route("/", slackRoutes({ engine, notify, settings, clock }));
 *
 *   POST /slack/events         Events API: url_verification (the challenge), event_callback
 *                              (app_mention in channels, message in DMs: events.ts)
 *   POST /slack/commands       /arbor <request> | help | watch <task URN> (commands.ts)
 *   POST /slack/interactivity  block_actions (buttons), view_submission (modals): interactivity.ts
 *
 * Every request: the body read raw, at most 256 KB (413); the signature and its 300 s window
 * checked on it (401, verify.ts) before anything is parsed; then the workspace (team id) must be
 * one the settings map to a tenant (else refused: 403, or for a command a reply saying so), and
 * the person is rate limited per user and per workspace. Nothing is written before all of that
 * passes. The ack comes as soon as the work is recorded and the thread subscribed: the work, and
 * everything Arbor posts, goes on through the notify path (shared/notify/chat/sync.ts, surface.ts).
 */
export interface SlackRouteOptions {
  /** Requests per Slack user (perKey) and per workspace (perTenant); default below. */
  limits?: RateLimits;
  log?: Pick<ArborLogger, "info" | "warn" | "error">;
}

export const DEFAULT_SLACK_LIMITS: RateLimits = {
  perKey: { burst: 10, perSecond: 1 },
  perTenant: { burst: 100, perSecond: 20 },
};

const FormCommandSchema = z
  .object({
    team_id: z.string().min(1).max(32),
    channel_id: z.string().min(1).max(64),
    user_id: z.string().min(1).max(64),
    text: z.string().max(100_000).default(""),
    trigger_id: z.string().max(200).optional(),
  })
  .loose();

const InteractionEnvelope = z
  .object({
    type: z.string().max(64),
    team: z
      .object({ id: z.string().max(32) })
      .loose()
      .nullish(),
    user: z.object({ id: z.string().min(1).max(64), team_id: z.string().max(32).optional() }).loose(),
  })
  .loose();

type Verified = { raw: string; slack: SlackSettings };

export function slackRoutes(parts: ChatRouteParts, options: SlackRouteOptions = {}): Hono {
  const app = new Hono();
  const clock = parts.clock ?? (() => new Date());
  const log = options.log ?? componentLogger("slack");
  const limiter = new RateLimiter(options.limits ?? DEFAULT_SLACK_LIMITS, () => clock().getTime());

  /** The verified raw body, or the response refusing it. Nothing is parsed before the signature holds. */
  async function verified(c: Context): Promise<Verified | Response> {
    const timestamp = c.req.header("x-slack-request-timestamp");
    const signature = c.req.header("x-slack-signature");
    const slack = (await parts.settings())?.slack;
    if (!slack)
      return c.json(
        errorBody(
          "NOT_FOUND",
          "Slack is not set up on this server: add a `slack` section to the chat settings",
        ),
        404,
      );
    if (timestamp === undefined || signature === undefined)
      return c.json(
        errorBody("UNAUTHENTICATED", verifySlackRequest("", { timestamp, signature }, "", clock()) ?? ""),
        401,
      );
    const raw = await readBody(c.req.raw, MAX_SLACK_BODY_BYTES);
    if (raw === "too-large") {
      c.header("Connection", "close");
      return c.json(
        errorBody("TOO_LARGE", `The request body is larger than ${MAX_SLACK_BODY_BYTES} bytes`),
        413,
      );
    }
    const problem = verifySlackRequest(slack.signingSecret, { timestamp, signature }, raw, clock());
    if (problem) return c.json(errorBody("UNAUTHENTICATED", problem), 401);
    const retry = c.req.header("x-slack-retry-num");
    if (retry)
      log.info("slack: a retried request", {
        path: c.req.path,
        retry,
        reason: c.req.header("x-slack-retry-reason"),
      });
    return { raw, slack };
  }

  const inbound = (v: Verified, team: string): Inbound | undefined => {
    const ws = workspaceOf(v.slack, team);
    return ws ? { parts, slack: v.slack, ws, team, log, limiter } : undefined;
  };
  const unknownWorkspace = (c: Context, team: unknown) => {
    c.header("X-Slack-No-Retry", "1");
    return c.json(
      errorBody(
        "FORBIDDEN",
        `Slack workspace ${String(team)} is not connected to Arbor: add it to the chat settings (slack.workspaces)`,
      ),
      403,
    );
  };
  const badRequest = (c: Context, message: string) => c.json(errorBody("VALIDATION", message), 400);

  app.post("/slack/events", async (c) => {
    const v = await verified(c);
    if (v instanceof Response) return v;
    const json = parseSlackJson(v.raw);
    if (!json.ok) return badRequest(c, json.problem);
    const body = json.value as { type?: unknown; challenge?: unknown; team_id?: unknown };
    if (body.type === "url_verification") {
      if (typeof body.challenge !== "string" || body.challenge.length > 500)
        return badRequest(c, "url_verification needs a challenge");
      return c.json({ challenge: body.challenge });
    }
    if (body.type !== "event_callback") return c.body(null, 200); // app_rate_limited and the like: nothing to do
    const x = inbound(v, String(body.team_id));
    if (!x) return unknownWorkspace(c, body.team_id);
    const callback = CallbackSchema.safeParse(body);
    if (!callback.success) return badRequest(c, "The event callback is not one Arbor reads");
    await onEvent(x, callback.data);
    return c.body(null, 200);
  });

  app.post("/slack/commands", async (c) => {
    const v = await verified(c);
    if (v instanceof Response) return v;
    const params = new URLSearchParams(v.raw);
    if (params.get("ssl_check") === "1") return c.body(null, 200);
    const form = FormCommandSchema.safeParse(Object.fromEntries(params));
    if (!form.success) return badRequest(c, "The slash command's form is not one Slack sends");
    const x = inbound(v, form.data.team_id);
    if (!x)
      return c.json({
        response_type: "ephemeral",
        text: `This Slack workspace (${form.data.team_id}) is not connected to Arbor: an Arbor admin adds it to the chat settings.`,
      });
    return c.json(await onCommand(x, form.data as CommandForm, v.raw));
  });

  app.post("/slack/interactivity", async (c) => {
    const v = await verified(c);
    if (v instanceof Response) return v;
    const payload = new URLSearchParams(v.raw).get("payload");
    if (payload === null) return badRequest(c, "An interactivity request carries a `payload` form field");
    const json = parseSlackJson(payload);
    if (!json.ok) return badRequest(c, json.problem);
    const envelope = InteractionEnvelope.safeParse(json.value);
    if (!envelope.success) return badRequest(c, "The interactivity payload is not one Arbor reads");
    const team = envelope.data.team?.id ?? envelope.data.user.team_id;
    const x = inbound(v, String(team));
    if (!x) return unknownWorkspace(c, team);
    if (envelope.data.type === "block_actions") {
      const p = json.value as ActionPayload;
      if (!Array.isArray(p.actions)) return badRequest(c, "block_actions carries actions");
      await onBlockActions(x, p);
      return c.body(null, 200);
    }
    if (envelope.data.type === "view_submission") {
      const p = json.value as SubmissionPayload;
      if (typeof p.view !== "object" || p.view === null)
        return badRequest(c, "view_submission carries a view");
      const reply = await onViewSubmission(x, p);
      return Object.keys(reply).length === 0 ? c.body(null, 200) : c.json(reply);
    }
    return c.body(null, 200); // view_closed, shortcuts: nothing to do
  });

  app.onError(errorHandler(log));
  return app;
}
