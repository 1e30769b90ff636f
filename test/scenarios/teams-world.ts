import type { Hono } from "hono";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { teamsRoutes } from "../../shared/channels/chat/teams/routes.ts";
import { teamsSurface } from "../../shared/channels/chat/teams/surface.ts";
import type { AssistantDefinition } from "../../shared/engine/engine.ts";
import type { ChatSettings, TeamsSettings } from "../../shared/notify/chat/types.ts";
import { createGuardedFetch } from "../../shared/outbound/guard.ts";
import type { OutboundSettings } from "../../shared/outbound/policy.ts";
import { outboundPolicy } from "../../shared/outbound/policy.ts";
import { type LocalNotify, startLocalNotify } from "../../shared/runtime/local/local-notify.ts";
import { type FakeTeams, startFakeTeams } from "../peers/fake-teams.ts";
import { Harness } from "./engine-harness.ts";
import { inviteByEmail, MAILER } from "./scenarios.ts";
import { LOOPBACK_ALLOWED } from "./tool-world.ts";

/**
 * What the Teams tests share: a local Arbor (the harness: scripted model, the Mailer whose
 * send_email waits for a person's approval), the local notify path, the fake Teams (key set, token
 * endpoint, Bot Connector) on 127.0.0.1, the Teams routes over them, and helpers to send
 * activities as Teams does (signed with the fake's key set).
 *
 *   const w = await startTeamsWorld();
 *   const res = await w.send(w.message("hello", { from: ADA }));
 *   await stopTeamsWorld(w);
 */
export const AAD_TENANT = "aad-tenant-1";
export const ADA = "0a0a0a0a-0000-0000-0000-00000000ada0"; // mapped to user_ada (her API key's actor)
export const BOB = "0b0b0b0b-0000-0000-0000-00000000b0b0"; // no mapping: user_teams.<id>
export const ROOT = "0c0c0c0c-0000-0000-0000-0000000000ad"; // an admin
export const BOT = "28:bot-id";
/** How Teams names them (an activity's `from.name`): Arbor shows it where it names who answered. */
export const TEAMS_NAMES: Record<string, string> = {
  [ADA]: "Ada Lovelace",
  [BOB]: "Bob Builder",
  [ROOT]: "Root Admin",
};

export const guardedFetch = createGuardedFetch(outboundPolicy(LOOPBACK_ALLOWED));

export interface TeamsWorld {
  h: Harness;
  notify: LocalNotify;
  teams: FakeTeams;
  settings: TeamsSettings;
  app: Hono;
  send(activity: Record<string, unknown>, auth?: string | null | undefined): Promise<Response>;
  message(
    text: string,
    options?: { from?: string; conversation?: string; id?: string },
  ): Record<string, unknown>;
  invoke(data: Record<string, unknown>, options?: { from?: string; verb?: string }): Record<string, unknown>;
  /** Everything the local Arbor holds: objects and event streams (nothing written: the same). */
  written(): Promise<number>;
}

let activityCount = 0;

export async function startTeamsWorld(
  options: {
    script?: ScriptFunction;
    assistants?: AssistantDefinition[];
    /** What the engine's outbound guard lets through (a shared file downloaded from a local server). */
    outbound?: OutboundSettings;
  } = {},
): Promise<TeamsWorld> {
  const h = await Harness.create({
    script: options.script ?? inviteByEmail,
    assistants: options.assistants ?? MAILER,
    settings: { electionThreshold: -1 },
    ...(options.outbound ? { outbound: options.outbound } : {}),
  });
  const clock = () => new Date(h.now);
  const teams = await startFakeTeams({ clock });
  const settings = teams.settings({
    tenants: {
      [AAD_TENANT]: { tenant: "acme", users: { [ADA]: "user_ada" }, admins: [ROOT], defaultRoles: [] },
    },
  });
  const chat: ChatSettings = { teams: settings };
  // The local notify path with the Teams surface: progress, questions and answers go to the fake Bot Connector.
  const notify = startLocalNotify(h.engine, {
    notify: { allowLoopbackHttp: true },
    worker: { tickMs: 60_000 },
    surfaces: { teams: teamsSurface(async () => chat, { fetch: guardedFetch, clock }) },
  });
  const app = teamsRoutes({
    engine: h.engine,
    notify: notify.service,
    settings: async () => chat,
    clock,
    fetch: guardedFetch,
  });
  const base = (from: string, conversation: string) => ({
    channelId: "msteams",
    serviceUrl: teams.serviceUrl,
    from: { id: `29:${from}`, aadObjectId: from, name: TEAMS_NAMES[from] ?? "Someone" },
    recipient: { id: BOT, name: "Arbor" },
    conversation: { id: conversation, tenantId: AAD_TENANT, conversationType: "personal" },
    channelData: { tenant: { id: AAD_TENANT } },
  });
  const world: TeamsWorld = {
    h,
    notify,
    teams,
    settings,
    app,
    async send(activity, auth) {
      const header =
        auth === null
          ? undefined
          : (auth ?? `Bearer ${await teams.activityToken(String(activity.serviceUrl))}`);
      return app.request("/teams/messages", {
        method: "POST",
        headers: { "content-type": "application/json", ...(header ? { authorization: header } : {}) },
        body: JSON.stringify(activity),
      });
    },
    message: (text, options = {}) => ({
      type: "message",
      id: options.id ?? `msg-${++activityCount}`,
      text: `<at>Arbor</at> ${text}`,
      ...base(options.from ?? ADA, options.conversation ?? "a:personal-chat-ada"),
    }),
    invoke: (data, options = {}) => ({
      type: "invoke",
      name: "adaptiveCard/action",
      id: `inv-${++activityCount}`,
      value: {
        action: { type: "Action.Execute", verb: options.verb ?? "arbor.answer", data },
        trigger: "manual",
      },
      ...base(options.from ?? ADA, "a:personal-chat-ada"),
    }),
    async written() {
      let objects = 0;
      let cursor: string | undefined;
      do {
        const page = await h.rt.objects.list("", cursor ? { cursor } : {});
        objects += page.keys.length;
        cursor = page.cursor;
      } while (cursor);
      const streams = await h.rt.state.listStreams();
      return objects + streams.items.length;
    },
  };
  return world;
}

export async function stopTeamsWorld(w: Partial<TeamsWorld> | undefined): Promise<void> {
  await w?.notify?.stop();
  await w?.teams?.close();
  await w?.h?.close();
}
