import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import type { RunningServer } from "../../shared/channels/http/http-server.ts";
import { Harness } from "./engine-harness.ts";
import { serveHttp } from "./http-fixture.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * Between a 202 and the plan (seconds with a real model) the request's root task is not in the log
 * yet; the link the 202 hands out still answers: the task is open, waiting to be planned, with no
 * questions, and a cancel then is a conflict to try again (not a 202 that cancels nothing).
 */
let releasePlan: () => void = () => undefined;
const planHeld = new Promise<void>((resolve) => {
  releasePlan = resolve;
});
const script: ScriptFunction = async (r) => {
  if (isPlan(r)) {
    await planHeld;
    return planOf({ name: "Answer", purpose: "Answer the question" });
  }
  if (isEvaluation(r)) return pass();
  return { content: "Lisbon, 14-15 May." };
};

const ada = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: [] });
let h: Harness;
let server: RunningServer;

beforeAll(async () => {
  h = await Harness.create({ script, assistants: GENERALIST, settings: { electionThreshold: -1 } });
  const keys = new ApiKeys({ keys: [ada.entry] });
  server = await serveHttp({ engine: h.engine, keys });
});
afterAll(async () => {
  releasePlan();
  await server?.close();
  await h?.close();
});

const call = async (method: string, path: string, body?: unknown) => {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${ada.key}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

describe("a request accepted and not yet planned", () => {
  it("is an open task at the 202's link, with no questions; a cancel is a conflict; then it runs", async () => {
    const sent = await call("POST", "/v1/messages", { text: "When is the offsite?" });
    expect(sent.status).toBe(202);
    const link = (sent.body.links as { task: string }).task;

    const got = await call("GET", link);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({
      task: {
        taskId: sent.body.rootTaskId,
        status: "open",
        title: "When is the offsite?",
        createdBy: "user_ada",
        summary: "Accepted: waiting to be planned",
      },
      output: null,
    });
    expect(await call("GET", `${link}/interactions`)).toEqual({ status: 200, body: { interactions: [] } });
    const cancel = await call("POST", `${link}/cancel`, {});
    expect(cancel.status).toBe(409);
    expect(cancel.body).toMatchObject({ error: { code: "CONFLICT" } });

    releasePlan();
    await h.idle();
    const done = await call("GET", link);
    expect(done.body).toMatchObject({ task: { status: "done" }, output: "Lisbon, 14-15 May." });
  });

  it("is not invented for a made-up root task of one's own conversation", async () => {
    const sent = await call("POST", "/v1/messages", { text: "Another question" });
    const madeUp = `${sent.body.conversationUrn as string}/common.Message.nothing/plan.Task.request`;
    const got = await call("GET", `/v1/tasks/${encodeURIComponent(madeUp)}`);
    expect(got.status).toBe(404);
  });
});
