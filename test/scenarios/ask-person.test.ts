import { afterEach, describe, expect, it } from "vitest";
import { ApiKeys } from "../../shared/adapters/local/api-keys.ts";
import type { RunningServer } from "../../shared/channels/http/http-server.ts";
import type { StoredEvent } from "../../shared/domain/events.ts";
import type { InteractionResource } from "../../shared/domain/resources.ts";
import { interactionMeta, requestInteraction } from "../../shared/engine/interactions.ts";
import { fetchApi } from "../support/http.ts";
import { askingScript, CLERK, COLOUR_QUESTION, DATE_QUESTION } from "./ask-fixture.ts";
import { Harness, PERSON } from "./engine-harness.ts";
import { acme, serveHttp } from "./http-fixture.ts";

/**
 * Assistants that ask a person (`ask_person`): the leaf waits in awaiting_user with nothing running,
 * an answer over the HTTP API resumes it, and the model gets the answer as the tool's result.
 */
let h: Harness | undefined;
let server: RunningServer | undefined;
afterEach(async () => {
  await server?.close();
  await h?.close();
  h = undefined;
  server = undefined;
});

async function start(question: Record<string, unknown>, seen: string[] = []) {
  h = await Harness.create({
    script: askingScript(question, seen),
    assistants: CLERK,
    settings: { electionThreshold: -1 },
  });
  server = await serveHttp({ engine: h.engine, keys: new ApiKeys({ keys: [acme.entry] }) });
  const { rootTaskId } = await h.submit("Book the offsite");
  await h.idle();
  return rootTaskId;
}

/** What the answers below are read for: the question of a task (one in these tests), or an error. */
interface Answer {
  interactions: [{ urn: string; links: { answer: string } }];
  error: { code: string };
}
const api = (method: string, path: string, body?: unknown) =>
  fetchApi<Answer>(`${server?.url}`, method, path, acme.key, body);

const enc = encodeURIComponent;
const pendingOf = async (root: string): Promise<InteractionResource[]> => (h ? h.pending(root) : []);
const eventsOf = async (taskId: string) =>
  (await h?.rt.state.readStream(taskId, { fromSeq: 1, limit: 500 })) as StoredEvent[];

