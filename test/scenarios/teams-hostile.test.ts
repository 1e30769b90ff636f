import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { PERSON } from "./engine-harness.ts";
import { ADA, ROOT, startTeamsWorld, stopTeamsWorld, type TeamsWorld } from "./teams-world.ts";

/**
 * Teams card actions as their worst users send them, each validly signed: an admin of one tenant
 * answering (or reading) another tenant's question, Action.Execute data of the wrong types or with
 * extra fields, and many invokes at once on one question: exactly one answer recorded.
 */
interface InvokeBody {
  statusCode: number;
  type: string;
  value: { code?: string; message?: string; body?: unknown[] };
}

let w: TeamsWorld;
beforeEach(async () => {
  w = await startTeamsWorld();
});
afterEach(() => stopTeamsWorld(w));

async function questionOf(tenant: string): Promise<string> {
  const { rootTaskId } = await w.h.engine.submit({ tenant, text: "Invite the team", actor: PERSON });
  await w.h.idle();
  const [q] = await w.h.pending(rootTaskId);
  if (!q) throw new Error("expected a question");
  return q.meta.id;
}
const invoke = async (data: Record<string, unknown>, options: { from?: string; verb?: string } = {}) => {
  const res = await w.send(w.invoke(data, options));
  expect(res.status).toBe(200);
  return (await res.json()) as InvokeBody;
};
const status = async (urn: string) => (await w.h.engine.deps.resources.getAs("uip.Interaction", urn))?.status;

describe("a burst of activities right after a start (the key set not fetched yet)", () => {
  it("every one is verified against the one fetch: none refused with 503 or 401", async () => {
    const q = await questionOf("acme");
    const bodies = await Promise.all(
      Array.from({ length: 20 }, () => invoke({ interaction: q }, { from: ADA, verb: "arbor.refresh" })),
    );
    expect(bodies.map((b) => b.statusCode)).toEqual(Array(20).fill(200));
    expect(w.teams.keyFetches).toBeLessThanOrEqual(2); // the metadata document and the key set, once
  });
});

describe("Teams card actions that cross a line", () => {
  it("an admin of this Teams tenant may neither answer nor read another Arbor tenant's question", async () => {
    const foreign = await questionOf("globex");
    const answer = await invoke({ interaction: foreign, option: "approve" }, { from: ROOT });
    expect(answer.statusCode).toBeGreaterThanOrEqual(400);
    expect(await status(foreign)).toBe("pending");
    const read = await invoke({ interaction: foreign }, { from: ROOT, verb: "arbor.refresh" });
    expect(read.statusCode).toBeGreaterThanOrEqual(400);
    expect(JSON.stringify(read.value)).not.toContain("Invite");
  });

  it("an admin of this Teams tenant cannot `watch` another Arbor tenant's request (nothing subscribed)", async () => {
    const { rootTaskId } = await w.h.engine.submit({
      tenant: "globex",
      text: "Invite the team",
      actor: PERSON,
    });
    await w.h.idle();
    const res = await w.send(w.message(`watch ${rootTaskId}`, { from: ROOT, conversation: "a:root-watch" }));
    expect(res.status).toBeLessThan(500);
    await w.h.idle();
    expect(await w.notify.service.subscriptions(rootTaskId)).toEqual([]);
  });

  it("data of the wrong types, or with extra fields: refused or ignored, never taken as an answer", async () => {
    const q = await questionOf("acme");
    for (const data of [
      { interaction: [q], option: "approve" },
      { interaction: { urn: q }, option: "approve" },
      { interaction: q, option: 42 },
      { interaction: q, option: ["approve"] },
      { interaction: q, option: { id: "approve" } },
      { interaction: q, option: "approve\u0000deny" },
      { interaction: q, option: "x".repeat(101) },
    ]) {
      const body = await invoke(data);
      expect(body.statusCode, JSON.stringify(data).slice(0, 80)).toBe(400);
    }
    expect(await status(q)).toBe("pending");
    // Extra fields (an actor, a tenant) change nothing: the answer is the signed-in person's.
    const body = await invoke(
      { interaction: q, option: "approve", actor: "user_root", tenant: "globex" },
      { from: ADA },
    );
    expect(body.statusCode).toBe(200);
    const answered = await w.h.engine.deps.resources.getAs("uip.Interaction", q);
    expect(answered?.response).toMatchObject({ selectedOptionId: "approve", actor: "user_ada" });
  });

  it("200 invokes at once on one question, half approving, half denying: exactly one answer recorded", async () => {
    const q = await questionOf("acme");
    const bodies = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        invoke(
          { interaction: q, option: i % 2 === 0 ? "approve" : "deny" },
          { from: i % 3 === 0 ? ROOT : ADA },
        ),
      ),
    );
    expect(bodies.every((b) => b.statusCode === 200)).toBe(true);
    const answered = await w.h.engine.deps.resources.getAs("uip.Interaction", q);
    expect(answered?.status).toBe("answered");
    const chosen = answered?.response?.selectedOptionId;
    // Every invoke's card shows the one answer recorded.
    const label = chosen === "approve" ? "Allow" : "Deny";
    for (const b of bodies) expect(JSON.stringify(b.value.body)).toContain(`: ${label}`);
  });
});
