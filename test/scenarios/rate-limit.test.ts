import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import type { RunningServer } from "../../shared/channels/http/http-server.ts";
import { RateLimiter } from "../../shared/channels/http/rate-limit.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import { loadConfig } from "../../shared/runtime/config.ts";
import { Harness } from "./engine-harness.ts";
import { serveHttp } from "./http-fixture.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * Requests per key and per tenant, over the real server (HTTP API and A2A share the limiter), on
 * a clock the test moves: one key cannot load the server for everyone else.
 */
const script: ScriptFunction = (r) => {
  if (isPlan(r)) return planOf({ name: "Answer", purpose: "Answer the question" });
  if (isEvaluation(r)) return pass();
  return { content: "Lisbon." };
};
const ada = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: [] });
const cy = newApiKey({ id: "user_cy", kind: "human", tenant: "acme", roles: [] });
const bea = newApiKey({ id: "user_bea", kind: "human", tenant: "beta", roles: [] });

let now = 1_000_000;
let h: Harness;
let server: RunningServer;
beforeAll(async () => {
  h = await Harness.create({ script, assistants: GENERALIST });
  const limiter = new RateLimiter(
    { perKey: { perSecond: 1, burst: 3 }, perTenant: { perSecond: 2, burst: 5 } },
    () => now,
  );
  server = await serveHttp({
    engine: h.engine,
    keys: new ApiKeys({ keys: [ada.entry, cy.entry, bea.entry] }),
    limiter,
  });
});
afterAll(async () => {
  await server?.close();
  await h?.close();
});

/** A cheap request of the key's own tenant: a task in a conversation nobody started (403 from the policy when let through). */
const probe = (key: string, tenant: string) =>
  fetch(`${server.url}/v1/tasks/${encodeURIComponent(`${tenantUrn(tenant)}/common.Conversation.none`)}`, {
    headers: { authorization: `Bearer ${key}` },
  });
const a2a = (key: string) =>
  fetch(`${server.url}/a2a`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ListTasks", params: {} }),
  });

describe("rate limits", () => {
  it("a key past its limit gets 429 with Retry-After on every channel; another tenant's key still gets through; time lets it back", async () => {
    for (let i = 0; i < 3; i++) expect((await probe(ada.key, "acme")).status).toBe(403);
    const refused = await probe(ada.key, "acme");
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(await refused.json()).toEqual({
      error: {
        code: "THROTTLED",
        message: "Too many requests with this API key: try again in 1 s",
        details: { scope: "key" },
      },
    });
    // The same key over A2A: the same limit, HTTP 429 with Retry-After, a JSON-RPC error body.
    const rpc = await a2a(ada.key);
    expect(rpc.status).toBe(429);
    expect(rpc.headers.get("retry-after")).toBe("1");
    expect(await rpc.json()).toMatchObject({ jsonrpc: "2.0", error: { message: /Too many requests/ } });

    // Another tenant's key is not held up by acme's traffic.
    for (let i = 0; i < 2; i++) expect((await probe(bea.key, "beta")).status).toBe(403);
    expect((await a2a(bea.key)).status).toBe(200);

    // Another key of acme shares acme's tenant limit: 5, of which ada took 3 (refusals cost nothing).
    for (let i = 0; i < 2; i++) expect((await probe(cy.key, "acme")).status).toBe(403);
    const tenantFull = await probe(cy.key, "acme");
    expect(tenantFull.status).toBe(429);
    expect((await tenantFull.json()) as unknown).toMatchObject({ error: { details: { scope: "tenant" } } });

    // A second later, ada has a request again (one per second), and not two.
    now += 1000;
    expect((await probe(ada.key, "acme")).status).toBe(403);
    expect((await probe(ada.key, "acme")).status).toBe(429);
    // Long idle: back to the full burst, and no more.
    now += 60_000;
    for (let i = 0; i < 3; i++) expect((await probe(ada.key, "acme")).status).toBe(403);
    expect((await probe(ada.key, "acme")).status).toBe(429);
    // Requests without a key are refused as such (401), before any limit.
    expect((await fetch(`${server.url}/v1/messages`, { method: "POST", body: "{}" })).status).toBe(401);
  });

  it("is configured per key and per tenant, generous by default, and can be turned off", () => {
    expect(loadConfig({})).toMatchObject({
      rateLimits: { perKey: { perSecond: 20, burst: 200 }, perTenant: { perSecond: 50, burst: 500 } },
    });
    expect(loadConfig({ ARBOR_RATE_LIMIT_PER_KEY: "5", ARBOR_RATE_LIMIT_PER_TENANT: "off" })).toMatchObject({
      rateLimits: { perKey: { perSecond: 5, burst: 50 } },
    });
    expect(
      (
        loadConfig({ ARBOR_RATE_LIMIT_PER_KEY: "0", ARBOR_RATE_LIMIT_PER_TENANT: "0.5,3" }) as {
          rateLimits: object;
        }
      ).rateLimits,
    ).toEqual({ perTenant: { perSecond: 0.5, burst: 3 } });
    expect(() => loadConfig({ ARBOR_RATE_LIMIT_PER_KEY: "lots" })).toThrow(/ARBOR_RATE_LIMIT_PER_KEY/);
  });
});
