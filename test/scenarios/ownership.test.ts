import { TaskState } from "@a2a-js/sdk";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import type { RunningServer } from "../../shared/channels/http/http-server.ts";
import type { Conversation } from "../../shared/domain/resources.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import { readAllEvents } from "../../shared/ports/state-store.ts";
import { fetchApi } from "../support/http.ts";
import { untilRead } from "../support/until.ts";
import {
  a2aClient,
  a2aScript,
  conversationOf,
  list,
  partsText,
  rootOf,
  send,
  TEAM,
  userMessage,
} from "./a2a-fixtures.ts";
import { Harness } from "./engine-harness.ts";
import { serveHttp } from "./http-fixture.ts";

/**
 * Who owns what inside one tenant, over the real HTTP API and A2A endpoint (one server, as `arbor
 * serve` runs them): a person acts on the conversations they started, a person with the admin role
 * on anything of the tenant, a remote agent on what it started; every other key of the tenant is
 * refused (403 naming the policy decision; A2A: a permission error, or a task it cannot see) and
 * nothing is written.
 */
const ada = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: [] });
const bob = newApiKey({ id: "user_bob", kind: "human", tenant: "acme", roles: [] });
const root = newApiKey({ id: "user_root", kind: "human", tenant: "acme", roles: ["admin"] });
const partner = newApiKey({ id: "agent_partner", kind: "agent", tenant: "acme", roles: [] });
/** An agent key the operator gave the admin role: it still acts only on what it started. */
const bot = newApiKey({ id: "agent_bot", kind: "agent", tenant: "acme", roles: ["admin"] });

let h: Harness;
let server: RunningServer;
beforeAll(async () => {
  h = await Harness.create({ script: a2aScript(0), assistants: TEAM, settings: { electionThreshold: -1 } });
  const keys = new ApiKeys({ keys: [ada, bob, root, partner, bot].map((k) => k.entry) });
  server = await serveHttp({ engine: h.engine, keys });
});
afterAll(async () => {
  await server?.close();
  await h?.close();
});
afterEach(async () => {
  await h.idle();
});

const enc = encodeURIComponent;
interface Body {
  error?: { code: string; message: string };
  conversationUrn: string;
  rootTaskId: string;
  task: { status: string };
  interactions: { urn: string; links: { answer: string } }[];
}
const api = (method: string, path: string, key: string, body?: unknown) =>
  fetchApi<Body>(server.url, method, path, key, body);
const getTask = (key: string, urn: string) => api("GET", `/v1/tasks/${enc(urn)}`, key);
const interactionsOf = (key: string, urn: string) => api("GET", `/v1/tasks/${enc(urn)}/interactions`, key);
const cancel = (key: string, urn: string) => api("POST", `/v1/tasks/${enc(urn)}/cancel`, key, {});
const answer = (key: string, urn: string, selectedOptionId: string) =>
  api("POST", `/v1/interactions/${enc(urn)}/answer`, key, { selectedOptionId });
const post = (key: string, conversationUrn: string) =>
  api("POST", "/v1/messages", key, { text: "Let me in", conversationUrn });

/** A lazy request of `key`'s, waiting for its plan to be approved: something to read, answer, cancel. */
async function waitingRequest(key: string) {
  const submitted = (await api("POST", "/v1/messages", key, { text: "Plan the offsite", mode: "lazy" })).json;
  await untilRead(
    "the plan's approval",
    () => getTask(key, submitted.rootTaskId),
    (r) => r.json.task.status === "awaiting_user",
  );
  const [approval] = (await interactionsOf(key, submitted.rootTaskId)).json.interactions;
  if (!approval) throw new Error("no approval to answer");
  return { ...submitted, approval };
}

/** Everything stored under the tenant and every event: to prove a refusal wrote nothing. */
async function snapshot() {
  await h.idle();
  let events = 0;
  for await (const _ of readAllEvents(h.rt.state)) events++;
  return { resources: await h.rt.resources.descendantUrns(tenantUrn("acme")), events };
}

/** Each refusal a 403 that names its policy decision. */
function expectRefused(res: { status: number; json: Body }, who: string) {
  expect(res.status).toBe(403);
  expect(res.json.error?.code).toBe("FORBIDDEN");
  expect(res.json.error?.message).toMatch(new RegExp(`^${who} may not .*\\(policy decision dec_\\S+\\)`));
}

