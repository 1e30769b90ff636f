import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { slackSurface } from "../../shared/channels/chat/slack/surface.ts";
import { serviceUrlAllowed } from "../../shared/channels/chat/teams/activity.ts";
import { teamsSurface } from "../../shared/channels/chat/teams/surface.ts";
import { ChatSendError, type SlackThread, type TeamsThread } from "../../shared/notify/chat/types.ts";
import { createGuardedFetch } from "../../shared/outbound/guard.ts";
import { outboundPolicy } from "../../shared/outbound/policy.ts";
import { type FakeSlack, startFakeSlack } from "../peers/fake-slack.ts";
import { type FakeTeams, startFakeTeams } from "../peers/fake-teams.ts";
import { LOOPBACK_ALLOWED } from "./tool-world.ts";

/**
 * The surfaces as a hostile or broken platform meets them: a message deleted under an update (the
 * ChatSendError says `gone`, so the sync posts it anew), a service URL dressed up to look like the
 * allowed one, a Bot Connector that redirects or answers with 10 MB.
 */
const TOKEN = "xoxb-attack-0001";
const context = {
  rootTaskUrn: "cld:common.Tenant.acme/plan.Task.r",
  conversationUrn: "cld:common.Tenant.acme/common.Conversation.c",
};
const render = { text: "hello", payload: { blocks: [] } };

