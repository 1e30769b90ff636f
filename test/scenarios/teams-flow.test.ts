import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PERSON } from "./engine-harness.ts";
import { until } from "./notify-fixture.ts";
import { ADA, BOB, startTeamsWorld, stopTeamsWorld, type TeamsWorld } from "./teams-world.ts";

/**
 * The whole way round in Teams, through the local notify path and the Teams surface to the fake
 * Bot Connector: a message is acknowledged at once, a progress card is posted and replaced as the
 * tasks move, the risky call's question card comes; a click by someone the policy refuses answers
 * nothing, the starter's click answers it (the invoke's response is the card showing who answered
 * what), the work resumes, the question card is replaced to show the answer and the answer is
 * posted. A follow-up continues the conversation; `watch` follows a request made over the API.
 */
type Card = { body?: unknown[]; actions?: { verb?: string; data?: Record<string, unknown> }[] };

let w: TeamsWorld;
beforeAll(async () => {
  w = await startTeamsWorld();
});
afterAll(() => stopTeamsWorld(w));

const cardOf = (body: Record<string, unknown>): Card =>
  ((body.attachments as { content: Card }[] | undefined)?.[0]?.content ?? {}) as Card;
const shows = (body: Record<string, unknown>, text: string) => JSON.stringify(cardOf(body)).includes(text);
const inChat = (conversationId: string) =>
  w.teams.activities.filter((a) => a.conversationId === conversationId);

describe("a request in Teams", () => {
  const chat = "a:ada-flow-chat";
  let questionId = "";
  let interaction = "";

  it("acknowledges the message at once, then shows progress and the risky call's question", async () => {
    const res = await w.send(w.message("Invite the team", { conversation: chat }));
    expect(res.status).toBe(202);
    await until("a question card with buttons", () =>
      inChat(chat).some(
        (a) => a.method === "POST" && cardOf(a.body).actions?.some((x) => x.verb === "arbor.answer"),
      ),
    );
    const posts = inChat(chat).filter((a) => a.method === "POST");
    // First the progress card (the request's tree), then the question.
    expect(shows(posts[0]?.body ?? {}, "Invite")).toBe(true);
    const question = posts.find((a) => cardOf(a.body).actions?.some((x) => x.verb === "arbor.answer"));
    expect(shows(question?.body ?? {}, "send_email")).toBe(true);
    expect(shows(question?.body ?? {}, "team@example.com")).toBe(true); // the exact arguments
    interaction = String(cardOf(question?.body ?? {}).actions?.[0]?.data?.interaction);
    questionId = `act-${w.teams.activities.indexOf(question as (typeof w.teams.activities)[number]) + 1}`;
    // The progress card was replaced as the tasks moved (never posted twice).
    expect(
      inChat(chat).filter((a) => a.method === "PUT" && a.activityId !== questionId).length,
    ).toBeGreaterThan(0);
    expect(
      posts.filter((a) => shows(a.body, "Waiting for an answer") || shows(a.body, "Working")).length,
    ).toBe(1);
  });

  it("refuses a click by someone the policy does not let answer, and answers nothing", async () => {
    const res = await w.send(w.invoke({ interaction, option: "approve" }, { from: BOB }));
    expect(await res.json()).toMatchObject({ statusCode: 403, type: "application/vnd.microsoft.error" });
    expect((await w.h.engine.deps.resources.getAs("uip.Interaction", interaction))?.status).toBe("pending");
  });

  it("takes the starter's click: the card shows who answered, the work resumes and the answer is posted", async () => {
    const res = await w.send(w.invoke({ interaction, option: "approve" }, { from: ADA }));
    const body = (await res.json()) as { statusCode: number; type: string; value: Card };
    expect(body).toMatchObject({ statusCode: 200, type: "application/vnd.microsoft.card.adaptive" });
    expect(JSON.stringify(body.value)).toContain("Answered by **Ada Lovelace**: Allow");
    expect(body.value.actions).toBeUndefined();
    await until("the answer is posted", () =>
      inChat(chat).some((a) => a.method === "POST" && shows(a.body, '"text":"invited"')),
    );
    // The question's card was replaced to show the answer, for everyone in the chat.
    const replaced = inChat(chat).filter((a) => a.method === "PUT" && a.activityId === questionId);
    expect(replaced.some((a) => shows(a.body, "Answered by **Ada Lovelace**"))).toBe(true);
    // And the progress card says the request is done.
    await until("progress shows done", () =>
      inChat(chat).some((a) => a.method === "PUT" && shows(a.body, "**Done**")),
    );
  });

  it("continues the conversation with a follow-up in the same chat", async () => {
    const before = inChat(chat).filter((a) => a.method === "POST").length;
    const res = await w.send(w.message("Now the interns", { conversation: chat }));
    expect(res.status).toBe(202);
    await until(
      "a progress card for the follow-up",
      () => inChat(chat).filter((a) => a.method === "POST").length > before,
    );
    const conversations = await w.h.engine.deps.resources.childUrns(
      "cld:common.Tenant.acme",
      "common.Conversation",
    );
    expect(conversations).toHaveLength(1);
  });

  it("follows a request made over the HTTP API after `watch`", async () => {
    const started = await w.h.engine.submit({ tenant: "acme", text: "Invite the board", actor: PERSON });
    const res = await w.send(w.message(`watch ${started.rootTaskId}`, { conversation: "a:ada-watch-chat" }));
    expect(res.status).toBe(202);
    await until("its question card arrives in the watching chat", () =>
      inChat("a:ada-watch-chat").some((a) => cardOf(a.body).actions?.some((x) => x.verb === "arbor.answer")),
    );
  });
});
