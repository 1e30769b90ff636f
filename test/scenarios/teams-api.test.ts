import type { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiKeys } from "../../shared/adapters/local/api-keys.ts";
import { createServerApp } from "../../shared/channels/http/http-server.ts";
import { acme } from "./http-fixture.ts";
import { until } from "./notify-fixture.ts";
import { ADA, startTeamsWorld, stopTeamsWorld, type TeamsWorld } from "./teams-world.ts";

/**
 * One person on two channels: Ada's Entra account maps to `user_ada`, the actor of her API key.
 * What she starts in Teams she sees and answers over the HTTP API (and Teams shows who answered);
 * what she starts over the HTTP API she follows in Teams with `watch` and answers with the card.
 * The Teams routes are mounted on the one app as `arbor serve` mounts them (createServerApp's chat).
 */
type Card = { actions?: { verb?: string; data?: Record<string, unknown> }[] };

let w: TeamsWorld;
let server: Hono;
beforeAll(async () => {
  w = await startTeamsWorld();
  server = createServerApp({
    engine: w.h.engine,
    keys: new ApiKeys({ keys: [acme.entry] }),
    notify: w.notify.service,
    publicUrl: "http://127.0.0.1:1",
    chat: w.app,
  });
});
afterAll(() => stopTeamsWorld(w));

const api = (path: string, init: RequestInit = {}) =>
  server.request(path, {
    ...init,
    headers: { authorization: `Bearer ${acme.key}`, "content-type": "application/json", ...init.headers },
  });
const cardOf = (body: Record<string, unknown>): Card =>
  ((body.attachments as { content: Card }[] | undefined)?.[0]?.content ?? {}) as Card;
const inChat = (id: string) => w.teams.activities.filter((a) => a.conversationId === id);
const questionIn = (id: string) =>
  inChat(id).find(
    (a) => a.method === "POST" && cardOf(a.body).actions?.some((x) => x.verb === "arbor.answer"),
  );
const teamsMessage = async (text: string, conversation: string) => {
  const res = await server.request("/teams/messages", {
    method: "POST",
    headers: {
      "content-type": "application/json",
      authorization: `Bearer ${await w.teams.activityToken(w.teams.serviceUrl)}`,
    },
    body: JSON.stringify(w.message(text, { conversation })),
  });
  expect(res.status).toBe(202);
};

describe("Teams and the HTTP API, one person", () => {
  it("answers over the HTTP API a question of a request started in Teams; Teams shows who answered", async () => {
    const chat = "a:ada-api-1";
    await teamsMessage("Invite the team", chat);
    await until("the question card in Teams", () => questionIn(chat) !== undefined);
    const urn = String(cardOf(questionIn(chat)?.body ?? {}).actions?.[0]?.data?.interaction);
    const taskId = urn.slice(0, urn.indexOf("/uip.Interaction."));
    // She sees it over the API with her key...
    const listed = await api(`/v1/tasks/${encodeURIComponent(taskId)}/interactions`);
    expect(listed.status).toBe(200);
    expect(JSON.stringify(await listed.json())).toContain(urn);
    // ...and answers it there.
    const answered = await api(`/v1/interactions/${encodeURIComponent(urn)}/answer`, {
      method: "POST",
      body: JSON.stringify({ selectedOptionId: "approve" }),
    });
    expect(answered.status).toBe(204);
    const questionActivity = `act-${w.teams.activities.indexOf(questionIn(chat) as (typeof w.teams.activities)[number]) + 1}`;
    await until("the Teams card shows who answered", () =>
      inChat(chat).some(
        (a) =>
          a.method === "PUT" &&
          a.activityId === questionActivity &&
          JSON.stringify(a.body).includes("user_ada"),
      ),
    );
  });

  it("follows in Teams a request started over the HTTP API, and answers it with the card", async () => {
    const res = await api("/v1/messages", {
      method: "POST",
      body: JSON.stringify({ text: "Invite the board" }),
    });
    expect(res.status).toBe(202);
    const { rootTaskId } = (await res.json()) as { rootTaskId: string };
    const chat = "a:ada-api-2";
    await teamsMessage(`watch ${rootTaskId}`, chat);
    await until("the question card in Teams", () => questionIn(chat) !== undefined);
    const data = cardOf(questionIn(chat)?.body ?? {}).actions?.[0]?.data ?? {};
    const click = await w.send(w.invoke(data, { from: ADA }));
    expect(JSON.stringify(await click.json())).toContain("Answered by **Ada Lovelace**");
    await until("the request completes", async () => {
      const task = await api(`/v1/tasks/${encodeURIComponent(rootTaskId)}`);
      return ((await task.json()) as { task?: { status?: string } }).task?.status === "done";
    });
  });
});