let slack: FakeSlack;
let teams: FakeTeams;
let rogue: Server;
let rogueUrl: string;
beforeAll(async () => {
  slack = await startFakeSlack({ tokens: { [TOKEN]: "T1" } });
  teams = await startFakeTeams();
  // A "Bot Connector" that redirects a post elsewhere, or answers with 10 MB.
  rogue = createServer((req, res) => {
    req.resume();
    if (req.url?.includes("hang")) return; // never answers
    if (req.url?.includes("trickle")) {
      // Answers at once, then a byte now and then, forever.
      res.writeHead(201, { "content-type": "application/json" });
      const timer = setInterval(() => res.write(" "), 200);
      res.on("close", () => clearInterval(timer));
      return;
    }
    if (req.url?.includes("redirect"))
      res.writeHead(307, { location: `${teams.serviceUrl}v3/conversations/x/activities` }).end();
    else {
      res.writeHead(200, { "content-type": "application/json" });
      const chunk = Buffer.alloc(1024 * 1024, 0x20);
      for (let i = 0; i < 10; i++) res.write(chunk);
      res.end('{"id":"huge"}');
    }
  });
  await new Promise<void>((r) => rogue.listen(0, "127.0.0.1", r));
  rogueUrl = `http://127.0.0.1:${(rogue.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await slack.close();
  await teams.close();
  rogue.closeAllConnections();
  await new Promise<void>((r) => rogue.close(() => r()));
});

describe("an update of a message someone deleted", () => {
  it("Slack: chat.update's message_not_found is a ChatSendError that says gone (other refusals do not)", async () => {
    const surface = slackSurface(async () => ({
      slack: {
        signingSecret: "s",
        apiUrl: slack.apiUrl,
        workspaces: { T1: { tenant: "acme", botToken: TOKEN, users: {}, admins: [], defaultRoles: [] } },
      },
    }));
    const thread: SlackThread = {
      kind: "slack",
      id: "s1",
      tenant: "acme",
      team: "T1",
      channel: "C1",
      threadTs: "1.1",
    };
    const error = await surface.update(thread, "1700.000404", render, context).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ChatSendError);
    expect(error).toMatchObject({ retryable: false, gone: true });
    slack.fail("chat.update", { error: "channel_not_found" });
    const other = await surface.update(thread, "1700.000404", render, context).catch((e: unknown) => e);
    expect(other).toMatchObject({ retryable: false, gone: false });
  });

  it("Teams: a 404 on the activity's replacement says gone; a 404 on a post does not", async () => {
    const surface = teamsSurface(
      async () => ({
        teams: teams.settings({
          tenants: { t: { tenant: "acme", users: {}, admins: [], defaultRoles: [] } },
        }),
      }),
      { fetch: createGuardedFetch(outboundPolicy(LOOPBACK_ALLOWED)) },
    );
    const thread: TeamsThread = {
      kind: "teams",
      id: "teams_x",
      tenant: "acme",
      serviceUrl: teams.serviceUrl,
      conversationId: "19:abc@thread.tacv2",
      aadTenantId: "t",
    };
    const teamsRender = { text: "hello", payload: { attachments: [] } };
    teams.plan.push(404);
    await expect(surface.update(thread, "act-1", teamsRender, context)).rejects.toMatchObject({ gone: true });
    teams.plan.push(404);
    await expect(surface.post(thread, teamsRender, context)).rejects.toMatchObject({
      gone: false,
      retryable: false,
    });
  });
});

describe("a Teams service URL dressed up as the allowed one", () => {
  const allowed = ["https://smba.trafficmanager.net/amer/"];
  it.each([
    ["a look-alike host", "https://smba.trafficmanager.net.evil.example/amer/"],
    ["credentials", "https://user:pass@smba.trafficmanager.net/amer/"],
    ["only a user", "https://evil@smba.trafficmanager.net/amer/"],
    ["another port", "https://smba.trafficmanager.net:8443/amer/"],
    ["http", "http://smba.trafficmanager.net/amer/"],
    ["a sibling path", "https://smba.trafficmanager.net/amer-evil/"],
    ["a path that climbs out", "https://smba.trafficmanager.net/amer/../emea/"],
    ["an encoded climb", "https://smba.trafficmanager.net/amer/%2e%2e/emea/"],
    ["a query", "https://smba.trafficmanager.net/amer/?x=https://evil.example/"],
    ["a fragment", "https://smba.trafficmanager.net/amer/#x"],
    ["a backslash host trick", "https://evil.example\\@smba.trafficmanager.net/amer/"],
    ["not a URL", "smba.trafficmanager.net/amer/"],
  ])("%s is refused", (_what, url) => {
    expect(serviceUrlAllowed(url, allowed)).toBe(false);
  });
  it.each([
    ["the URL itself", "https://smba.trafficmanager.net/amer/"],
    ["without its trailing slash", "https://smba.trafficmanager.net/amer"],
    ["an uppercase host (the same host)", "https://SMBA.TrafficManager.net/amer/"],
    ["the default port spelled out", "https://smba.trafficmanager.net:443/amer/"],
  ])("%s is allowed", (_what, url) => {
    expect(serviceUrlAllowed(url, allowed)).toBe(true);
  });
});

describe("a Bot Connector that misbehaves", () => {
  const surfaceTo = (serviceUrl: string) =>
    teamsSurface(
      async () => ({
        teams: teams.settings({
          allowedServiceUrls: [serviceUrl],
          tenants: { t: { tenant: "acme", users: {}, admins: [], defaultRoles: [] } },
        }),
      }),
      { fetch: createGuardedFetch(outboundPolicy(LOOPBACK_ALLOWED)), timeoutMs: 1_000 },
    );
  const threadAt = (serviceUrl: string): TeamsThread => ({
    kind: "teams",
    id: "teams_rogue",
    tenant: "acme",
    serviceUrl,
    conversationId: "19:abc@thread.tacv2",
    aadTenantId: "t",
  });

  it("a redirect is not followed (the post goes to the allowed URL only): a failure, nothing sent on", async () => {
    const serviceUrl = `${rogueUrl}/redirect/`;
    const before = teams.activities.length;
    const error = await surfaceTo(serviceUrl)
      .post(threadAt(serviceUrl), { text: "x", payload: { attachments: [] } }, context)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ChatSendError);
    expect(teams.activities.length).toBe(before);
  });

  for (const [what, path] of [
    ["that never answers", "hang"],
    ["that answers at once and then trickles its body forever", "trickle"],
  ])
    it(`one ${what}: a retryable failure once the call's time is up, not a sync held forever`, async () => {
      const serviceUrl = `${rogueUrl}/${path}/`;
      const error = await surfaceTo(serviceUrl)
        .post(threadAt(serviceUrl), { text: "x", payload: { attachments: [] } }, context)
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ChatSendError);
      expect(error).toMatchObject({ retryable: true });
    });

  it("an answer of 10 MB is not read whole: a failure the sync can retry, not a crash", async () => {
    const serviceUrl = `${rogueUrl}/huge/`;
    const error = await surfaceTo(serviceUrl)
      .post(threadAt(serviceUrl), { text: "x", payload: { attachments: [] } }, context)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ChatSendError);
  });
});
