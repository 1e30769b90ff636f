import { type Context, Hono, type MiddlewareHandler } from "hono";
import { isArborError } from "../../kernel/errors.ts";
import { type ArborLogger, componentLogger } from "../../kernel/logger.ts";
import type { ChatSurfaces } from "../../notify/chat/sync.ts";
import type { ChatSettings, ChatSettingsSource } from "../../notify/chat/types.ts";
import type { StateStore } from "../../ports/state-store.ts";
import { errorBody } from "../http/http-kit.ts";
import type { ChatRouteParts } from "./chat-parts.ts";
import { slackRoutes } from "./slack/routes.ts";
import { slackSurface } from "./slack/surface.ts";
import { teamsRoutes } from "./teams/routes.ts";
import { teamsSurface } from "./teams/surface.ts";

/**
 * The chat channels on the one app, and their side of the notify path. How to drive it:
 *
 *   const settings = fileChatSettings({ file }) | secretChatSettings({ client, secretId });  // shared/notify/chat/settings.ts
 *   createServerApp({ ..., chat: chatRoutes({ engine, notify: notify.service, settings, fetch }) });
 *   new NotifyService({ ..., surfaces: chatSurfaces(settings, { fetch, state: engine.deps.state }) });
 *
 * Routes: Slack under /slack (events, commands, interactivity: slack/routes.ts), Teams under
 * /teams (messages: teams/routes.ts). Each channel verifies its own caller. In front of both, one
 * gate: a channel the settings do not have answers 404 ("Slack is not configured here", nothing
 * read, nothing written: the route does not exist on this server), and settings that cannot be
 * read (a file others may read, a bad secret, Secrets Manager down) answer 503 with Retry-After:
 * Slack and Teams try again, and the operator's log says what to fix (the message never holds a
 * secret). Both runtimes mount the same routes: `arbor serve` (cli/lib/serve.ts) and the API
 * function (functions/api.ts).
 *
 * Surfaces: what the thread sync posts with (Block Kit, Adaptive Cards). They read the settings on
 * every call (a rotated token is taken); the Teams surface's calls go through `fetch`, the outbound
 * guard's, as every URL that came from a request (an activity's serviceUrl) must.
 */
export type { ChatSurfaces };

export interface ChatSurfaceDeps {
  /** The outbound guard's fetch (the notify path's): the Teams surface calls the Bot Connector with it. */
  fetch: typeof fetch;
  /** The engine's state store (Slack remembers the heads of the threads it starts there). */
  state: StateStore;
  clock?: () => Date;
}

const CHANNELS = { slack: "Slack", teams: "Teams" } as const;
type Channel = keyof typeof CHANNELS;

export function chatRoutes(
  parts: ChatRouteParts,
  options: { log?: Pick<ArborLogger, "error" | "warn"> } = {},
): Hono {
  const log = options.log ?? componentLogger("chat");
  const app = new Hono();
  for (const channel of Object.keys(CHANNELS) as Channel[])
    app.use(`/${channel}/*`, gate(channel, parts.settings, log));
  app.route("/", slackRoutes(parts));
  app.route("/", teamsRoutes(parts));
  return app;
}

export function chatSurfaces(settings: ChatSettingsSource, deps: ChatSurfaceDeps): ChatSurfaces {
  return {
    slack: slackSurface(settings, { state: deps.state, ...(deps.clock ? { clock: deps.clock } : {}) }),
    teams: teamsSurface(settings, { fetch: deps.fetch, ...(deps.clock ? { clock: deps.clock } : {}) }),
  };
}

/** Which chat channels the settings have (for a start-up line); none when there are no settings. */
export function chatChannelsOf(settings: ChatSettings | undefined): string[] {
  return (Object.keys(CHANNELS) as Channel[])
    .filter((c) => settings?.[c] !== undefined)
    .map((c) => CHANNELS[c]);
}

function gate(
  channel: Channel,
  settings: ChatSettingsSource,
  log: Pick<ArborLogger, "error" | "warn">,
): MiddlewareHandler {
  return async (c: Context, next) => {
    let loaded: ChatSettings | undefined;
    try {
      loaded = await settings();
    } catch (error) {
      log.error("chat settings cannot be read", {
        channel,
        error: isArborError(error) ? error.message : (error as Error),
      });
      c.header("Retry-After", "30");
      return c.json(
        errorBody(
          "UNAVAILABLE",
          `${CHANNELS[channel]} cannot be served now: this server's chat settings cannot be read (its log says why); try again shortly`,
        ),
        503,
      );
    }
    if (loaded?.[channel] === undefined)
      return c.json(
        errorBody(
          "NOT_FOUND",
          `${CHANNELS[channel]} is not configured here: add a \`${channel}\` section to the chat settings ` +
            "(shared/channels/chat/CHAT-DEPLOY.md)",
        ),
        404,
      );
    await next();
    return undefined;
  };
}
