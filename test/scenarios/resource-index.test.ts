import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Actor } from "../../shared/domain/events.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import { RESOURCE_INDEX } from "../../shared/knowledge/resource-index.ts";
import { searchKnowledge } from "../../shared/knowledge/search.ts";
import type { ToolContext } from "../../shared/ports/tools.ts";
import { getProjection } from "../../shared/store/projections.ts";
import { indexTools } from "../../shared/tools/service/tool-index.ts";
import { registerTools, storedTools } from "../../shared/tools/service/tool-registry.ts";
import { Harness, PERSON } from "./engine-harness.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * Tasks, questions, requests and conversations made searchable by meaning from the event log
 * (knowledge/resource-index.ts), and tools from their registration (tools/service/tool-index.ts):
 * the watchdog's pass indexes what was recorded since its cursor, once; a tenant finds its own,
 * never another's, and a person's requests and conversations are found for that person only.
 */
const BOB: Actor = { id: "user_bob", kind: "human" };
let h: Harness;
let ask = "";
let leafPurpose = "Find a barn for forty people near Lyon";
/** What the leaves were given. */
const prompts: string[] = [];
beforeAll(async () => {
  h = await Harness.create({
    script: (r) => {
      if (isPlan(r))
        return planOf({
          name: ask,
          purpose: ask,
          subtasks: [{ name: "Venue", purpose: leafPurpose }],
        });
      if (isEvaluation(r)) return pass();
      prompts.push(JSON.stringify(r.messages));
      return { content: "done" };
    },
    assistants: GENERALIST,
    settings: { electionThreshold: -1 },
  });
  for (const tenant of ["globex"]) await h.engine.registerAssistants(tenant, GENERALIST);
});
afterAll(() => h.close());

async function request(tenant: string, text: string, actor: Actor = PERSON, title?: string) {
  ask = text;
  const submitted = await h.engine.submit({ tenant, text, actor, ...(title ? { title } : {}) });
  await h.idle();
  return submitted;
}

/** search_resources as an assistant working on `taskId` calls it. */
async function searchAs(taskId: string, args: Record<string, unknown>): Promise<string> {
  const context: ToolContext = {
    taskId,
    actor: "cld:common.Tenant.acme/common.Assistant.generalist",
    callId: "c1",
    allowedTools: ["search_resources"],
  };
  const result = await h.engine.deps.tools.execute("search_resources", args, context);
  expect(result.isError).toBeFalsy();
  return result.content ?? "";
}

