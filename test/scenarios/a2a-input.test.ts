import { randomUUID } from "node:crypto";
import { TaskState } from "@a2a-js/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { a2aTasksParent } from "../../shared/channels/a2a/a2a-store.ts";
import { MAX_JSON_DEPTH, MAX_REQUEST_CHARS } from "../../shared/domain/input-limits.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import { ValidationError } from "../../shared/kernel/errors.ts";
import { readAllEvents } from "../../shared/ports/state-store.ts";
import {
  a2aClient,
  a2aScript,
  EMAIL,
  partner,
  rootOf,
  send,
  serveA2a,
  TEAM,
  userMessage,
} from "./a2a-fixtures.ts";
import { Harness, PERSON } from "./engine-harness.ts";

/**
 * A2A input keeps the limits the HTTP API keeps (one definition: shared/domain/input-limits.ts):
 * the request's text once its parts are rendered, how deep its JSON nests, what its parts are.
 * Each refusal is invalid params (-32602), never a 500, and changes nothing: no conversation,
 * no message, no event, no A2A task record.
 */
let h: Harness;
let served: Awaited<ReturnType<typeof serveA2a>>;
beforeAll(async () => {
  h = await Harness.create({ script: a2aScript(400), assistants: TEAM, settings: { electionThreshold: -1 } });
  served = await serveA2a(h.engine);
});
afterAll(async () => {
  await served?.close();
  await h?.close();
});

async function rpc(
  body: string,
): Promise<{ status: number; json: { error?: { code: number; message: string } } }> {
  const res = await fetch(`${served.url}/a2a`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "a2a-version": "1.0",
      authorization: `Bearer ${partner.key}`,
    },
    body,
  });
  return { status: res.status, json: (await res.json()) as { error?: { code: number; message: string } } };
}
const sendWith = (message: Record<string, unknown>) =>
  JSON.stringify({
    jsonrpc: "2.0",
    id: 7,
    method: "SendMessage",
    params: { message: { messageId: randomUUID(), role: "ROLE_USER", ...message } },
  });

/** Everything a send could have written: acme's resources, every event, acme's A2A task records. */
async function state() {
  await h.idle();
  let events = 0;
  for await (const _ of readAllEvents(h.rt.state)) events++;
  const tasks = await h.rt.state.byParent(a2aTasksParent("acme"), { limit: 1000 });
  return {
    resources: await h.rt.resources.descendantUrns(tenantUrn("acme")),
    events,
    a2aTasks: tasks.items.map((r) => r.key),
  };
}

/** `depth` arrays inside one another around `leaf`, written out as text (JSON.stringify would recurse). */
const nested = (depth: number, leaf = "0") => `${"[".repeat(depth)}${leaf}${"]".repeat(depth)}`;

