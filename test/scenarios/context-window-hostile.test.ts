import { afterEach, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys } from "../../shared/adapters/local/api-keys.ts";
import type { RunningServer } from "../../shared/channels/http/http-server.ts";
import { markWindow, type WindowMarks, windowMarkKey } from "../../shared/engine/window/window-marks.ts";
import { newestCall, pairsHold } from "./context-window-fixture.ts";
import { Harness, PERSON } from "./engine-harness.ts";
import { acme, serveHttp } from "./http-fixture.ts";
import { isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * Truncate and clear as their worst callers use them: many marks at once on one conversation, and
 * `keepLast` values that are not a count. Every mark acknowledged is recorded; every refusal is a
 * 400 that says what to send and writes nothing.
 */
const MAILER = [
  {
    name: "Mailer",
    id: "mailer",
    purpose: "Count words and send email",
    tools: ["word_count", "send_email"],
  },
];

/** Three word counts, then an email that waits for approval. */
const script: ScriptFunction = (r) => {
  if (isPlan(r)) return planOf({ name: "Count and mail", purpose: "Count words, then mail the team" });
  if (isEvaluation(r)) return pass();
  const n = newestCall(r);
  if (n < 3)
    return { toolCalls: [{ id: `call-${n + 1}`, name: "word_count", arguments: { text: `t ${n}` } }] };
  if (n === 3)
    return {
      toolCalls: [
        { id: "call-4", name: "send_email", arguments: { to: "team@example.com", subject: "W", body: "b" } },
      ],
    };
  return { content: "done" };
};

let h: Harness | undefined;
let server: RunningServer | undefined;
afterEach(async () => {
  await server?.close();
  await h?.close();
  server = undefined;
  h = undefined;
});

async function waitingLeaf() {
  h = await Harness.create({ script, assistants: MAILER, settings: { electionThreshold: -1 } });
  server = await serveHttp({ engine: h.engine, keys: new ApiKeys({ keys: [acme.entry] }) });
  const { rootTaskId: task } = await h.submit("Count words and mail the team");
  await h.idle();
  expect((await h.rt.tasks.view(task))?.status).toBe("awaiting_user");
  return { h, url: server.url, task };
}

const post = (url: string, path: string, body: string) =>
  fetch(`${url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${acme.key}`, "content-type": "application/json" },
    body,
  });
const truncate = (urn: string) => `/v1/tasks/${encodeURIComponent(urn)}/conversation/truncate`;

describe("truncate and clear under hostile use", () => {
  it("refuses keepLast values that are not a count with 400, and writes nothing", async () => {
    const { h, url, task } = await waitingLeaf();
    for (const body of [
      '{"keepLast": -1}',
      '{"keepLast": 1.5}',
      '{"keepLast": "3"}',
      '{"keepLast": null}',
      '{"keepLast": 1e300}',
      '{"keepLast": 100001}',
      '{"keepLast": 2, "fromTurn": 1}',
      '{"keepLast": [2]}',
      "{}",
      "[]",
      '{"keepLast": 2',
      `{"keepLast": 2, "pad": "${"x".repeat(2_000_000)}"}`,
    ]) {
      const res = await post(url, truncate(task), body);
      expect([400, 413], body.slice(0, 40)).toContain(res.status);
      const error = ((await res.json()) as { error: { code: string; message: string } }).error;
      expect(error.message.length, body.slice(0, 40)).toBeGreaterThan(0);
    }
    expect(await h.rt.state.get(windowMarkKey(task))).toBeUndefined();
    // A count beyond the stored turns keeps them all.
    const res = await post(url, truncate(task), '{"keepLast": 100000}');
    expect(res.status).toBe(200);
    expect((await h.rt.state.get<WindowMarks>(windowMarkKey(task)))?.data.fromTurn).toBe(1);
  }, 60_000);

  it("thirty marks at once: each acknowledged one is recorded, and none is lost or doubled", async () => {
    const { h, url, task } = await waitingLeaf();
    const sent = await Promise.all(
      Array.from({ length: 30 }, (_, i) => post(url, truncate(task), JSON.stringify({ keepLast: i % 4 }))),
    );
    const statuses = sent.map((r) => r.status);
    const bodies = (await Promise.all(sent.map((r) => r.json()))) as { error?: { message: string } }[];
    for (const [i, s] of statuses.entries()) {
      // A mark that could not be added after the others is refused plainly, never a 500.
      expect([200, 409], JSON.stringify(bodies[i])).toContain(s);
      if (s === 409) expect(bodies[i]?.error?.message).toMatch(/try again/i);
    }
    const record = (await h.rt.state.get<WindowMarks>(windowMarkKey(task)))?.data;
    expect(record?.marks.length).toBe(statuses.filter((s) => s === 200).length);
    expect(record?.fromTurn).toBe(5); // keepLast 0 of 4 turns is among them, whatever the order
  }, 60_000);
});

describe("a clear that lands while a turn's model call runs", () => {
  it("the running turn goes on; the next step's request starts from it, with every call paired", async () => {
    let task = "";
    let cleared: Promise<unknown> | undefined;
    const requests: { calls: string[]; pairs: boolean; note: boolean }[] = [];
    const racing: ScriptFunction = async (r) => {
      if (isPlan(r)) return planOf({ name: "Count", purpose: "Count words" });
      if (isEvaluation(r)) return pass();
      requests.push({
        calls: r.messages.flatMap((m) =>
          m.role === "assistant" ? (m.toolCalls ?? []).map((c) => c.id) : [],
        ),
        pairs: pairsHold(r.messages),
        note: r.messages.some(
          (m) => m.role === "user" && m.content.includes("removed from this conversation"),
        ),
      });
      const n = newestCall(r);
      // The model is thinking about call 4 when the person clears the conversation.
      if (n === 3 && h) {
        cleared = markWindow(h.engine.deps, task, { action: "clear" }, PERSON);
        await cleared;
      }
      return n < 5
        ? { toolCalls: [{ id: `call-${n + 1}`, name: "word_count", arguments: { text: `t ${n}` } }] }
        : { content: "done" };
    };
    h = await Harness.create({
      script: racing,
      assistants: [{ name: "Counter", id: "counter", purpose: "Count words", tools: ["word_count"] }],
      // Each turn its own step: a mark is read when a step begins (within turnStepMs, as the README says).
      settings: { electionThreshold: -1, turnStepMs: 0 },
    });
    const submitted = h.submit("Count words");
    task = (await submitted).rootTaskId;
    await h.idle();
    await cleared;
    expect((await h.rt.tasks.view(task))?.status).toBe("done");
    expect(requests.map((r) => r.pairs)).toEqual(requests.map(() => true));
    // Requests 1-4 as ever; the 5th (after call 4, a new step) starts at call 4, the turn that was running.
    expect(requests[3]?.calls).toEqual(["call-1", "call-2", "call-3"]);
    expect(requests[4]).toEqual({ calls: ["call-4"], pairs: true, note: true });
    expect(requests[5]?.calls).toEqual(["call-4", "call-5"]);
  }, 60_000);
});
