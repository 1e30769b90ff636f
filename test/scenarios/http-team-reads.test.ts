import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import { MAX_BODY_BYTES } from "../../shared/channels/http/http-api.ts";
import type { RunningServer } from "../../shared/channels/http/http-server.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import { fetchApi } from "../support/http.ts";
import { Harness, PERSON } from "./engine-harness.ts";
import { serveHttp } from "./http-fixture.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * The routes a remote CLI uses, over real HTTP: the team (GET / PUT /v1/admin/team, admins only),
 * one resource, one level of children, a task's events. Hostile input changes nothing and tells
 * nothing: another tenant's URNs are 404 before anything is read, a non-admin's team is 403 before
 * its body is read, oversized and ill-typed bodies are refused naming what is wrong.
 */
const ada = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: [] });
const root = newApiKey({ id: "user_root", kind: "human", tenant: "acme", roles: ["admin"] });
const carl = newApiKey({ id: "user_carl", kind: "human", tenant: "acme", roles: [] });
const bea = newApiKey({ id: "user_bea", kind: "human", tenant: "beta", roles: [] });
const script: ScriptFunction = (r) => {
  if (isPlan(r)) return planOf({ name: "Answer", purpose: "Do any part of any task and report the result" });
  if (isEvaluation(r)) return pass();
  return { content: "answered" };
};
const TEAM = {
  assistants: [
    {
      name: "Generalist",
      id: "generalist",
      purpose: "Do any part of any task and report the result",
      tools: ["calculator"],
    },
    { name: "Writer", id: "writer", purpose: "Write texts", tools: ["word_count"] },
  ],
};

let h: Harness;
let server: RunningServer;
let adaTask: string;
let adaConversation: string;
let beaTask: string;
beforeAll(async () => {
  h = await Harness.create({ script, assistants: GENERALIST, settings: { electionThreshold: -1 } });
  await h.engine.registerAssistants("beta", GENERALIST);
  server = await serveHttp({
    engine: h.engine,
    keys: new ApiKeys({ keys: [ada.entry, root.entry, carl.entry, bea.entry] }),
  });
  const mine = await h.engine.submit({ tenant: "acme", text: "Hello", actor: PERSON });
  adaTask = mine.rootTaskId;
  adaConversation = mine.conversationUrn;
  beaTask = (
    await h.engine.submit({ tenant: "beta", text: "Hello", actor: { id: "user_bea", kind: "human" } })
  ).rootTaskId;
  await h.idle();
});
afterAll(async () => {
  await server?.close();
  await h?.close();
});

const enc = encodeURIComponent;

/** The fields of the API's JSON answers these tests look into. */
interface Named {
  id: string;
  name: string;
}
interface ApiJson {
  team: { assistants: Named[] };
  applied: boolean;
  diff: { added: Named[]; changed: unknown[]; removed: Named[]; unchanged: Named[] };
  error: { code: string; message: string };
  resource: { meta: { id: string } };
  children: { urn: string; type: string }[];
  cursor?: string;
  events: { type: string; seq: number }[];
  nextFromSeq: number;
}

/** `body` as JSON, or a string sent as it is. */
const call = (method: string, path: string, key: string, body?: string | unknown) =>
  fetchApi<ApiJson>(server.url, method, path, key, body);

