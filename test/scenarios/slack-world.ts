import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import { slackRoutes } from "../../shared/channels/chat/slack/routes.ts";
import { slackSurface } from "../../shared/channels/chat/slack/surface.ts";
import type { RunningServer } from "../../shared/channels/http/http-server.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import type { AssistantDefinition } from "../../shared/engine/engine.ts";
import type { ChatSettings } from "../../shared/notify/chat/types.ts";
import type { OutboundSettings } from "../../shared/outbound/policy.ts";
import type { RateLimits } from "../../shared/runtime/config.ts";
import type { LocalNotify } from "../../shared/runtime/local/local-notify.ts";
import { startLocalNotify } from "../../shared/runtime/local/local-notify.ts";
import { type FakeSlack, slackPost, startFakeSlack } from "../peers/fake-slack.ts";
import { Harness } from "./engine-harness.ts";
import { serveHttp } from "./http-fixture.ts";
import { isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * What the Slack end-to-end tests share: a harness (scripted model, controllable clock), the
 * local notify path with the Slack surface, the real server with the Slack routes mounted as
 * `arbor serve` mounts them, and the fake Slack API the real WebClient talks to. People:
 *   U_ADA   mapped to `user_ada` (the HTTP API key `ada` is hers too)
 *   U_BOB   a member of the workspace, not mapped: `user_slack.T1.U_BOB`
 *   U_ADM   an admin (settings `admins`)
 */
export const SECRET = "slack-signing-secret-for-tests";
export const TOKEN = "xoxb-test-token-acme-1";
export const TEAM = "T1";
export const ada = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: [] });

export interface SlackWorld {
  h: Harness;
  notify: LocalNotify;
  server: RunningServer;
  fake: FakeSlack;
  settings: ChatSettings;
  /** Signs and POSTs to a Slack route at the harness's clock (`skewSeconds` moves the signature's time). */
  post(path: string, body: string, headers?: Record<string, string>, skewSeconds?: number): Promise<Response>;
  /** How much is written: resources of the tenant, event streams, notify subscriptions, Slack thread heads. */
  written(): Promise<{ resources: number; streams: number; subscriptions: number }>;
  close(): Promise<void>;
}

/** A small request: a plan of one subtask (a venue), its answer "the barn", judged done. */
export const oneVenue: ScriptFunction = (r) =>
  isPlan(r)
    ? planOf({
        name: "Offsite",
        purpose: "Plan the offsite",
        subtasks: [{ name: "Venue", purpose: "Pick one" }],
      })
    : isEvaluation(r)
      ? pass("booked")
      : { content: "the barn" };

export async function startSlackWorld(options: {
  script: ScriptFunction;
  assistants: AssistantDefinition[];
  /** Requests per Slack user and per workspace (slackRoutes' default when absent). */
  limits?: RateLimits;
  /** What the outbound guard lets through (a file shared in Slack is downloaded from the fake). */
  outbound?: OutboundSettings;
}): Promise<SlackWorld> {
  const h = await Harness.create({
    script: options.script,
    assistants: options.assistants,
    settings: { electionThreshold: -1 },
    ...(options.outbound ? { outbound: options.outbound } : {}),
  });
  const fake = await startFakeSlack({ tokens: { [TOKEN]: TEAM } });
  const settings: ChatSettings = {
    slack: {
      signingSecret: SECRET,
      apiUrl: fake.apiUrl,
      workspaces: {
        [TEAM]: {
          tenant: "acme",
          botToken: TOKEN,
          users: { U_ADA: "user_ada" },
          admins: ["U_ADM"],
          defaultRoles: [],
        },
      },
    },
  };
  const source = async () => settings;
  const clock = () => new Date(h.now);
  const surface = slackSurface(source, { state: h.engine.deps.state, clock });
  const notify = startLocalNotify(h.engine, {
    notify: { allowLoopbackHttp: true },
    worker: { tickMs: 60_000 },
    surfaces: { slack: surface },
  });
  const server = await serveHttp({
    engine: h.engine,
    keys: new ApiKeys({ keys: [ada.entry] }),
    notify: notify.service,
    chat: slackRoutes(
      { engine: h.engine, notify: notify.service, settings: source, clock },
      options.limits ? { limits: options.limits } : {},
    ),
  });
  return {
    h,
    notify,
    server,
    fake,
    settings,
    post: (path, body, headers = {}, skewSeconds = 0) =>
      slackPost(`${server.url}${path}`, SECRET, body, Math.floor(h.now / 1000) + skewSeconds, headers),
    async written() {
      const state = h.engine.deps.state;
      const resources = (await h.engine.deps.resources.descendantUrns(tenantUrn("acme"))).length;
      let streams = 0;
      let cursor: string | undefined;
      do {
        const page = await state.listStreams(cursor ? { cursor } : {});
        streams += page.items.length;
        cursor = page.cursor;
      } while (cursor);
      const subscriptions = (await state.byStatus("notify-sub", "open")).items.length;
      return { resources, streams, subscriptions };
    },
    async close() {
      await server.close();
      await notify.stop();
      await fake.close();
      await h.close();
    },
  };
}