describe("tasks indexed from the event log", () => {
  it("are found by meaning once the watchdog's pass indexed them, each once", async () => {
    await request("acme", "Plan the offsite");
    await request("globex", "Plan the globex offsite");
    const found = () =>
      searchKnowledge(h.engine.deps, {
        tenant: "acme",
        text: "a barn for forty people",
        kinds: ["plan.Task"],
        limit: 3,
      });
    expect(await found()).toEqual([]); // not indexed before the pass
    await h.engine.watchdog(60_000);
    const hits = await found();
    expect(hits[0]?.text).toMatch(/^Venue: Find a barn/);
    expect(hits.every((f) => f.urn.startsWith("cld:common.Tenant.acme/"))).toBe(true);
    const cursor = (await getProjection(h.rt.state, RESOURCE_INDEX, { indexed: 0 })).state.indexed;
    expect(cursor).toBeGreaterThanOrEqual(4); // two requests, a root and a venue each
    await h.engine.watchdog(60_000);
    expect((await getProjection(h.rt.state, RESOURCE_INDEX, { indexed: 0 })).state.indexed).toBe(cursor);
  });

  it("finds a person's requests and conversations for that person only, never another's or another tenant's", async () => {
    const ada = await request(
      "acme",
      "Compare the quarterly invoices of the Lisbon bakery",
      PERSON,
      "Bakery books",
    );
    const bob = await request("acme", "Draft a toast for the retirement of our lighthouse keeper", BOB);
    await request("globex", "Draft a toast for the lighthouse keeper of globex", BOB);
    await h.engine.watchdog(60_000);
    const adaSees = await searchAs(ada.rootTaskId, {
      query: "a toast for the lighthouse keeper",
      kinds: ["common.Message", "common.Conversation"],
      limit: 10,
    });
    // (Bob's tasks' results are the tenant's, as a leaf's related results are: only his words are his.)
    expect(adaSees).not.toContain(`[${bob.messageUrn}]`);
    expect(adaSees).not.toContain(`[${bob.conversationUrn}]`);
    expect(adaSees).not.toContain("globex");
    const bobSees = await searchAs(bob.rootTaskId, {
      query: "a toast for the lighthouse keeper",
      kinds: ["common.Message", "common.Conversation"],
      limit: 10,
    });
    expect(bobSees).toContain(`[${bob.messageUrn}] Draft a toast for the retirement`);
    expect(bobSees).toContain(`[${bob.conversationUrn}] Draft a toast for the retirement`);
    expect(bobSees).not.toContain("globex");
    // Ada's conversation has a title: it is what a search shows of it.
    const own = await searchAs(ada.rootTaskId, { query: "the bakery's invoices", limit: 10 });
    expect(own).toContain(`[${ada.messageUrn}] Compare the quarterly invoices`);
    expect(own).toContain(`[${ada.conversationUrn}] Bakery books`);
  });

  it("finds the tenant's tools by what they do, and forgets those no longer registered", async () => {
    await h.engine.watchdog(60_000);
    const found = await searchKnowledge(h.engine.deps, {
      tenant: "acme",
      text: "keep a fact about the person for later requests",
      kinds: ["common.Tool"],
      limit: 3,
    });
    expect(found.map((f) => f.text.split(":")[0])).toContain("remember");
    expect(found.every((f) => f.urn.startsWith(`${tenantUrn("acme")}/common.Tool.`))).toBe(true);
    // The tenant's set changes (a deploy dropped a tool): the next pass takes it out of the index.
    const deps = { resources: h.engine.deps.resources, state: h.rt.state, clock: () => new Date() };
    const kept = (await storedTools(h.engine.deps.resources, "acme")).filter((t) => t.name !== "remember");
    await registerTools(deps, "acme", kept);
    const indexedTools = async () =>
      (
        await h.engine.deps.index.query({
          vector: (await h.engine.deps.embedder.embed(["remember a fact"]))[0] as Float32Array,
          topK: 100,
          type: "common.Tool",
          keyPrefix: `${tenantUrn("acme")}/`,
        })
      ).map((m) => m.key);
    expect(await indexedTools()).toHaveLength(kept.length + 1);
    await h.engine.watchdog(60_000);
    const after = await indexedTools();
    expect(after).toHaveLength(kept.length);
    expect(after.some((k) => k.endsWith("remember"))).toBe(false);
  });

  it("indexes a changed registration once when two passes race (the second's save conflicts, nothing is lost)", async () => {
    const deps = { resources: h.engine.deps.resources, state: h.rt.state, clock: () => new Date() };
    const all = await storedTools(h.engine.deps.resources, "acme");
    await registerTools(deps, "acme", all.slice(1));
    const pass = () => indexTools({ ...h.engine.deps, state: h.rt.state });
    const [a, b] = await Promise.all([pass(), pass()]);
    expect(a + b).toBeGreaterThanOrEqual(all.length - 1);
    const record = await h.rt.state.get<{ indexed?: string[] }>("toolregistry#acme");
    expect(record?.status).toBe("indexed");
    expect(record?.data.indexed).toEqual(
      all
        .slice(1)
        .map((t) => t.name)
        .sort(),
    );
    expect(await pass()).toBe(0); // nothing left for the next pass
  });

  it("gives a leaf earlier results as context, never people's requests", async () => {
    prompts.length = 0;
    leafPurpose = "Draft a toast for the retirement of the lighthouse keeper"; // Bob's very words
    await request("acme", "Write the keeper's retirement speech");
    const related = prompts
      .map((p) => JSON.parse(p))
      .flatMap((messages: { content?: string }[]) =>
        messages.flatMap((m) => (m.content?.includes("# Related results") ? [m.content] : [])),
      );
    expect(related.length).toBeGreaterThan(0);
    for (const prompt of related) {
      const section = prompt.slice(prompt.indexOf("# Related results")).split("\n# ")[0] as string;
      expect(section).toMatch(/^- (all parts )?done$/m);
      expect(section).not.toMatch(/lighthouse|toast|bakery/i);
    }
  });
});