describe("ask_person over the HTTP API", () => {
  it("input with a regex: a wrong answer is refused (400, nothing changes), a right one resumes the leaf with the answer", async () => {
    const seen: string[] = [];
    const root = await start(DATE_QUESTION, seen);
    const tree = await h?.tree(root);
    expect(tree?.get("Book the offsite")?.status).toBe("awaiting_user");

    const listed = await api("GET", `/v1/tasks/${enc(root)}/interactions`);
    expect(listed.status).toBe(200);
    expect(listed.json.interactions).toHaveLength(1);
    const q = listed.json.interactions[0];
    expect(q).toMatchObject({
      kind: "input",
      purpose: "request_info",
      display: { title: DATE_QUESTION.title, description: "Give it as YYYY-MM-DD." },
      validation: DATE_QUESTION.validation,
    });
    // Named after the call's place: a step driven again finds it and asks nothing new.
    expect((await h?.rt.resources.get(q.urn))?.meta.name).toBe("ask-turn-0001-0");

    const before = { events: (await eventsOf(root)).length, stored: await h?.rt.resources.get(q.urn) };
    const wrong = await api("POST", q.links.answer, { inputValue: "next Tuesday" });
    expect(wrong.status).toBe(400);
    expect(wrong.json.error.code).toBe("VALIDATION");
    expect(JSON.stringify(wrong.json.error)).toMatch(/input must match/);
    const empty = await api("POST", q.links.answer, { inputValue: "" });
    expect(empty.status).toBe(400);
    expect(JSON.stringify(empty.json.error)).toMatch(/required/);
    const longer = await api("POST", q.links.answer, { inputValue: "2".repeat(600) });
    expect(longer.status).toBe(400);
    expect(JSON.stringify(longer.json.error)).toMatch(/at most 500 characters/);
    await h?.idle();
    // Nothing changed: the same events, the same stored question, still waiting.
    expect((await eventsOf(root)).length).toBe(before.events);
    expect(await h?.rt.resources.get(q.urn)).toEqual(before.stored);
    expect((await h?.rt.tasks.view(root))?.status).toBe("awaiting_user");
    expect(seen).toEqual([]); // the model was not called again

    const right = await api("POST", q.links.answer, { inputValue: "2026-07-03" });
    expect(right.status).toBe(204);
    await h?.idle();
    const { view, output } = (await h?.engine.result(root)) ?? {};
    expect(view?.status).toBe("done");
    expect(output).toBe("booked: 2026-07-03 (told by user_ada)");
    // The model saw the answer as the tool's result: who answered, and what.
    expect(seen).toHaveLength(1);
    expect(JSON.parse(seen[0] as string)).toEqual({
      question: DATE_QUESTION.title,
      answeredBy: "user_ada",
      text: "2026-07-03",
    });
    const events = await eventsOf(root);
    const requested = events.filter((e) => e.type === "UserInteractionRequested");
    const responded = events.filter((e) => e.type === "UserInteractionResponded");
    expect(requested).toHaveLength(1);
    expect(requested[0]?.payload).toMatchObject({ kind: "input", purpose: "request_info" });
    expect(responded).toHaveLength(1);
    expect(responded[0]?.payload).toMatchObject({ inputValue: "2026-07-03" });
    // Asked once, though the leaf ran three steps (ask, resume, answer).
    expect((await h?.rt.resources.children(root, "uip.Interaction"))?.length).toBe(1);
  });

  it("composite: answered with a text of the person's own", async () => {
    const seen: string[] = [];
    const root = await start(COLOUR_QUESTION, seen);
    const [q] = await pendingOf(root);
    expect(q).toMatchObject({ kind: "composite", purpose: "request_info" });
    expect(q?.options?.map((o) => o.label)).toEqual(["Red", "Blue", "Green"]);
    const url = `/v1/interactions/${enc(q?.meta.id as string)}/answer`;
    // Both, neither, and a text that breaks the regex: each refused.
    for (const body of [
      { selectedOptionId: "option-1", inputValue: "Teal" },
      {},
      { inputValue: "Teal 42" },
      { selectedOptionId: "option-9" },
    ]) {
      const refused = await api("POST", url, body);
      expect(refused.status, JSON.stringify(body)).toBe(400);
    }
    expect((await api("POST", url, { inputValue: "Teal" })).status).toBe(204);
    await h?.idle();
    expect((await h?.engine.result(root))?.output).toBe("booked: Teal (told by user_ada)");
    expect(JSON.parse(seen[0] as string)).toMatchObject({ text: "Teal" });
  });

  it("composite: answered with one of the options", async () => {
    const seen: string[] = [];
    const root = await start(COLOUR_QUESTION, seen);
    const [q] = await pendingOf(root);
    const url = `/v1/interactions/${enc(q?.meta.id as string)}/answer`;
    expect((await api("POST", url, { selectedOptionId: "option-2" })).status).toBe(204);
    await h?.idle();
    expect((await h?.engine.result(root))?.output).toBe("booked: Blue (told by user_ada)");
    expect(JSON.parse(seen[0] as string)).toEqual({
      question: COLOUR_QUESTION.title,
      answeredBy: "user_ada",
      option: { id: "option-2", label: "Blue" },
    });
  });

  it("a question that breaks the rules is not asked: the model reads why, and nothing waits", async () => {
    for (const [question, why] of [
      [{ title: "Pattern?", validation: { regex: "^(a+)+$" } }, /repeated group/],
      [{ title: "Pattern?", validation: { regex: "([a-z" } }, /not a valid regular expression/],
      [{ title: "  " }, /title/],
      [{ title: "Pick", options: Array.from({ length: 21 }, (_, i) => `o${i}`) }, /at most 20 options/],
      [{ title: "Pick", options: ["a", "a"] }, /differ/],
      [{ title: "Pick", options: ["a", "b"], validation: { regex: "^a$" } }, /validation applies/],
    ] as const) {
      const seen: string[] = [];
      const root = await start(question, seen);
      expect((await h?.engine.result(root))?.view?.status).toBe("done");
      expect(seen[0]).toMatch(/^Nothing was asked: the question is not valid/);
      expect(seen[0]).toMatch(why);
      expect(await h?.rt.resources.children(root, "uip.Interaction")).toEqual([]);
      await server?.close();
      await h?.close();
      h = undefined;
      server = undefined;
    }
  });

  it("an answer racing a duplicate resume and a second answer: the model is told once, the leaf completes once", async () => {
    const seen: string[] = [];
    const root = await start(DATE_QUESTION, seen);
    const [q] = await pendingOf(root);
    const urn = q?.meta.id as string;
    const outcomes = await Promise.allSettled([
      h?.engine.respond(urn, { inputValue: "2026-07-03" }, PERSON),
      h?.engine.respond(urn, { inputValue: "2026-08-01" }, PERSON),
    ]);
    expect(outcomes.filter((o) => o.status === "fulfilled")).toHaveLength(1);
    // The resume command delivered again, late.
    await h?.engine.deps.bus.publish([
      {
        id: "resume-again",
        source: "arbor.engine",
        detailType: "INTERACTION_ANSWERED",
        detail: { interactionUrn: urn },
      },
    ]);
    await h?.idle();
    expect(seen).toHaveLength(1);
    const done = (await eventsOf(root)).filter((e) => e.type === "TaskCompleted");
    expect(done).toHaveLength(1);
  });

  it("a regex that could hang is never run: refused when asked, and an answer to one stored around the rule is refused", async () => {
    const root = await start(DATE_QUESTION);
    const deps = h?.engine.deps as NonNullable<typeof h>["engine"]["deps"];
    const evil = { kind: "input" as const, purpose: "request_info" as const, display: { title: "Evil?" } };
    await expect(
      requestInteraction(deps, root, "evil", { ...evil, validation: { regex: "^(a+)+$" } }),
    ).rejects.toThrow(/cannot be asked/);
    expect(await deps.resources.getAs("uip.Interaction", interactionMeta(root, "evil").id)).toBeUndefined();
    // Written straight into the store (as by an older version): the answer is refused, not matched.
    const meta = interactionMeta(root, "stored");
    await deps.resources.put({ meta, ...evil, validation: { regex: "^(a+)+$" }, status: "pending" });
    const res = await api("POST", `/v1/interactions/${enc(meta.id)}/answer`, {
      inputValue: `${"a".repeat(40)}b`,
    });
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.json.error)).toMatch(/cannot be checked safely/);
    expect((await deps.resources.getAs("uip.Interaction", meta.id))?.status).toBe("pending");
  });
});
