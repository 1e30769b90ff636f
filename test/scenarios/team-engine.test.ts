import { afterEach, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import type { Assistant } from "../../shared/domain/resources.ts";
import type { TeamFile } from "../../shared/domain/team.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import { DEFAULT_TEAM } from "../../shared/engine/default-team.ts";
import { ForbiddenError, UnavailableError, ValidationError } from "../../shared/kernel/errors.ts";
import { Harness, PERSON } from "./engine-harness.ts";
import { isEvaluation, isPlan, pass, planOf, taskName } from "./scenarios.ts";

/**
 * Teams on the local runtime: a tenant's first request gets the default team (the deployment's,
 * else the built-in one) before it is planned, once; a team applied later retires what it drops,
 * which is never elected again while a task that elected it before still finishes; and a request
 * whose team cannot be registered fails at once, writing nothing.
 */
const WRITE = "Write and edit texts: emails, announcements and summaries";
const SUPPORT = "Answer customers' questions about orders, deliveries and returns";
const TEAM: TeamFile = {
  assistants: [
    { name: "Writer", id: "writer", purpose: WRITE, tools: ["word_count"] },
    { name: "Support", id: "support", purpose: SUPPORT },
    { name: "Generalist", id: "generalist", purpose: "Handle any task no specialist fits" },
  ],
};
/** One task whose description is the request's text (so the assistant of that text is elected). */
const script: ScriptFunction = (r) => {
  if (isPlan(r)) {
    const text = /Write|write/.test(JSON.stringify(r.messages)) ? WRITE : SUPPORT;
    return planOf({ name: text === WRITE ? "Write the note" : "Order question", purpose: text });
  }
  if (isEvaluation(r)) return pass();
  return { content: `done: ${taskName(r)}` };
};

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const assistantsOf = async (tenant: string) =>
  (await h?.rt.resources.children(tenantUrn(tenant), "common.Assistant")) as Assistant[];

describe("the default team", () => {
  it("is registered for a tenant's first request, before it is planned, and elected from", async () => {
    h = await Harness.create({ script, assistants: [], settings: { defaultTeam: TEAM } });
    expect(await assistantsOf("gamma")).toEqual([]);
    const { rootTaskId } = await h.engine.submit({
      tenant: "gamma",
      text: "Where is order 42?",
      actor: PERSON,
    });
    expect((await assistantsOf("gamma")).map((a) => a.meta.hash).sort()).toEqual([
      "generalist",
      "support",
      "writer",
    ]);
    await h.idle();
    const root = await h.rt.tasks.view(rootTaskId);
    expect(root?.status).toBe("done");
    expect(root?.assistant).toBe(`${tenantUrn("gamma")}/common.Assistant.support`);
  });

  it("is the built-in team without one configured, registered once even for requests at the same moment", async () => {
    h = await Harness.create({ script, assistants: [] });
    const put = h.rt.resources.put.bind(h.rt.resources);
    let assistantWrites = 0;
    h.rt.resources.put = async (r) => {
      if ((r as Assistant).meta?.type === "common.Assistant") assistantWrites++;
      return put(r);
    };
    await Promise.all(
      ["one", "two", "three"].map((text) => h?.engine.submit({ tenant: "delta", text, actor: PERSON })),
    );
    await h.engine.submit({ tenant: "delta", text: "four", actor: PERSON });
    const stored = await assistantsOf("delta");
    expect(stored.map((a) => a.meta.hash).sort()).toEqual(DEFAULT_TEAM.map((a) => a.id).sort());
    // The first requests may each have written it (the same resources); later ones write nothing.
    expect(assistantWrites).toBeLessThanOrEqual(3 * DEFAULT_TEAM.length);
    const before = assistantWrites;
    await h.engine.submit({ tenant: "delta", text: "five", actor: PERSON });
    expect(assistantWrites).toBe(before);
    await h.idle();
  });

  it("cannot be registered (the embeddings fail): the request fails at once, saying why, and writes nothing", async () => {
    h = await Harness.create({ script, assistants: [] });
    const embedder = h.engine.deps.embedder;
    const embed = embedder.embed.bind(embedder);
    embedder.embed = async () => {
      throw new Error("the embedding model is not reachable");
    };
    const refused = await h.engine.submit({ tenant: "epsilon", text: "Hello", actor: PERSON }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(UnavailableError);
    expect((refused as Error).message).toMatch(
      /Tenant epsilon has no assistants yet, and its default team could not be registered \(the embedding model is not reachable\)/,
    );
    expect(await h.rt.resources.descendantUrns(tenantUrn("epsilon"))).toEqual([]);
    expect(await h.rt.resources.get(tenantUrn("epsilon"))).toBeUndefined();
    embedder.embed = embed;
    await h.engine.submit({ tenant: "epsilon", text: "Hello", actor: PERSON });
    expect(await assistantsOf("epsilon")).toHaveLength(DEFAULT_TEAM.length);
    await h.idle();
  });
});

describe("applying a team", () => {
  it("retires what the file drops: a task that elected it finishes, later ones never elect it", async () => {
    h = await Harness.create({ script, assistants: [] });
    expect((await h.engine.applyTeam("acme", TEAM)).added).toHaveLength(3);
    const { rootTaskId } = await h.engine.submit({
      tenant: "acme",
      text: "Write the note",
      actor: PERSON,
      mode: "lazy",
    });
    await h.idle();
    const writer = `${tenantUrn("acme")}/common.Assistant.writer`;
    expect((await h.rt.resources.getAs("plan.Task", rootTaskId))?.election?.assistant).toBe(writer);

    // The writer leaves the team while its task waits for the plan's approval.
    const without: TeamFile = { assistants: TEAM.assistants.filter((a) => a.id !== "writer") };
    const diff = await h.engine.applyTeam("acme", without);
    expect(diff.removed).toEqual([{ urn: writer, name: "Writer" }]);
    expect((await h.rt.resources.getAs("common.Assistant", writer))?.retiredAt).toBeDefined();
    expect((await h.engine.team("acme")).map((a) => a.meta.hash).sort()).toEqual(["generalist", "support"]);

    const [approval] = await h.pending(rootTaskId);
    await h.engine.respond(approval?.meta.id as string, { selectedOptionId: "approve" }, PERSON);
    await h.idle();
    expect(await h.rt.tasks.view(rootTaskId)).toMatchObject({ status: "done", assistant: writer });
    expect((await h.engine.result(rootTaskId)).output).toBe("done: Write the note");

    // The same request now: the writer is out of the index, so never elected; no one else fits
    // well enough, so a person is asked to assign it, and the writer is not among the choices.
    const next = await h.engine.submit({ tenant: "acme", text: "Write the note", actor: PERSON });
    await h.idle();
    expect((await h.rt.resources.getAs("plan.Task", next.rootTaskId))?.election).toBeUndefined();
    const [assign] = await h.pending(next.rootTaskId);
    expect(assign?.purpose).toBe("assign_subtask");
    const offered = (assign?.options ?? []).map((o) => o.id);
    expect(offered).not.toContain(writer);
    expect(offered).toContain(`${tenantUrn("acme")}/common.Assistant.generalist`);
    await h.engine.respond(
      assign?.meta.id as string,
      { selectedOptionId: `${tenantUrn("acme")}/common.Assistant.generalist` },
      PERSON,
    );
    await h.idle();
    expect((await h.rt.tasks.view(next.rootTaskId))?.status).toBe("done");

    // Applied again, nothing changes; the writer back in the file is added again.
    const again = await h.engine.applyTeam("acme", without);
    expect([again.added, again.changed, again.removed]).toEqual([[], [], []]);
    const back = await h.engine.applyTeam("acme", TEAM);
    expect(back.added.map((e) => e.name)).toEqual(["Writer"]);
    expect((await h.rt.resources.getAs("common.Assistant", writer))?.retiredAt).toBeUndefined();
  });

  it("refuses a bad team, naming the fields and changing nothing; and a caller who is not an admin", async () => {
    h = await Harness.create({ script, assistants: [] });
    await h.engine.applyTeam("acme", TEAM);
    const before = await assistantsOf("acme");
    const bad = { assistants: [{ name: "Fetcher", purpose: "Fetch pages", tools: ["fetch_page"] }] };
    await expect(h.engine.applyTeam("acme", bad)).rejects.toThrow(ValidationError);
    await expect(h.engine.applyTeam("acme", bad)).rejects.toThrow(
      /assistants\.0\.tools\.0: unknown tool "fetch_page"/,
    );
    const ada = { actor: PERSON, caller: { tenant: "acme", roles: [] } };
    await expect(h.engine.applyTeam("acme", TEAM, { asker: ada })).rejects.toThrow(ForbiddenError);
    await expect(h.engine.applyTeam("acme", TEAM, { asker: ada, dryRun: true })).rejects.toThrow(
      ForbiddenError,
    );
    await expect(h.engine.team("acme", ada)).rejects.toThrow(ForbiddenError);
    const admin = { actor: PERSON, caller: { tenant: "acme", roles: ["admin"] } };
    expect((await h.engine.applyTeam("acme", TEAM, { asker: admin, dryRun: true })).unchanged).toHaveLength(
      3,
    );
    expect(await assistantsOf("acme")).toEqual(before);
  });
});
