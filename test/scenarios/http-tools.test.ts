import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import type { RunningServer } from "../../shared/channels/http/http-server.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import { toolResource, toolUrn } from "../../shared/tools/service/tool-registry.ts";
import { Harness, PERSON } from "./engine-harness.ts";
import { acme, beta, serveHttp } from "./http-fixture.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * ListTools over the HTTP API (`GET /v1/tools?namespace=`), as a client sees it: the real server
 * on an ephemeral port, real fetch, keys of two tenants, the engine on the local runtime with a
 * configuration whose tools have namespaces (one an HTTP tool with a secret header). What is listed
 * is what the tenant's stored Tool resources say.
 */
const SECRET = "Bearer s3cret-token-never-shown";
const TOOLS = {
  tools: {
    sha256: { kind: "builtin", function: "sha256", namespace: "hashing" },
    md5: { kind: "builtin", function: "md5", namespace: "hashing" },
    word_count: { kind: "builtin", function: "word_count" },
    weather: {
      kind: "http",
      url: "https://api.example.com/weather",
      namespace: "web",
      description: "Weather for a city",
      headers: { authorization: SECRET },
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  },
};
const script: ScriptFunction = (r) => {
  if (isPlan(r)) return planOf({ name: "Answer", purpose: "Answer the question" });
  if (isEvaluation(r)) return pass();
  return { content: "done" };
};
const gamma = newApiKey({ id: "user_gil", kind: "human", tenant: "gamma", roles: [] });
const partner = newApiKey({ id: "agent_partner", kind: "agent", tenant: "acme", roles: [] });

let h: Harness;
let server: RunningServer;

beforeAll(async () => {
  h = await Harness.create({ script, assistants: GENERALIST, toolsConfig: TOOLS });
  server = await serveHttp({
    engine: h.engine,
    keys: new ApiKeys({ keys: [acme.entry, beta.entry, gamma.entry, partner.entry] }),
  });
});
afterAll(async () => {
  await server?.close();
  await h?.close();
});

async function get(path: string, key?: string) {
  const res = await fetch(`${server.url}${path}`, {
    headers: key ? { authorization: `Bearer ${key}` } : {},
  });
  const text = await res.text();
  return { status: res.status, text, body: JSON.parse(text) as Record<string, unknown> };
}
const names = (body: Record<string, unknown>) => (body.tools as { name: string }[]).map((t) => t.name);
const storedTools = (tenant: string) => h.rt.resources.childUrns(tenantUrn(tenant), "common.Tool");

describe("GET /v1/tools", () => {
  it("lists the tenant's tools by namespace, for any key of the tenant, without a binding's settings", async () => {
    const all = await get("/v1/tools", acme.key);
    expect(all.status).toBe(200);
    expect(all.body).toMatchObject({ tenant: "acme", namespace: null });
    expect(names(all.body)).toEqual(["md5", "sha256", "weather", "word_count"]);
    expect((await get("/v1/tools?namespace=hashing", acme.key)).body).toMatchObject({
      namespace: "hashing",
      tools: [
        { name: "md5", namespace: "hashing", kind: "builtin", urn: toolUrn("acme", "md5") },
        { name: "sha256", namespace: "hashing", kind: "builtin", urn: toolUrn("acme", "sha256") },
      ],
    });
    expect(names((await get("/v1/tools?namespace=builtin", acme.key)).body)).toEqual(["word_count"]);
    const web = await get("/v1/tools?namespace=web", partner.key); // a remote agent of the tenant
    expect(web.body.tools).toEqual([
      expect.objectContaining({
        name: "weather",
        description: "Weather for a city",
        parameters: expect.objectContaining({ required: ["city"] }),
      }),
    ]);
    expect(names((await get("/v1/tools?namespace=nothing", acme.key)).body)).toEqual([]);
    // The secret header stays in the configuration: not in the answer, not in the resource.
    expect(all.text).not.toContain("s3cret");
    expect(JSON.stringify(await h.rt.resources.get(toolUrn("acme", "weather")))).not.toContain("s3cret");
  });

  it("answers from the stored resources: what the store says is listed, not the engine's configuration", async () => {
    await get("/v1/tools", acme.key); // registered
    const [md5] = h.engine.deps.tools.describe(["md5"]);
    if (!md5) throw new Error("md5 is configured");
    await h.rt.resources.delete(toolUrn("acme", "md5"));
    await h.rt.resources.put({
      ...toolResource("acme", { ...md5, name: "stored_only", namespace: "hashing" }),
    });
    expect(names((await get("/v1/tools?namespace=hashing", acme.key)).body)).toEqual([
      "sha256",
      "stored_only",
    ]);
    expect(h.engine.deps.tools.list().map((t) => t.name)).toContain("md5");
    // Put back what the configuration says (a new process would register it again).
    await h.rt.resources.delete(toolUrn("acme", "stored_only"));
    await h.rt.resources.put(toolResource("acme", md5));
  });

  it("never shows one tenant another's tools: each key lists its own tenant's", async () => {
    expect(names((await get("/v1/tools", beta.key)).body)).toEqual([
      "md5",
      "sha256",
      "weather",
      "word_count",
    ]);
    const [sha] = h.engine.deps.tools.describe(["sha256"]);
    if (!sha) throw new Error("sha256 is configured");
    await h.rt.resources.put(toolResource("beta", { ...sha, name: "beta_secret_tool" }));
    expect(names((await get("/v1/tools", beta.key)).body)).toContain("beta_secret_tool");
    const forAcme = await get("/v1/tools", acme.key);
    expect(forAcme.text).not.toContain("beta_secret_tool");
    expect((forAcme.body.tools as { urn: string }[]).every((t) => t.urn.startsWith(tenantUrn("acme")))).toBe(
      true,
    );
  });

  it("refuses a namespace that is not one with a 400 that says what one is, and writes nothing", async () => {
    const bad = [
      "../hashing",
      "..%2F..%2Fetc",
      "*",
      "hash*",
      "%2A",
      "x".repeat(10_000),
      "%C3%B1ame",
      "%F0%9F%94%A7",
      "Hashing",
      "",
      "a%00b",
      "web&namespace=hashing",
    ];
    for (const ns of bad) {
      const res = await get(`/v1/tools?namespace=${ns}`, gamma.key);
      expect(res.status, ns.slice(0, 40)).toBe(400);
      expect(res.body).toMatchObject({ error: { code: "VALIDATION" } });
      expect(JSON.stringify(res.body)).toMatch(/namespace/);
      expect(res.text.length).toBeLessThan(2_000); // a 10 KB namespace is not echoed back
    }
    const rule = await get("/v1/tools?namespace=*", gamma.key);
    expect(JSON.stringify(rule.body)).toContain("a namespace is 1-64 of a-z 0-9 _ -");
    const extra = await get("/v1/tools?tenant=acme", gamma.key);
    expect(extra.status).toBe(400);
    expect(JSON.stringify(extra.body)).toContain("takes only ?namespace=");
    // Gamma never got a listing: nothing was registered for it.
    expect(await storedTools("gamma")).toEqual([]);
  });

  it("wants a key", async () => {
    expect((await get("/v1/tools")).status).toBe(401);
    expect((await get("/v1/tools", "ak_not-a-key")).status).toBe(401);
  });
});

describe("registration where a tenant is first served", () => {
  it("a tenant's first request registers its Tool resources, before any listing", async () => {
    expect(await storedTools("delta")).toEqual([]);
    await h.engine.submit({ tenant: "delta", text: "What is up?", actor: PERSON, mode: "eager" });
    expect((await storedTools("delta")).sort()).toEqual(
      ["md5", "sha256", "weather", "word_count"].map((n) => toolUrn("delta", n)).sort(),
    );
    await h.idle();
  });
});
