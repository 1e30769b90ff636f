import type { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import { createServerApp } from "../../shared/channels/http/http-server.ts";
import { Harness } from "./engine-harness.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * `GET /v1/search`: what the assistants would find, for a person or a platform engineer: a
 * document's passage with its place (for an admin, as the default policy gives documents), the
 * caller's own requests and conversations, tasks the caller may read (a person's own; an admin's,
 * every one), never another tenant's; bad queries refused saying what a good one is.
 */
const BASE = "https://arbor.example";
const ada = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: [] });
const bob = newApiKey({ id: "user_bob", kind: "human", tenant: "acme", roles: [] });
const root = newApiKey({ id: "user_root", kind: "human", tenant: "acme", roles: ["admin"] });
const eve = newApiKey({ id: "user_eve", kind: "human", tenant: "globex", roles: ["admin"] });
const HANDBOOK =
  "# Travel\n\n## Trains\n\nTrains are booked for any trip under four hours, in second class.\n";

let h: Harness;
let app: Hono;
let ask = "";

beforeAll(async () => {
  h = await Harness.create({
    script: (r) => {
      if (isPlan(r)) return planOf({ name: ask, purpose: ask });
      if (isEvaluation(r)) return pass();
      return { content: "done" };
    },
    assistants: GENERALIST,
    settings: { electionThreshold: -1 },
  });
  app = createServerApp({
    engine: h.engine,
    keys: new ApiKeys({ keys: [ada.entry, bob.entry, root.entry, eve.entry] }),
    publicUrl: BASE,
  });
  const call = (key: string, path: string, init: RequestInit) =>
    app.fetch(
      new Request(`${BASE}${path}`, {
        ...init,
        headers: { authorization: `Bearer ${key}`, ...(init.headers as Record<string, string>) },
      }),
    );
  const added = await call(root.key, "/v1/documents?name=handbook.md", {
    method: "POST",
    headers: { "content-type": "text/markdown" },
    body: HANDBOOK,
  });
  expect(added.status).toBe(202);
  for (const [key, text] of [
    [ada.key, "Book the sleeper train to Vienna for the audit"],
    [bob.key, "Book the night train to Vienna for the sales fair"],
    [eve.key, "Book the night train to Vienna for globex"],
  ] as const) {
    ask = text;
    const sent = await call(key, "/v1/messages", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ text }),
    });
    expect(sent.status).toBe(202);
    await h.idle();
  }
  await h.engine.watchdog(60_000); // the pass that indexes requests, conversations and tasks
});
afterAll(() => h.close());

interface Result {
  urn: string;
  kind: string;
  text: string;
  place?: string;
  document?: { name: string };
}
const search = async (key: string, query: string) => {
  const res = await app.fetch(
    new Request(`${BASE}/v1/search?${query}`, { headers: { authorization: `Bearer ${key}` } }),
  );
  return {
    status: res.status,
    body: (await res.json()) as { results?: Result[]; error?: { message: string } },
  };
};
const texts = (results: Result[] | undefined) => (results ?? []).map((r) => `${r.kind} ${r.text}`);

describe("GET /v1/search", () => {
  it("finds a document's passage with where it is, for whom the policy lets read it", async () => {
    const q = `q=${encodeURIComponent("which class are trains booked in")}`;
    const { status, body } = await search(root.key, q);
    expect(status).toBe(200);
    const passage = body.results?.find((r) => r.kind === "doc.Chunk");
    expect(passage?.text).toContain("second class");
    expect(passage?.place).toBe("Travel § Travel > Trains");
    expect(passage?.document?.name).toBe("handbook.md");
    // The default policy gives documents to the tenant's admins (assistants quote them to everyone).
    expect((await search(ada.key, q)).body.results?.some((r) => r.kind === "doc.Chunk")).toBe(false);
  });

  it("finds a person's own requests and tasks, never a colleague's or another tenant's", async () => {
    const q = `q=${encodeURIComponent("a train to Vienna")}&kinds=common.Message,common.Conversation,plan.Task&limit=20`;
    const adaSees = texts((await search(ada.key, q)).body.results);
    expect(adaSees).toContain("common.Message Book the sleeper train to Vienna for the audit");
    expect(adaSees.some((t) => t.startsWith("plan.Task Book the sleeper train"))).toBe(true);
    expect(adaSees.join("\n")).not.toMatch(/sales fair|globex/);
    // An admin reads every task of the tenant; requests and conversations stay their senders'.
    const rootSees = texts((await search(root.key, q)).body.results);
    expect(
      rootSees.some((t) => t.startsWith("plan.Task Book the night train to Vienna for the sales fair")),
    ).toBe(true);
    expect(rootSees.filter((t) => t.startsWith("common.Message Book"))).toEqual([]);
    expect(rootSees.join("\n")).not.toContain("globex");
    const eveSees = texts((await search(eve.key, q)).body.results);
    expect(eveSees.join("\n")).not.toMatch(/audit|sales fair/);
  });

  it("refuses a bad query, saying what a good one is; and a caller without a key", async () => {
    for (const query of [
      "",
      "q=",
      `q=${"x".repeat(2_001)}`,
      "q=train&kinds=mem.Memory",
      "q=train&kinds=",
      "q=train&limit=0",
      "q=train&limit=1000",
      "q=train&limit=two",
      "q=train&tenant=globex",
    ]) {
      const { status, body } = await search(ada.key, query);
      expect([query, status]).toEqual([query, 400]);
      expect(body.error?.message).toMatch(/give \?q=<question>/);
    }
    const anonymous = await app.fetch(new Request(`${BASE}/v1/search?q=train`));
    expect(anonymous.status).toBe(401);
  });
});
