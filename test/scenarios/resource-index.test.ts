import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RESOURCE_INDEX } from "../../shared/knowledge/resource-index.ts";
import { searchKnowledge } from "../../shared/knowledge/search.ts";
import { getProjection } from "../../shared/store/projections.ts";
import { Harness, PERSON } from "./engine-harness.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * Tasks made searchable by meaning from the event log (knowledge/resource-index.ts): the watchdog's
 * pass indexes what was planned since its cursor, once; a tenant finds its own tasks, never
 * another's.
 */
let h: Harness;
let ask = "";
beforeAll(async () => {
  h = await Harness.create({
    script: (r) => {
      if (isPlan(r))
        return planOf({
          name: ask,
          purpose: ask,
          subtasks: [{ name: "Venue", purpose: "Find a barn for forty people near Lyon" }],
        });
      if (isEvaluation(r)) return pass();
      return { content: "done" };
    },
    assistants: GENERALIST,
    settings: { electionThreshold: -1 },
  });
  for (const tenant of ["globex"]) await h.engine.registerAssistants(tenant, GENERALIST);
});
afterAll(() => h.close());

async function request(tenant: string, text: string) {
  ask = text;
  await h.engine.submit({ tenant, text, actor: PERSON });
  await h.idle();
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
});