describe("over the HTTP API", () => {
  it("records who started a conversation, from the key (the request has no say)", async () => {
    const mine = (await api("POST", "/v1/messages", ada.key, { text: "Hello", title: "Mine" })).json;
    const conversation = (await h.rt.resources.get(mine.conversationUrn)) as Conversation;
    expect(conversation.startedBy).toBe("user_ada");
    const forged = await api("POST", "/v1/messages", bob.key, { text: "Hi", startedBy: "user_ada" });
    expect(forged.status).toBe(400);
  });

  it("another person without roles, and a remote agent, can neither read, post into, cancel nor answer a person's request; nothing is written", async () => {
    const req = await waitingRequest(ada.key);
    const view = (await getTask(ada.key, req.rootTaskId)).json;
    const before = await snapshot();
    for (const [key, who] of [
      [bob.key, "user_bob"],
      [partner.key, "agent_partner"],
      [bot.key, "agent_bot"],
    ] as const) {
      expectRefused(await getTask(key, req.rootTaskId), who);
      expectRefused(await interactionsOf(key, req.rootTaskId), who);
      expectRefused(await post(key, req.conversationUrn), who);
      expectRefused(await cancel(key, req.rootTaskId), who);
      expectRefused(await answer(key, req.approval.urn, "approve"), who);
    }
    // What does not exist in ada's conversation is refused alike to them (a 403 tells nothing of
    // what is there); ada and an admin learn that it is not there.
    const made = `${req.conversationUrn}/common.Message.m/plan.Task.none`;
    for (const [key, who] of [
      [bob.key, "user_bob"],
      [partner.key, "agent_partner"],
    ] as const) {
      expectRefused(await getTask(key, made), who);
      expectRefused(await answer(key, `${made}/uip.Interaction.none`, "approve"), who);
      // Nor does answering what is there but is no question (a task, the conversation) tell them more.
      expectRefused(await answer(key, req.rootTaskId, "approve"), who);
      expectRefused(await answer(key, req.conversationUrn, "approve"), who);
    }
    for (const key of [ada.key, root.key]) {
      expect((await getTask(key, made)).status).toBe(404);
      expect((await answer(key, `${made}/uip.Interaction.none`, "approve")).status).toBe(404);
      expect((await answer(key, req.rootTaskId, "approve")).status).toBe(404);
    }
    expect(await snapshot()).toEqual(before);
    // Ada's request is as it was, and still hers to answer.
    expect((await getTask(ada.key, req.rootTaskId)).json).toEqual(view);
    expect((await answer(ada.key, req.approval.urn, "approve")).status).toBe(204);
    await untilRead(
      "ada's request to end",
      () => getTask(ada.key, req.rootTaskId),
      (r) => r.json.task.status === "done",
    );
  });

  it("a person with the admin role reads, posts into, answers and cancels anyone's request of the tenant", async () => {
    const req = await waitingRequest(ada.key);
    expect((await getTask(root.key, req.rootTaskId)).status).toBe(200);
    expect((await interactionsOf(root.key, req.rootTaskId)).json.interactions).toHaveLength(1);
    expect((await answer(root.key, req.approval.urn, "approve")).status).toBe(204);
    await untilRead(
      "the approved request to end",
      () => getTask(root.key, req.rootTaskId),
      (r) => r.json.task.status === "done",
    );
    const added = await post(root.key, req.conversationUrn);
    expect(added.status).toBe(202);
    // Posted into ada's conversation, the admin's message stays in ada's conversation: hers too.
    expect(added.json.conversationUrn).toBe(req.conversationUrn);
    expect((await getTask(ada.key, added.json.rootTaskId)).status).toBe(200);

    const another = await waitingRequest(ada.key);
    expect((await cancel(root.key, another.rootTaskId)).status).toBe(202);
    await untilRead(
      "the cancel",
      () => getTask(ada.key, another.rootTaskId),
      (r) => r.json.task.status === "canceled",
    );
  });

  it("a conversation recorded before owners were is no person's: only an admin reaches it", async () => {
    const req = await waitingRequest(ada.key);
    const { startedBy: _, ...old } = (await h.rt.resources.get(req.conversationUrn)) as Conversation;
    await h.rt.resources.put(old);
    expectRefused(await getTask(ada.key, req.rootTaskId), "user_ada");
    expectRefused(await answer(ada.key, req.approval.urn, "approve"), "user_ada");
    expect((await getTask(root.key, req.rootTaskId)).status).toBe(200);
    expect((await answer(root.key, req.approval.urn, "approve")).status).toBe(204);
  });
});

