import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import type { RunningServer } from "../../shared/channels/http/http-server.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import { readAllEvents } from "../../shared/ports/state-store.ts";
import type { Harness } from "./engine-harness.ts";
import { acme, beta, twoTenantServer } from "./http-fixture.ts";
import { isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * No existence oracle across tenants: whatever a beta key names of another tenant (acme's
 * interaction, task or conversation that exists, one that does not, a malformed URN of acme's, a
 * tenant that does not exist, no URN at all), with whatever body (valid, invalid, not JSON), every
 * route that takes a URN gives one answer: the 404 of a URN that does not exist. The same over A2A
 * (contextId, GetTask, CancelTask). And nothing of acme's changes.
 */
const script: ScriptFunction = (r) => {
  if (isPlan(r)) return planOf({ name: "Answer", purpose: "Answer the question" });
  if (isEvaluation(r)) return pass();
  return { content: "Lisbon." };
};

let h: Harness;
let server: RunningServer;
beforeAll(async () => {
  ({ h, server } = await twoTenantServer(script));
});
afterAll(async () => {
  await server?.close();
  await h?.close();
});

async function call(method: string, path: string, key: string, body?: string) {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "a2a-version": "1.0" },
    ...(body === undefined ? {} : { body }),
  });
  return { status: res.status, text: await res.text() };
}

async function snapshot() {
  await h.idle();
  let events = 0;
  for await (const _ of readAllEvents(h.rt.state)) events++;
  return { resources: await h.rt.resources.descendantUrns(tenantUrn("acme")), events };
}

/** One answer per route: the status and the body, with the URN asked about written as <urn>. */
const shape = (res: { status: number; text: string }, urn: string) => ({
  status: res.status,
  body: res.text.split(JSON.stringify(urn).slice(1, -1)).join("<urn>"),
});

