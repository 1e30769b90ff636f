import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { requestPage } from "../../shared/store/request-index.ts";
import { Harness } from "./engine-harness.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * The request index (shared/store/request-index.ts) as submit writes it: a line per request in the
 * tenant's list and the sender's, newest first, written once however often a submit is retried.
 */
let h: Harness;
beforeAll(async () => {
  h = await Harness.create({
    script: (r) => (isPlan(r) ? planOf({ name: "Answer" }) : isEvaluation(r) ? pass() : { content: "ok" }),
    assistants: GENERALIST,
  });
});
afterAll(async () => {
  await h.close();
});

const submit = (actor: string, text: string, idempotencyKey?: string) =>
  h.engine.submit({
    tenant: "acme",
    actor: { id: actor, kind: "human" },
    text,
    ...(idempotencyKey ? { idempotencyKey, idempotencyScope: actor } : {}),
  });

describe("the request index", () => {
  it("lists a tenant's requests and each sender's, newest first, a page at a time, once per request", async () => {
    const first = await submit("user_ada", "first", "k1");
    h.advance(1000);
    const second = await submit("user_bob", "second");
    h.advance(1000);
    const third = await submit("user_ada", "third ".repeat(100));
    // A retry of the first (the same idempotency key) lists nothing again.
    expect((await submit("user_ada", "first", "k1")).rootTaskId).toBe(first.rootTaskId);

    const state = h.engine.deps.state;
    const all = await requestPage(state, { tenant: "acme", limit: 10 });
    expect(all.items.map((r) => r.rootTaskId)).toEqual([
      third.rootTaskId,
      second.rootTaskId,
      first.rootTaskId,
    ]);
    expect(all.items[0]).toMatchObject({ tenant: "acme", actor: "user_ada", mode: "eager" });
    expect(all.items[0]?.rootTaskId.startsWith(`${third.conversationUrn}/`)).toBe(true);
    expect(all.items[0]?.text).toHaveLength(120);
    const ada = await requestPage(state, { tenant: "acme", actor: "user_ada", limit: 10 });
    expect(ada.items.map((r) => r.text.trim().slice(0, 5))).toEqual(["third", "first"]);
    expect((await requestPage(state, { tenant: "beta", limit: 10 })).items).toEqual([]);

    const page1 = await requestPage(state, { tenant: "acme", limit: 2 });
    expect(page1.items).toHaveLength(2);
    const page2 = await requestPage(state, { tenant: "acme", limit: 2, cursor: page1.cursor as string });
    expect(page2.items.map((r) => r.rootTaskId)).toEqual([first.rootTaskId]);
  });
});