describe("over A2A", () => {
  const client = (key: string) => a2aClient(key, `${server.url}`);

  it("a remote agent sees, continues and cancels only what it started; a person does not see the agent's", async () => {
    const agent = await client(partner.key);
    const own = await send(agent, userMessage("What is the cost per person of the offsite?"));
    expect(own.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const person = await client(ada.key);
    const hers = await send(person, userMessage("What is the cost per person?"));
    expect(hers.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);

    // Listing: each sees its own.
    const agentSees = (await list(agent)).tasks.map((t) => t.id);
    expect(agentSees).toContain(own.id);
    expect(agentSees).not.toContain(hers.id);
    const personSees = (await list(person)).tasks.map((t) => t.id);
    expect(personSees).toContain(hers.id);
    expect(personSees).not.toContain(own.id);

    // Another's tasks are not counted either, nor do they leave a page short: a person whose one
    // task is older than others' still finds it on the first page of one, and the count is theirs.
    const bobs = await client(bob.key);
    const his = await send(bobs, userMessage("Where do we stay?"));
    for (const text of ["Which hotel?", "Which flights?"]) await send(person, userMessage(text));
    const page = await list(bobs, { pageSize: 1 });
    expect([page.tasks.map((t) => t.id), page.totalSize, page.nextPageToken]).toEqual([[his.id], 1, ""]);

    // GetTask and CancelTask of the other's: not found (a task one may not read is not found).
    const get = (c: typeof agent, id: string) => c.getTask({ tenant: "", id, historyLength: undefined });
    await expect(get(agent, hers.id)).rejects.toThrow(/Task not found/);
    await expect(get(person, own.id)).rejects.toThrow(/Task not found/);
    expect((await get(agent, own.id)).status?.state).toBe(TaskState.TASK_STATE_COMPLETED);

    // Continuing the person's conversation: refused by the policy, and nothing is written.
    const before = await snapshot();
    await expect(send(agent, userMessage("Me too", { contextId: conversationOf(hers) }))).rejects.toThrow(
      /Permission denied: agent_partner may not write/,
    );
    expect(await snapshot()).toEqual(before);
    // Its own conversation it continues.
    const next = await send(agent, userMessage("And per day?", { contextId: conversationOf(own) }));
    expect(conversationOf(next)).toBe(conversationOf(own));

    // Over the HTTP API the same: the agent reads its own request, not the person's.
    expect((await getTask(partner.key, rootOf(own))).status).toBe(200);
    expectRefused(await getTask(partner.key, rootOf(hers)), "agent_partner");
    expectRefused(await getTask(bob.key, rootOf(own)), "user_bob");
  });

  it("a remote agent's risky call waits for a person with the admin role: the agent and other people cannot answer", async () => {
    const agent = await client(partner.key);
    const waiting = await send(agent, userMessage("Email the team about the offsite"));
    expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const before = await snapshot();
    await expect(send(agent, userMessage("approve", { taskId: waiting.id }))).rejects.toThrow(
      /Permission denied: agent_partner may not answer/,
    );
    await expect(send(await client(bob.key), userMessage("approve", { taskId: waiting.id }))).rejects.toThrow(
      /Task not found/,
    );
    const [pending] = await h.pending(rootOf(waiting));
    expectRefused(await answer(bob.key, pending?.meta.id as string, "approve"), "user_bob");
    expect(await snapshot()).toEqual(before);

    const admin = await client(root.key);
    const done = await send(admin, userMessage("approve", { taskId: waiting.id }));
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(partsText(done.artifacts[0]?.parts)).toMatch(/^Emailed the team: /);
  });

  it("a remote agent cannot cancel a person's request, and a person cannot cancel the agent's", async () => {
    const agent = await client(partner.key);
    const person = await client(ada.key);
    const agents = await send(agent, userMessage("Email the team about the offsite"));
    const hers = await send(person, userMessage("Email the team about the offsite, please"));
    const before = await snapshot();
    const cancelOf = (c: typeof agent, id: string) => c.cancelTask({ tenant: "", id, metadata: undefined });
    await expect(cancelOf(agent, hers.id)).rejects.toThrow(/Task not found/);
    await expect(cancelOf(person, agents.id)).rejects.toThrow(/Task not found/);
    expect(await snapshot()).toEqual(before);
    expect((await h.engine.result(rootOf(agents))).view?.status).toBe("awaiting_user");
    expect((await h.engine.result(rootOf(hers))).view?.status).toBe("awaiting_user");
    expect((await cancelOf(agent, agents.id)).status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    expect((await cancelOf(person, hers.id)).status?.state).toBe(TaskState.TASK_STATE_CANCELED);
  });
});
