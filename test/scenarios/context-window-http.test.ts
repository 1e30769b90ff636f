import { afterEach, describe, expect, it } from "vitest";
import type { ScriptedTurn, ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import type { RunningServer } from "../../shared/channels/http/http-server.ts";
import type { AssistantDefinition } from "../../shared/engine/engine.ts";
import { type WindowMark, type WindowMarks, windowMarkKey } from "../../shared/engine/window/window-marks.ts";
import type { LlmRequest } from "../../shared/ports/llm.ts";
import { newestCall, pairsHold } from "./context-window-fixture.ts";
import { Harness, PERSON } from "./engine-harness.ts";
import { acme, beta, serveHttp } from "./http-fixture.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * Truncate and clear a leaf's conversation over the HTTP API while it waits for a person (the
 * approval of a risky call), then see the next model request honour the mark. Refused for another
 * tenant's key, for someone who does not own the conversation, for a task that is not a leaf or has
 * ended, and for a bad body: each refusal writes nothing.
 */
const bob = newApiKey({ id: "user_bob", kind: "human", tenant: "acme", roles: [] });
const MAILER = [
  {
    name: "Mailer",
    id: "mailer",
    purpose: "Count words and send email",
    tools: ["word_count", "send_email"],
  },
];
const email = (id: string) => ({
  id,
  name: "send_email",
  arguments: { to: "team@example.com", subject: "Words", body: "counted" },
});

/** Five word counts, then an email (waits for approval), then another email, then the answer. */
function mailerScript(requests: LlmRequest[]): ScriptFunction {
  return (r): ScriptedTurn => {
    if (isPlan(r)) return planOf({ name: "Count and mail", purpose: "Count words, then mail the team" });
    if (isEvaluation(r)) return pass();
    const { signal: _signal, ...rest } = r;
    requests.push(structuredClone(rest) as LlmRequest);
    const n = newestCall(r);
    if (
      r.messages.some((m) => m.role === "user" && m.content.includes("removed from this conversation")) &&
      n === 0
    )
      return { content: "done after the clear" };
    if (n < 5)
      return {
        toolCalls: [{ id: `call-${n + 1}`, name: "word_count", arguments: { text: `text ${n + 1}` } }],
      };
    if (n === 5) return { toolCalls: [email("call-6")] };
    if (n === 6) return { toolCalls: [email("call-7")] };
    return { content: "done" };
  };
}

let h: Harness | undefined;
let server: RunningServer | undefined;
afterEach(async () => {
  await server?.close();
  await h?.close();
  server = undefined;
  h = undefined;
});

async function start(script: ScriptFunction, assistants: AssistantDefinition[] = MAILER) {
  h = await Harness.create({ script, assistants, settings: { electionThreshold: -1 } });
  await h.engine.registerAssistants("beta", assistants);
  server = await serveHttp({
    engine: h.engine,
    keys: new ApiKeys({ keys: [acme.entry, beta.entry, bob.entry] }),
  });
  return { h, url: server.url };
}