describe("another tenant's URNs", () => {
  it("get one answer on every HTTP route, whatever exists there and whatever the body", async () => {
    const submitted = await call(
      "POST",
      "/v1/messages",
      acme.key,
      JSON.stringify({ text: "Our secret plan", mode: "lazy" }),
    );
    const { rootTaskId, conversationUrn } = JSON.parse(submitted.text) as {
      rootTaskId: string;
      conversationUrn: string;
    };
    const [interaction] = await waitFor(() => h.pending(rootTaskId));
    const acmeUrns = {
      interaction: (interaction as { meta: { id: string } }).meta.id,
      task: rootTaskId,
      conversation: conversationUrn,
      madeUp: `${conversationUrn}/common.Message.nope/plan.Task.nope/uip.Interaction.nope`,
      malformed: `${tenantUrn("acme")}/not an element`,
      noTenant: `${tenantUrn("zeta")}/common.Conversation.c`,
      notUrn: "not-a-urn",
    };
    const urns = Object.values(acmeUrns);
    const before = await snapshot();
    const enc = encodeURIComponent;
    const routes: [string, (urn: string) => string, string[], (urn: string, body: string) => string][] = [
      ["POST", (u) => `/v1/interactions/${enc(u)}/answer`, answerBodies(), (_u, b) => b],
      [
        "POST",
        (u) => `/v1/tasks/${enc(u)}/cancel`,
        ['{"reason":"mine"}', '{"reason":5}', "{oops", ""],
        (_u, b) => b,
      ],
      ["GET", (u) => `/v1/tasks/${enc(u)}`, [""], () => ""],
      ["GET", (u) => `/v1/tasks/${enc(u)}/interactions`, [""], () => ""],
      [
        "POST",
        () => "/v1/messages",
        ['{"text":"hi"}', '{"text":5,"mode":"later"}'],
        (u, b) => JSON.stringify({ ...JSON.parse(b), conversationUrn: u }),
      ],
    ];
    for (const [method, path, bodies, bodyFor] of routes) {
      const answers = new Map<string, string[]>();
      // A conversationUrn in a body that is no URN at all is the request's own mistake (400, for
      // whatever tenant it names: it tells nothing of what exists); every URN is "not found".
      const inBody = path("x") === "/v1/messages";
      const syntaxOnly = new Set([acmeUrns.malformed, acmeUrns.notUrn]);
      if (inBody)
        for (const urn of syntaxOnly) {
          const res = await call(method, path(urn), beta.key, bodyFor(urn, bodies[0] as string));
          expect([urn, res.status]).toEqual([urn, 400]);
          expect(res.text).toMatch(/conversationUrn is not a URN/);
        }
      for (const urn of urns.filter((u) => !(inBody && syntaxOnly.has(u))))
        for (const body of bodies) {
          const sent = bodyFor(urn, body);
          const res = await call(method, path(urn), beta.key, method === "GET" ? undefined : sent);
          const key = JSON.stringify(shape(res, urn));
          answers.set(key, [...(answers.get(key) ?? []), `${urn} ${sent}`]);
        }
      // One answer for all of them, and it is "not found".
      expect([...answers.keys()], `${method} ${path("<urn>")}`).toHaveLength(1);
      const [only] = [...answers.keys()];
      expect(JSON.parse(only as string)).toMatchObject({ status: 404 });
      expect(JSON.parse((JSON.parse(only as string) as { body: string }).body)).toMatchObject({
        error: {
          code: "NOT_FOUND",
          message: expect.stringMatching(/^(Interaction|Task|Conversation) not found: <urn>$/),
        },
      });
    }
    // ... the answer a made-up URN of another tenant gets (inside its own tenant, the policy answers
    // first: 403 for a conversation the caller did not start, whether or not anything is there).
    const madeUp = `${tenantUrn("acme")}/common.Conversation.c/common.Message.m/plan.Task.t/uip.Interaction.i`;
    const own = await call(
      "POST",
      `/v1/interactions/${enc(madeUp)}/answer`,
      beta.key,
      '{"selectedOptionId":"approve"}',
    );
    const foreign = await call(
      "POST",
      `/v1/interactions/${enc(acmeUrns.interaction)}/answer`,
      beta.key,
      '{"selectedOptionId":"approve"}',
    );
    expect(shape(foreign, acmeUrns.interaction)).toEqual(shape(own, madeUp));

    expect(await snapshot()).toEqual(before);
    expect(await h.pending(rootTaskId)).toHaveLength(1);
  }, 60_000);

  it("get one answer over A2A: a contextId, GetTask and CancelTask", async () => {
    const rpc = (key: string, method: string, params: unknown) =>
      call("POST", "/a2a", key, JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }));
    const sent = await rpc(acme.key, "SendMessage", {
      message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "Where is it?" }] },
      configuration: { returnImmediately: true },
    });
    const task = (JSON.parse(sent.text) as { result: { task: { id: string; contextId: string } } }).result
      .task;
    await h.idle();
    const before = await snapshot();

    const contexts = [
      task.contextId,
      `${tenantUrn("acme")}/common.Conversation.nope`,
      `${tenantUrn("acme")}/not an element`,
      `${tenantUrn("zeta")}/common.Conversation.c`,
    ];
    const answers = new Set<string>();
    for (const contextId of contexts)
      for (const parts of [[{ text: "Forward me everything" }], [{ text: 5 }]]) {
        const res = await rpc(beta.key, "SendMessage", {
          message: { messageId: randomUUID(), role: "ROLE_USER", contextId, parts },
        });
        answers.add(JSON.stringify(shape(res, contextId)));
      }
    expect([...answers]).toHaveLength(1);
    expect(JSON.parse([...answers][0] as string)).toMatchObject({
      status: 200,
      body: expect.stringContaining("No conversation <urn> for this caller"),
    });

    for (const method of ["GetTask", "CancelTask"]) {
      const seen = new Set<string>();
      for (const id of [task.id, randomUUID(), "not-a-task"])
        seen.add(JSON.stringify(shape(await rpc(beta.key, method, { id }), id)));
      expect([...seen], method).toHaveLength(1);
      expect([...seen][0]).toContain("Task not found: <urn>");
    }
    expect(await snapshot()).toEqual(before);
  }, 60_000);
});

function answerBodies(): string[] {
  return ['{"selectedOptionId":"approve"}', '{"selectedOptionId":5,"extra":true}', "{oops", ""];
}

async function waitFor<T>(read: () => Promise<T[]>): Promise<T[]> {
  for (let i = 0; i < 200; i++) {
    const value = await read();
    if (value.length > 0) return value;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error("nothing to wait for came");
}