describe("GET and PUT /v1/admin/team", () => {
  it("shows the diff on a dry run, applies it, and applying it again changes nothing", async () => {
    const shown = await call("GET", "/v1/admin/team", root.key);
    expect(shown.status).toBe(200);
    expect(shown.json.team.assistants.map((a: { id: string }) => a.id)).toEqual(["generalist"]);

    const dry = await call("PUT", "/v1/admin/team?dryRun=true", root.key, TEAM);
    expect(dry.status).toBe(200);
    expect(dry.json.applied).toBe(false);
    expect(dry.json.diff.added.map((e: { name: string }) => e.name)).toEqual(["Writer"]);
    expect(dry.json.diff.changed).toEqual([
      { urn: `${tenantUrn("acme")}/common.Assistant.generalist`, name: "Generalist", fields: ["tools"] },
    ]);
    expect((await call("GET", "/v1/admin/team", root.key)).json.team.assistants).toHaveLength(1);

    const applied = await call("PUT", "/v1/admin/team", root.key, TEAM);
    expect(applied.json.applied).toBe(true);
    expect(applied.json.diff.added).toHaveLength(1);
    const again = await call("PUT", "/v1/admin/team", root.key, TEAM);
    expect(again.json.diff.unchanged).toHaveLength(2);
    expect([again.json.diff.added, again.json.diff.changed, again.json.diff.removed]).toEqual([[], [], []]);
    expect((await call("GET", "/v1/admin/team", root.key)).json.team.assistants).toHaveLength(2);
    // Another tenant's team is its own: beta still has its generalist only.
    expect((await h.engine.team("beta")).map((a) => a.meta.hash)).toEqual(["generalist"]);
  });

  it("is the tenant's admins' only: 403 for anyone else, before the body is read", async () => {
    for (const key of [ada.key, bea.key]) {
      expect((await call("GET", "/v1/admin/team", key)).status).toBe(403);
      const refused = await call("PUT", "/v1/admin/team", key, TEAM);
      expect(refused.status).toBe(403);
      expect(refused.json.error.code).toBe("FORBIDDEN");
      // A body that is not even JSON: still the 403, not a 400 about the body.
      expect((await call("PUT", "/v1/admin/team?dryRun=true", key, "{nope")).status).toBe(403);
    }
    expect((await h.engine.team("beta")).map((a) => a.meta.hash)).toEqual(["generalist"]);
  });

  it("refuses bad bodies, naming the fields, and changes nothing", async () => {
    const before = await call("GET", "/v1/admin/team", root.key);
    const typed = await call("PUT", "/v1/admin/team", root.key, {
      assistants: [
        { name: 7, purpose: ["x"], tools: "calculator" },
        { name: "B", purpose: "y", tools: ["nope"] },
      ],
    });
    expect(typed.status).toBe(400);
    expect(typed.json.error.code).toBe("VALIDATION");
    for (const field of ["assistants.0.name", "assistants.0.purpose", "assistants.0.tools"])
      expect(typed.json.error.message).toContain(field);
    const unknownTool = await call("PUT", "/v1/admin/team", root.key, {
      assistants: [{ name: "B", purpose: "y", tools: ["nope"] }],
    });
    expect(unknownTool.status).toBe(400);
    expect(unknownTool.json.error.message).toMatch(/assistants\.0\.tools\.0: unknown tool "nope"/);
    expect((await call("PUT", "/v1/admin/team", root.key, "{nope")).status).toBe(400);
    expect((await call("PUT", "/v1/admin/team", root.key, [])).status).toBe(400);
    expect((await call("PUT", "/v1/admin/team?dryRun=maybe", root.key, TEAM)).status).toBe(400);
    expect((await call("PUT", "/v1/admin/team?tenant=beta", root.key, TEAM)).status).toBe(400);
    const huge = { assistants: [{ name: "Big", purpose: "x".repeat(MAX_BODY_BYTES) }] };
    const tooLarge = await call("PUT", "/v1/admin/team", root.key, huge);
    expect(tooLarge.status).toBe(413);
    const deep = `${"[".repeat(100)}${"]".repeat(100)}`;
    expect((await call("PUT", "/v1/admin/team", root.key, deep)).status).toBe(400);
    expect(await call("GET", "/v1/admin/team", root.key)).toEqual(before);
  });
});