const post = (url: string, key: string, path: string, body: unknown) =>
  fetch(`${url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
type Answer = { mark: WindowMark; error: { message: string } };
const json = async (r: Response) => (await r.json()) as Answer;
const conv = (urn: string, what: "truncate" | "clear") =>
  `/v1/tasks/${encodeURIComponent(urn)}/conversation/${what}`;

describe("truncate and clear a conversation over the HTTP API", () => {
  it("while the leaf waits for an approval: the next request honours the mark; others are refused", async () => {
    const requests: LlmRequest[] = [];
    const { h, url } = await start(mailerScript(requests));
    const { rootTaskId: task } = await h.submit("Count words and mail the team");
    await h.idle();
    expect((await h.rt.tasks.view(task))?.status).toBe("awaiting_user");
    const marks = async () => (await h.rt.state.get<WindowMarks>(windowMarkKey(task)))?.data;

    // Refusals: another tenant's key (404, as for a task that does not exist), a non-owner (403),
    // bad bodies (400), a made-up task (404). Nothing written.
    expect((await post(url, beta.key, conv(task, "truncate"), { keepLast: 1 })).status).toBe(404);
    expect((await post(url, beta.key, conv(task, "clear"), {})).status).toBe(404);
    expect((await post(url, bob.key, conv(task, "truncate"), { keepLast: 1 })).status).toBe(403);
    expect((await post(url, bob.key, conv(task, "clear"), {})).status).toBe(403);
    for (const body of [
      { keepLast: -1 },
      { keepLast: 1.5 },
      { keepLast: "2" },
      { keepLast: 2, more: 1 },
      {},
      null,
    ])
      expect((await post(url, acme.key, conv(task, "truncate"), body)).status).toBe(400);
    expect((await post(url, acme.key, conv(task, "clear"), { all: true })).status).toBe(400);
    expect((await post(url, acme.key, conv(`${task}x`, "clear"), {})).status).toBe(404);
    expect(await marks()).toBeUndefined();

    // The owner keeps the newest 2 of the 6 turns stored.
    const truncated = await post(url, acme.key, conv(task, "truncate"), { keepLast: 2 });
    expect(truncated.status).toBe(200);
    expect((await json(truncated)).mark).toMatchObject({
      action: "truncate",
      keepLast: 2,
      turns: 6,
      fromTurn: 5,
      by: { id: "user_ada", kind: "human" },
    });
    const before = requests.length;
    const [approval] = await h.pending(task);
    await h.engine.respond(approval?.meta.id as string, { selectedOptionId: "approve" }, PERSON);
    await h.idle();
    const afterTruncate = requests[before] as LlmRequest;
    expect(afterTruncate.messages[0]?.content).toMatch(/^# Task: Count and mail/);
    expect(afterTruncate.messages[1]?.content).toBe(
      "[Context note: 4 earlier turns were removed from this conversation on request.]",
    );
    const callIds = afterTruncate.messages.flatMap((m) =>
      m.role === "assistant" ? (m.toolCalls ?? []).map((c) => c.id) : [],
    );
    expect(callIds).toEqual(["call-5", "call-6"]);
    expect(pairsHold(afterTruncate.messages)).toBe(true);

    // Waiting again (the second email): clear. Then the next request has the prompt and the note only.
    expect((await h.rt.tasks.view(task))?.status).toBe("awaiting_user");
    const cleared = await post(url, acme.key, conv(task, "clear"), {});
    expect(cleared.status).toBe(200);
    expect((await json(cleared)).mark).toMatchObject({ action: "clear", turns: 7, fromTurn: 8 });
    // A truncate after a clear does not bring cleared turns back.
    expect(
      (await json(await post(url, acme.key, conv(task, "truncate"), { keepLast: 5 }))).mark.fromTurn,
    ).toBe(8);
    const second = requests.length;
    const [again] = await h.pending(task);
    await h.engine.respond(again?.meta.id as string, { selectedOptionId: "approve" }, PERSON);
    await h.idle();
    expect(requests[second]?.messages).toEqual([
      expect.objectContaining({ role: "user", content: expect.stringMatching(/^# Task: Count and mail/) }),
      {
        role: "user",
        content: "[Context note: 7 earlier turns were removed from this conversation on request.]",
      },
    ]);
    expect((await h.engine.result(task)).view?.status).toBe("done");

    // Every mark is on record, with who and when; the transcript is all still stored.
    const record = await marks();
    expect(record?.fromTurn).toBe(8);
    expect(record?.marks.map((m) => `${m.action}:${m.by.id}:${m.fromTurn}`)).toEqual([
      "truncate:user_ada:5",
      "clear:user_ada:8",
      "truncate:user_ada:8",
    ]);
    const stored = await h.rt.resources.children(task, "common.Message");
    expect(stored.filter((m) => /^turn-\d{4}$/.test(m.meta.name))).toHaveLength(7);

    // The task has ended: 409, and nothing more is recorded.
    const ended = await post(url, acme.key, conv(task, "clear"), {});
    expect(ended.status).toBe(409);
    expect((await json(ended)).error.message).toMatch(/has ended \(done\)/);
    expect((await post(url, acme.key, conv(task, "truncate"), { keepLast: 1 })).status).toBe(409);
    expect((await marks())?.marks).toHaveLength(3);
  }, 60_000);

  it("marks sent at once all land, one after the other, and the window honours the furthest", async () => {
    const requests: LlmRequest[] = [];
    const { h, url } = await start(mailerScript(requests));
    const { rootTaskId: task } = await h.submit("Count words and mail the team");
    await h.idle();
    expect((await h.rt.tasks.view(task))?.status).toBe("awaiting_user");
    const sent = await Promise.all(
      [3, 1, 4, 2, 5].map((keepLast) => post(url, acme.key, conv(task, "truncate"), { keepLast })),
    );
    expect(sent.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    const record = (await h.rt.state.get<WindowMarks>(windowMarkKey(task)))?.data;
    expect(record?.marks.map((m) => m.keepLast).sort()).toEqual([1, 2, 3, 4, 5]);
    expect(record?.fromTurn).toBe(6); // keepLast 1 of 6 turns, whatever the order
    const before = requests.length;
    const [approval] = await h.pending(task);
    await h.engine.respond(approval?.meta.id as string, { selectedOptionId: "approve" }, PERSON);
    await h.idle();
    const ids = requests[before]?.messages.flatMap((m) =>
      m.role === "assistant" ? (m.toolCalls ?? []).map((c) => c.id) : [],
    );
    expect(ids).toEqual(["call-6"]);
  }, 60_000);

  it("a task that is not a leaf is refused with 409, and nothing is written", async () => {
    // Two parts, each sending an email: the parts wait for approvals, the root for its parts.
    const script: ScriptFunction = (r) => {
      if (isPlan(r))
        return planOf({
          name: "Survey",
          purpose: "Two parts",
          subtasks: [{ name: "part 1" }, { name: "part 2" }],
        });
      if (isEvaluation(r)) return pass();
      return r.messages.some((m) => m.role === "tool")
        ? { content: "sent" }
        : { toolCalls: [email("call-1")] };
    };
    const { h, url } = await start(script, GENERALIST);
    const { rootTaskId } = await h.submit("Survey every part");
    await h.idle();
    const view = await h.rt.tasks.view(rootTaskId);
    expect(view && !["done", "failed", "canceled"].includes(view.status)).toBe(true);
    const res = await post(url, acme.key, conv(rootTaskId, "clear"), {});
    expect(res.status).toBe(409);
    expect((await json(res)).error.message).toMatch(/is not a leaf/);
    expect(await h.rt.state.get(windowMarkKey(rootTaskId))).toBeUndefined();
  }, 60_000);
});
