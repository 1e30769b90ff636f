import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import type { RunningServer } from "../../shared/channels/http/http-server.ts";
import { conversationOf } from "../../shared/domain/urn.ts";
import { windowMarkKey } from "../../shared/engine/window/window-marks.ts";
import { Harness } from "./engine-harness.ts";
import { acme, beta, serveHttp } from "./http-fixture.ts";
import { GENERALIST } from "./scenarios.ts";

/**
 * POST /v1/tasks/:urn/conversation/truncate|clear as its worst callers send it: URNs that are not
 * a task of the caller's (the conversation, a message, a malformed or doubly encoded one, another
 * tenant's), keys that may not, and bodies that are not what the route takes. Each is refused with
 * a status that tells no more than a made-up URN's would, and no mark is written anywhere.
 */
const bob = newApiKey({ id: "user_bob", kind: "human", tenant: "acme", roles: [] });
const partner = newApiKey({ id: "agent_partner", kind: "agent", tenant: "acme", roles: [] });
const betaAdmin = newApiKey({ id: "user_bea2", kind: "human", tenant: "beta", roles: ["admin"] });

let h: Harness;
let server: RunningServer;
let task: string;
beforeAll(async () => {
  h = await Harness.create({ script: () => ({ content: "done" }), assistants: GENERALIST });
  server = await serveHttp({
    engine: h.engine,
    keys: new ApiKeys({ keys: [acme.entry, beta.entry, bob.entry, partner.entry, betaAdmin.entry] }),
  });
  ({ rootTaskId: task } = await h.submit("Say hello"));
  await h.idle();
});
afterAll(async () => {
  await server?.close();
  await h?.close();
});

const send = (path: string, key: string | undefined, body: string, type = "application/json") =>
  fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), "content-type": type },
    body,
  });
const route = (urn: string, what = "truncate") => `/v1/tasks/${encodeURIComponent(urn)}/conversation/${what}`;

describe("the conversation routes under hostile input", () => {
  it("refuses every URN that is not a task of the caller's tenant, the same way a made-up one is", async () => {
    const conversation = conversationOf(task) as string;
    const cases: [string, string | undefined, number][] = [
      [route(conversation), acme.key, 404], // the conversation itself: no task
      [route(`${conversation}/common.Message.m1`), acme.key, 404],
      [route(`${task}/plan.Task.nope`), acme.key, 404],
      [route(task.replace("cld:common.Tenant.acme", "cld:common.Tenant.beta")), betaAdmin.key, 404],
      [route(task), betaAdmin.key, 404], // another tenant's admin: as if it did not exist
      [route(`${task}/..`), acme.key, 400],
      [route(`cld:common.Tenant.acme/${"x".repeat(5_000)}`), acme.key, 400],
      [`/v1/tasks/${encodeURIComponent(task).replace(/%2F/g, "%252F")}/conversation/clear`, acme.key, 404],
      [route(task), undefined, 401],
      [route(task), bob.key, 403], // not the owner
      [route(task), partner.key, 403], // a remote agent of the tenant
    ];
    for (const [path, key, status] of cases) {
      const res = await send(path, key, JSON.stringify({ keepLast: 1 }));
      const text = await res.text();
      expect([path.slice(0, 100), res.status, text.slice(0, 200)]).toEqual([
        path.slice(0, 100),
        status,
        text.slice(0, 200),
      ]);
      expect(text).not.toMatch(/Say hello/); // nothing of the task is told
    }
    for (const urn of [task, conversationOf(task) as string, `${conversationOf(task)}/common.Message.m1`])
      expect(await h.rt.state.get(windowMarkKey(urn))).toBeUndefined();
  });

  it("refuses bodies that are not what the route takes, before anything is written", async () => {
    const bodies: [string, string, string][] = [
      ["truncate", '{"keepLast": 100001}', "application/json"],
      ["truncate", '{"keepLast": 1e400}', "application/json"],
      ["truncate", '{"keepLast": null}', "application/json"],
      ["truncate", '{"keepLast": 1, "__proto__": {"admin": true}}', "application/json"],
      ["truncate", '{"keepLast": 1, "keepLast": "x"}', "application/json"],
      ["truncate", "[1]", "application/json"],
      ["truncate", "keepLast=1", "application/x-www-form-urlencoded"],
      ["truncate", '{"keepLast": 1', "application/json"],
      ["clear", '{"tenant": "beta"}', "application/json"],
      ["clear", `{"pad": "${"x".repeat(2_000_000)}"}`, "application/json"],
    ];
    for (const [what, body, type] of bodies) {
      const res = await send(route(task, what), acme.key, body, type);
      // The body is read before the task (which has ended: 409 if it got that far).
      const expected = body.length > 1_000_000 ? 413 : type === "application/json" ? 400 : [400, 415];
      expect([body.slice(0, 60), res.status]).toEqual([
        body.slice(0, 60),
        Array.isArray(expected) ? expect.toBeOneOf(expected) : expected,
      ]);
    }
    expect(await h.rt.state.get(windowMarkKey(task))).toBeUndefined();
  });

  it("POST /v1/messages: a conversationUrn that is no URN is the request's mistake (400), another tenant's is not found (404), nothing written", async () => {
    const conversations = async () => (await h.rt.resources.childUrns("cld:common.Tenant.acme")).length;
    const before = await conversations();
    const cases: [unknown, number][] = [
      ["not a urn", 400],
      ["cld:common.Tenant.acme/../x", 400],
      ["cld:", 400],
      ["cld:common.Tenant.beta/common.Conversation.c1", 404],
      [(conversationOf(task) as string).replace("Tenant.acme", "Tenant.beta"), 404],
      [42, 400],
    ];
    for (const [conversationUrn, status] of cases) {
      const res = await send("/v1/messages", acme.key, JSON.stringify({ text: "Hello?", conversationUrn }));
      const text = await res.text();
      expect([conversationUrn, res.status]).toEqual([conversationUrn, status]);
      if (status === 400 && typeof conversationUrn === "string") expect(text).toMatch(/conversationUrn/);
    }
    expect(await conversations()).toBe(before);
  });
});
