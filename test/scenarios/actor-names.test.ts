import type { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import { questionBlocks } from "../../shared/channels/chat/slack/blocks.ts";
import { personOf as slackPerson } from "../../shared/channels/chat/slack/identity.ts";
import { questionCard, threadQuestion } from "../../shared/channels/chat/teams/cards.ts";
import { personOf as teamsPerson } from "../../shared/channels/chat/teams/invoke.ts";
import { createServerApp } from "../../shared/channels/http/http-server.ts";
import { ActorSchema, withCapabilities } from "../../shared/domain/events.ts";
import type { InteractionResource } from "../../shared/domain/resources.ts";
import type { ThreadQuestion, ThreadSnapshot } from "../../shared/notify/chat/types.ts";
import { ApiKeySchema } from "../../shared/ports/key-store.ts";
import { Harness } from "./engine-harness.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * People are named where people read them (their key's name, the chat settings', Teams's own),
 * and stay who they are by id: an answer carries its answerer's name, and their capabilities (the
 * roles whoever vouched for them gave), to the threads, the console and the event log.
 */
const BASE = "https://arbor.example";
const ada = newApiKey({
  id: "user_ada",
  kind: "human",
  tenant: "acme",
  roles: ["admin", "approver"],
  name: "Ada <Lovelace>",
});
const bob = newApiKey({ id: "user_bob", kind: "human", tenant: "acme", roles: [] });

let h: Harness;
let app: Hono;

beforeAll(async () => {
  h = await Harness.create({
    script: (r) => {
      if (isPlan(r)) return planOf({ name: "Answer", purpose: "Answer the question" });
      if (isEvaluation(r)) return pass();
      return { content: "answered" };
    },
    assistants: GENERALIST,
    settings: { electionThreshold: -1 },
  });
  app = createServerApp({
    engine: h.engine,
    keys: new ApiKeys({ keys: [ada.entry, bob.entry] }),
    publicUrl: BASE,
  });
});
afterAll(() => h.close());

/** The thread a Slack question is posted in (what its blocks read of it). */
const snapshotOf = (q: ThreadQuestion): ThreadSnapshot => ({
  rootTaskUrn: "cld:common.Tenant.acme/common.Conversation.c/common.Message.m/plan.Task.t",
  conversationUrn: "cld:common.Tenant.acme/common.Conversation.c",
  title: "Where is the offsite?",
  state: "working",
  tasks: [],
  taskCount: 1,
  truncated: false,
  questions: [q],
  at: new Date(0).toISOString(),
});

const call = (path: string, init: RequestInit = {}) => app.fetch(new Request(`${BASE}${path}`, init));
const as = (key: string, body?: unknown): RequestInit => ({
  method: body === undefined ? "GET" : "POST",
  headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
  ...(body === undefined ? {} : { body: JSON.stringify(body) }),
});