describe("A2A input over the limits", () => {
  it("is refused as invalid params, and nothing is written", async () => {
    // 4.4 KB that pretty-prints to far more than the cap: 2,000 zeros, 60 levels down.
    const wide = `{"text":"Plan this"},{"data":${nested(59, Array(2000).fill(0).join(","))}}`;
    const cases: [string, string, RegExp][] = [
      [
        "a 4.4 KB nested data part that renders past the cap",
        sendWith({ parts: [] }).replace('"parts":[]', `"parts":[${wide}]`),
        /characters long/,
      ],
      [
        // More than a stored message holds: the old path wrote the conversation, then failed on the message.
        "a 17 KB data part that renders past a million characters",
        sendWith({ parts: [] }).replace(
          '"parts":[]',
          `"parts":[{"text":"Plan this"},{"data":${nested(59, Array(8500).fill(0).join(","))}}]`,
        ),
        /characters long/,
      ],
      [
        "text over the cap",
        sendWith({ parts: [{ text: "x".repeat(MAX_REQUEST_CHARS + 1) }] }),
        /characters long/,
      ],
      [
        "text parts that together pass the cap",
        sendWith({ parts: Array(3).fill({ text: "x".repeat(MAX_REQUEST_CHARS / 2) }) }),
        /characters long/,
      ],
      [
        "a data part nested 5,000 levels",
        sendWith({ parts: [] }).replace('"parts":[]', `"parts":[{"data":${nested(5000)}}]`),
        /nests deeper than/,
      ],
      [
        "a text part that is a number",
        sendWith({ parts: [{ text: 5 }] }),
        /parts\[0\]\.text must be a string/,
      ],
      ["a part that is null", sendWith({ parts: [null] }), /parts\[0\] must be an object/],
      ["a part with two contents", sendWith({ parts: [{ text: "a", data: { b: 1 } }] }), /exactly one of/],
      ["a part with none", sendWith({ parts: [{ mediaType: "text/plain" }] }), /exactly one of/],
      ["no parts", sendWith({ parts: [] }), /non-empty array/],
      ["parts that are no array", sendWith({ parts: { text: "hi" } }), /non-empty array/],
      ["a media type that is no string", sendWith({ parts: [{ text: "hi", mediaType: 1 }] }), /mediaType/],
    ];
    expect(Buffer.byteLength(cases[0]?.[1] ?? "")).toBeLessThan(5000);

    const before = await state();
    for (const [what, body, message] of cases) {
      const res = await rpc(body);
      expect([what, res.status, res.json.error?.code]).toEqual([what, 200, -32602]);
      expect(res.json.error?.message, what).toMatch(message);
      expect(await state(), what).toEqual(before);
    }
    // A file part is unsupported content, refused as such, and changes nothing either.
    const file = await rpc(sendWith({ parts: [{ url: "https://example.com/plan.pdf" }] }));
    expect(file.json.error?.code).toBe(-32005);
    expect(await state()).toEqual(before);
  }, 60_000);

  it("within the limits, a nested data part is taken, rendered as JSON", async () => {
    const data = JSON.parse(nested(MAX_JSON_DEPTH - 6, '{"budget":1200}')) as unknown;
    const res = await rpc(sendWith({ parts: [{ text: "What is the cost per person?" }, { data }] }));
    expect(res.json.error).toBeUndefined();
    const { contextId } = (res.json as { result?: { task?: { contextId: string } } }).result?.task ?? {};
    const [message] = await h.rt.resources.children(contextId as string, "common.Message");
    const content = (message as { content?: string } | undefined)?.content ?? "";
    expect(content).toMatch(/^What is the cost per person\?\n\n```json\n\[\n {2}\[/);
    expect(content).toContain('"budget": 1200');
    await h.idle();
  }, 60_000);

  it("an answer on a waiting task with bad parts is refused, and the task still waits", async () => {
    const c = await a2aClient(partner.key, served.url);
    const waiting = await send(c, userMessage(`Email the team: ${EMAIL.subject}`));
    expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const before = await state();
    for (const parts of [[{ text: 5 }], [{ data: JSON.parse(nested(MAX_JSON_DEPTH + 1)) as unknown }]]) {
      const res = await rpc(sendWith({ taskId: waiting.id, contextId: waiting.contextId, parts }));
      expect(res.json.error?.code).toBe(-32602);
    }
    expect(await state()).toEqual(before);
    expect(await h.pending(rootOf(waiting))).toHaveLength(1);
  }, 60_000);
});

describe("the engine's submit", () => {
  it("refuses a text over the limit before it writes anything (no orphan conversation)", async () => {
    const before = await state();
    await expect(
      h.engine.submit({ tenant: "acme", actor: PERSON, text: "x".repeat(MAX_REQUEST_CHARS + 1) }),
    ).rejects.toThrow(ValidationError);
    await expect(h.engine.submit({ tenant: "acme", actor: PERSON, text: "  " })).rejects.toThrow(
      ValidationError,
    );
    expect(await state()).toEqual(before);
  });
});
