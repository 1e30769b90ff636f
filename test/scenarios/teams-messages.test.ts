import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { teamsConversationName } from "../../shared/channels/chat/teams/activity.ts";
import { rootTaskUrn } from "../../shared/engine/steps/planner.ts";
import type { TeamsThread } from "../../shared/notify/chat/types.ts";
import { PERSON } from "./engine-harness.ts";
import { until } from "./notify-fixture.ts";
import { AAD_TENANT, BOB, startTeamsWorld, stopTeamsWorld, type TeamsWorld } from "./teams-world.ts";

/**
 * Messages to the bot: submitted as the person, once per activity (Teams retries), one Arbor
 * conversation per Teams conversation (a follow-up continues it), the conversation subscribed on
 * the notify path; `watch <task URN>` follows a request started elsewhere, for whoever may read it.
 */
let w: TeamsWorld;
beforeAll(async () => {
  w = await startTeamsWorld();
});
afterAll(() => stopTeamsWorld(w));

const chat = "a:personal-chat-ada";
const conversationUrn = `cld:common.Tenant.acme/common.Conversation.${teamsConversationName(AAD_TENANT, chat)}`;
const messages = async () =>
  (await w.h.engine.deps.resources.children(conversationUrn, "common.Message")).filter(
    (m) => (m as { role?: string }).role === "user",
  ) as { meta: { id: string }; content: string }[];
const threads = async (root: string) =>
  (await w.notify.service.subscriptions(root)).map((s) => s.data.subscription as TeamsThread);

describe("Teams messages", () => {
  it("submits a message as the person and subscribes the conversation, answering 202 at once", async () => {
    const res = await w.send(w.message("Invite the team", { conversation: chat, id: "m-1" }));
    expect(res.status).toBe(202);
    const conversation = await w.h.engine.deps.resources.getAs("common.Conversation", conversationUrn);
    expect(conversation?.startedBy).toBe("user_ada"); // her Entra account maps to her Arbor actor
    const sent = await messages();
    expect(sent.map((m) => m.content)).toEqual(["Invite the team"]); // the bot's mention cut
    const [thread] = await threads(rootTaskUrn(sent[0]?.meta.id ?? ""));
    expect(thread).toMatchObject({
      kind: "teams",
      tenant: "acme",
      serviceUrl: w.teams.serviceUrl,
      conversationId: chat,
      aadTenantId: AAD_TENANT,
    });
  });

  it("takes a retried activity once", async () => {
    await w.h.idle();
    const before = await w.written();
    const res = await w.send(w.message("Invite the team", { conversation: chat, id: "m-1" }));
    expect(res.status).toBe(202);
    expect(await messages()).toHaveLength(1);
    expect(await w.written()).toBe(before);
  });

  it("continues the conversation with a follow-up in the same chat", async () => {
    const res = await w.send(w.message("And the interns too", { conversation: chat, id: "m-2" }));
    expect(res.status).toBe(202);
    const sent = await messages();
    expect(sent.map((m) => m.content).sort()).toEqual(["And the interns too", "Invite the team"]);
    expect(
      await threads(rootTaskUrn(sent.find((m) => m.content.startsWith("And"))?.meta.id ?? "")),
    ).toHaveLength(1);
  });

  it("watches a request started over the API, for the person who started it", async () => {
    const started = await w.h.engine.submit({ tenant: "acme", text: "Invite the board", actor: PERSON });
    const res = await w.send(w.message(`watch ${started.rootTaskId}`, { conversation: "a:ada-second-chat" }));
    expect(res.status).toBe(202);
    expect((await threads(started.rootTaskId)).map((t) => t.conversationId)).toEqual(["a:ada-second-chat"]);
  });

  it("refuses to watch a request for someone who may not read it, and tells them", async () => {
    const started = await w.h.engine.submit({ tenant: "acme", text: "Invite the auditors", actor: PERSON });
    const res = await w.send(
      w.message(`watch ${started.rootTaskId}`, { from: BOB, conversation: "a:bob-chat" }),
    );
    expect(res.status).toBe(202);
    expect(await threads(started.rootTaskId)).toEqual([]);
    await until("the refusal is posted in Bob's chat", () =>
      w.teams.activities.some((a) => a.conversationId === "a:bob-chat"),
    );
    const reply = w.teams.activities.find((a) => a.conversationId === "a:bob-chat");
    expect(reply?.body.text).toMatch(/There is no request .* you may follow/);
  });

  it("tells someone who follows up in another person's conversation why it is refused, and writes nothing", async () => {
    const group = "19:group-chat@thread.v2";
    expect((await w.send(w.message("Plan the offsite", { conversation: group }))).status).toBe(202);
    await w.h.idle();
    const before = await w.written();
    const res = await w.send(w.message("Make it a week", { from: BOB, conversation: group }));
    expect(res.status).toBe(200);
    expect(await w.written()).toBe(before);
    await until("the refusal is posted in the group chat", () =>
      w.teams.activities.some((a) => a.conversationId === group),
    );
    const reply = w.teams.activities.find(
      (a) => a.conversationId === group && /someone else/.test(String(a.body.text)),
    );
    expect(reply?.body.text).toMatch(/started by someone else/);
  });

  it("says hello when it is added to a conversation", async () => {
    const added = {
      ...w.message(""),
      type: "conversationUpdate",
      conversation: { id: "19:team-general@thread.tacv2", tenantId: AAD_TENANT, conversationType: "channel" },
      membersAdded: [{ id: "28:bot-id" }],
    };
    expect((await w.send(added)).status).toBe(200);
    const hello = w.teams.activities.find((a) => a.conversationId === "19:team-general@thread.tacv2");
    expect(hello?.body.text).toMatch(/^Hi, I'm Arbor/);
  });

  it("ignores a message without text, and one that is not from a person", async () => {
    const before = await w.written();
    expect((await w.send(w.message(""))).status).toBe(200);
    const fromBot = { ...w.message("hello"), from: { id: "28:another-bot" } };
    expect((await w.send(fromBot)).status).toBe(200);
    expect(await w.written()).toBe(before);
  });
});