describe("GET /v1/resources/:urn, /children, /v1/tasks/:urn/events", () => {
  it("reads one resource, its children a page at a time, and a task's events", async () => {
    const got = await call("GET", `/v1/resources/${enc(adaConversation)}`, ada.key);
    expect(got.status).toBe(200);
    expect(got.json.resource.meta.id).toBe(adaConversation);

    const first = await call("GET", `/v1/resources/${enc(adaConversation)}/children?limit=1`, ada.key);
    expect(first.status).toBe(200);
    expect(first.json.children).toHaveLength(1);
    expect(first.json.children[0]?.type).toBe("common.Message");
    // One message only: whatever the next page holds (the store may end a page early), no child.
    if (first.json.cursor) {
      const next = await call(
        "GET",
        `/v1/resources/${enc(adaConversation)}/children?limit=1&cursor=${enc(first.json.cursor)}`,
        ada.key,
      );
      expect(next.json.children).toEqual([]);
    }

    const events = await call("GET", `/v1/tasks/${enc(adaTask)}/events`, ada.key);
    expect(events.status).toBe(200);
    expect(events.json.events.map((e: { type: string }) => e.type)).toContain("TaskCompleted");
    const paged = await call("GET", `/v1/tasks/${enc(adaTask)}/events?fromSeq=2&limit=1`, ada.key);
    expect(paged.json.events.map((e: { seq: number }) => e.seq)).toEqual([2]);
    expect(paged.json.nextFromSeq).toBe(3);

    const me = await call("GET", "/v1/me", ada.key);
    expect(me.json).toMatchObject({
      tenant: "acme",
      tenantUrn: tenantUrn("acme"),
      actor: { id: "user_ada" },
    });
  });

  it("lists below the tenant only what the caller may read", async () => {
    // Besides their own conversations, anyone of the tenant reads its tools (common.Tool).
    type Child = { urn: string; type: string };
    const notTools = (children: Child[]) => children.filter((c) => c.type !== "common.Tool");
    const mine = await call("GET", `/v1/resources/${enc(tenantUrn("acme"))}/children`, ada.key);
    expect(notTools(mine.json.children).map((c) => c.urn)).toEqual([adaConversation]);
    const carls = await call("GET", `/v1/resources/${enc(tenantUrn("acme"))}/children`, carl.key);
    expect(notTools(carls.json.children)).toEqual([]);
    expect((carls.json.children as Child[]).length).toBeGreaterThan(0);
    const admins = await call("GET", `/v1/resources/${enc(tenantUrn("acme"))}/children?limit=1000`, root.key);
    const types = admins.json.children.map((c: { type: string }) => c.type);
    expect(types).toContain("common.Assistant");
    expect(types).toContain("common.Conversation");
  });

  it("answers 404 for another tenant's URNs, whatever is there, and 403 for another's conversation", async () => {
    for (const path of [
      `/v1/resources/${enc(beaTask)}`,
      `/v1/resources/${enc(tenantUrn("beta"))}/children`,
      `/v1/tasks/${enc(beaTask)}/events`,
      `/v1/resources/${enc("cld:common.Tenant.beta/common.Conversation.made-up")}`,
      `/v1/resources/${enc("not a urn")}`,
    ]) {
      const res = await call("GET", path, ada.key);
      expect([path, res.status]).toEqual([path, 404]);
      expect(JSON.stringify(res.json)).not.toMatch(/beta.*(Hello|answered)/);
    }
    for (const path of [
      `/v1/resources/${enc(adaConversation)}`,
      `/v1/resources/${enc(adaConversation)}/children`,
      `/v1/tasks/${enc(adaTask)}/events`,
    ])
      expect([path, (await call("GET", path, carl.key)).status]).toEqual([path, 403]);
  });

  it("refuses bad queries, and a forged cursor reaches nothing outside the level it lists", async () => {
    const base = `/v1/resources/${enc(tenantUrn("beta"))}/children`;
    for (const q of ["limit=0", "limit=100000", "limit=x", "other=1"])
      expect([q, (await call("GET", `${base}?${q}`, bea.key)).status]).toEqual([q, 400]);
    expect((await call("GET", `/v1/tasks/${enc(beaTask)}/events?fromSeq=-1`, bea.key)).status).toBe(400);
    // A cursor that points the listing at acme's keys (the local store's cursor format).
    const forged = Buffer.from(JSON.stringify([`${tenantUrn("acme")}/`, true])).toString("base64url");
    const res = await call("GET", `${base}?cursor=${forged}`, bea.key);
    expect(JSON.stringify(res.json)).not.toContain("Tenant.acme");
    expect((await call("GET", `${base}?cursor=garbage`, bea.key)).status).toBe(400);
  });
});