describe("an actor's name", () => {
  it("goes with an answer given with a named key: to the question, the event log, the threads and the console", async () => {
    const sent = await call("/v1/messages", as(ada.key, { text: "Where is the offsite?", mode: "lazy" }));
    expect(sent.status).toBe(202);
    const { rootTaskId } = (await sent.json()) as { rootTaskId: string };
    await h.idle();
    const [question] = await h.pending(rootTaskId);
    const urn = question?.meta.id as string;
    const answered = await call(
      `/v1/interactions/${encodeURIComponent(urn)}/answer`,
      as(ada.key, { selectedOptionId: "approve" }),
    );
    expect(answered.status).toBe(204);
    await h.idle();

    const stored = (await h.rt.resources.getAs("uip.Interaction", urn)) as InteractionResource;
    expect(stored.response).toMatchObject({
      actor: "user_ada",
      actorName: "Ada <Lovelace>",
      actorCapabilities: ["admin", "approver"],
    });
    const responded = (await h.rt.state.readStream(rootTaskId)).find(
      (e) => e.type === "UserInteractionResponded",
    );
    expect(responded?.actor).toEqual({
      id: "user_ada",
      kind: "human",
      name: "Ada <Lovelace>",
      capabilities: ["admin", "approver"],
    });

    // A Teams and a Slack thread name the answerer and their capabilities; the id stays the one the policy knows.
    const q = threadQuestion(stored);
    expect(q.answered).toMatchObject({
      by: "user_ada",
      byName: "Ada <Lovelace>",
      byCapabilities: ["admin", "approver"],
    });
    expect(JSON.stringify(questionCard(q))).toContain("Answered by **Ada <Lovelace>** (admin, approver)");
    expect(JSON.stringify(questionBlocks(q, snapshotOf(q)).payload)).toContain(
      "*Ada &lt;Lovelace&gt;* (admin, approver) answered",
    );

    // The console: the answer, and the request in the admin's list, named and escaped.
    const login = await call("/console/login", {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ key: ada.key, next: "/console" }).toString(),
    });
    const cookie = (login.headers.get("set-cookie") ?? "").split(";")[0] as string;
    const page = await (
      await call(`/console/questions/${encodeURIComponent(urn)}`, { headers: { cookie } })
    ).text();
    expect(page).toContain("Answered by <strong>Ada &lt;Lovelace&gt; (user_ada) · admin, approver</strong>");
    expect(page).not.toContain("Ada <Lovelace>");
    const requests = await (await call("/console?scope=all", { headers: { cookie } })).text();
    expect(requests).toContain("Ada &lt;Lovelace&gt; (user_ada) · admin, approver");
    // The task's event log names who did each step, with what they could do then.
    const log = await (
      await call(`/console/tasks/${encodeURIComponent(rootTaskId)}`, { headers: { cookie } })
    ).text();
    expect(log).toContain("Ada &lt;Lovelace&gt; (user_ada) · admin, approver");
  });

  it("is the key's own: listed by the admin routes, and a key without one is named by its id", async () => {
    const listed = await call("/v1/admin/keys", as(ada.key));
    const { keys } = (await listed.json()) as { keys: { id: string; name?: string }[] };
    expect(keys.find((k) => k.id === "user_ada")?.name).toBe("Ada <Lovelace>");
    expect(keys.find((k) => k.id === "user_bob")).not.toHaveProperty("name");
    const made = await call("/v1/admin/keys", as(ada.key, { id: "user_cy", name: "  Cy Young  " }));
    expect(made.status).toBe(201);
    expect(await made.json()).toMatchObject({ id: "user_cy", name: "Cy Young" });
    const bad = await call("/v1/admin/keys", as(ada.key, { id: "user_dee", name: "Dee\u0007" }));
    expect(bad.status).toBe(400);
  });

  it("comes from the chat settings, else from Teams, and never holds control characters", () => {
    const ws = {
      tenant: "acme",
      botToken: "xoxb-0000000000",
      users: { U1: "user_ada" },
      names: { user_ada: "Ada Lovelace", U2: "Ben" },
      admins: [],
      defaultRoles: [],
    };
    expect(slackPerson("T1", "U1", ws).actor).toEqual({
      id: "user_ada",
      kind: "human",
      name: "Ada Lovelace",
    });
    expect(slackPerson("T1", "U2", ws).actor).toEqual({ id: "user_slack.T1.U2", kind: "human", name: "Ben" });
    expect(slackPerson("T1", "U3", ws).actor).toEqual({ id: "user_slack.T1.U3", kind: "human" });
    // Capabilities are the roles the settings give: an admin's, and every person's default ones.
    const roled = { ...ws, admins: ["U1"], defaultRoles: ["member"] };
    expect(slackPerson("T1", "U1", roled).actor.capabilities).toEqual(["member", "admin"]);
    expect(slackPerson("T1", "U3", roled).actor.capabilities).toEqual(["member"]);
    const tenant = {
      tenant: "acme",
      users: {},
      names: { "0a0a": "Settled Name" },
      admins: [],
      defaultRoles: [],
    };
    expect(teamsPerson(tenant, "0a0a", "Teams Name")?.actor.name).toBe("Settled Name");
    expect(teamsPerson(tenant, "0b0b", "Teams Name")?.actor.name).toBe("Teams Name");
    expect(teamsPerson(tenant, "0b0b", "Bad\u0000Name")?.actor).not.toHaveProperty("name");
    expect(teamsPerson({ ...tenant, admins: ["0a0a"] }, "0a0a", "x")?.actor.capabilities).toEqual(["admin"]);
    // A role that cannot be shown (a control character) is left out, the actor kept.
    expect(withCapabilities({ id: "user_x", kind: "human" }, ["ok", "b\u0007ad", "ok"])).toEqual({
      id: "user_x",
      kind: "human",
      capabilities: ["ok"],
    });
    expect(ActorSchema.safeParse({ id: "user_x", kind: "human", capabilities: ["a\nb"] }).success).toBe(
      false,
    );
    for (const name of ["", " ", "a\nb", "x".repeat(201)]) {
      expect(ActorSchema.safeParse({ id: "user_x", kind: "human", name }).success).toBe(false);
      expect(ApiKeySchema.safeParse({ ...ada.entry, name }).success).toBe(false);
    }
  });
});
