import { DataFactory } from "n3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { graphQueryRemote } from "../../cli/lib/graph.ts";
import { Remote } from "../../cli/lib/remote.ts";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import type { RunningServer } from "../../shared/channels/http/http-server.ts";
import { graphStoreOf } from "../../shared/graph/state-graph-store.ts";
import { Harness } from "./engine-harness.ts";
import { serveHttp } from "./http-fixture.ts";
import { GENERALIST } from "./scenarios.ts";

/**
 * GET /v1/graph over the real server: a tenant's admins read their own tenant's graph, and only
 * it; a person without the role, a remote agent and a key of another tenant are refused or see
 * their own (empty) graph; a bad query is a 400 that says what to fix.
 */
const acmeAdmin = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: ["admin"] });
const acmePerson = newApiKey({ id: "user_bob", kind: "human", tenant: "acme", roles: [] });
const acmeAgent = newApiKey({ id: "agent_partner", kind: "agent", tenant: "acme", roles: ["admin"] });
const betaAdmin = newApiKey({ id: "user_bea", kind: "human", tenant: "beta", roles: ["admin"] });
const ADA = "https://example.org/ada";
const ASSISTANT = "cld:common.Tenant.acme/common.Assistant.generalist";

let h: Harness;
let server: RunningServer;
beforeAll(async () => {
  h = await Harness.create({ script: () => ({ content: "unused" }), assistants: GENERALIST });
  server = await serveHttp({
    engine: h.engine,
    keys: new ApiKeys({ keys: [acmeAdmin.entry, acmePerson.entry, acmeAgent.entry, betaAdmin.entry] }),
  });
  const { namedNode: iri, literal } = DataFactory;
  await graphStoreOf(h.rt.state).add("acme", [
    { subject: iri(ADA), predicate: iri("https://schema.org/name"), object: literal("Ada", "en") },
    { subject: iri(ASSISTANT), predicate: iri("https://schema.org/knowsAbout"), object: iri(ADA) },
  ]);
});
afterAll(async () => {
  await server?.close();
  await h?.close();
});

const get = async (query: string, key?: string) => {
  const res = await fetch(`${server.url}/v1/graph${query}`, {
    headers: key ? { authorization: `Bearer ${key}` } : {},
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

describe("GET /v1/graph", () => {
  it("gives a tenant's admin its graph, whole or by pattern", async () => {
    const all = await get("", acmeAdmin.key);
    expect(all.status).toBe(200);
    expect(all.body).toMatchObject({ tenant: "acme", more: false, total: 2 });
    expect(all.body.triples).toEqual(
      expect.arrayContaining([
        { subject: ADA, predicate: "schema:name", object: { value: "Ada", language: "en" } },
        { subject: ASSISTANT, predicate: "schema:knowsAbout", object: ADA },
      ]),
    );
    const bySubject = await get(`?s=${encodeURIComponent(ASSISTANT)}`, acmeAdmin.key);
    expect(bySubject.body.triples).toEqual([
      { subject: ASSISTANT, predicate: "schema:knowsAbout", object: ADA },
    ]);
    const byLiteral = await get(
      `?p=schema:name&o=${encodeURIComponent('{"value":"Ada","language":"en"}')}`,
      acmeAdmin.key,
    );
    expect(byLiteral.body.triples).toHaveLength(1);
    expect((await get("?limit=1", acmeAdmin.key)).body).toMatchObject({ more: true });
  });

  it("refuses a person without the admin role and a remote agent; another tenant's admin sees only its own", async () => {
    for (const key of [acmePerson.key, acmeAgent.key]) {
      const refused = await get("", key);
      expect(refused.status).toBe(403);
      expect(refused.body).toMatchObject({ error: { code: "FORBIDDEN" } });
      expect(JSON.stringify(refused.body)).toMatch(
        /may not read the graph of tenant acme \(policy decision dec_/,
      );
    }
    expect((await get("", betaAdmin.key)).body).toEqual({
      tenant: "beta",
      triples: [],
      more: false,
      total: 0,
    });
    const naming = await get(`?s=${encodeURIComponent(ASSISTANT)}`, betaAdmin.key);
    expect(naming.status).toBe(400);
    expect(JSON.stringify(naming.body)).toMatch(/not a resource of your tenant \(beta\)/);
    // No query parameter chooses the tenant.
    const choosing = await get("?tenant=acme", betaAdmin.key);
    expect(choosing.status).toBe(400);
    expect((await get("")).status).toBe(401);
  });

  it("says what to fix in a bad query", async () => {
    const cases: [string, RegExp][] = [
      ["?s=ada", /not an IRI/],
      [`?s=${encodeURIComponent("https://x y")}`, /may not/],
      ["?o=%7Bnot-json", /not a literal as JSON/],
      [`?o=${encodeURIComponent(JSON.stringify({ value: "x".repeat(9_000) }))}`, /over 8000/],
      ["?limit=1000", /limit/],
      ["?s=_:b", /names nothing outside the call/],
    ];
    for (const [query, message] of cases) {
      const bad = await get(query, acmeAdmin.key);
      expect([query, bad.status]).toEqual([query, 400]);
      expect(JSON.stringify(bad.body)).toMatch(message);
    }
  });

  it("is what `arbor graph query` asks a remote Arbor (ARBOR_URL, ARBOR_KEY)", async () => {
    const lines: string[] = [];
    await graphQueryRemote(
      new Remote({ url: server.url, key: acmeAdmin.key }),
      ["-", "schema:name"],
      "10",
      (l) => lines.push(l),
    );
    expect(lines[0]).toBe('<https://example.org/ada> <schema:name> "Ada"@en .');
    expect(lines[1]).toMatch(/1 triple; the graph of acme holds 2/);
    await expect(
      graphQueryRemote(new Remote({ url: server.url, key: acmePerson.key }), [], undefined, () => {}),
    ).rejects.toThrow(/may not read the graph of tenant acme/);
  });
});
