import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { type StreamResponse, type Task, TaskState } from "@a2a-js/sdk";
import type { Client } from "@a2a-js/sdk/client";
import { Ajv2020 } from "ajv/dist/2020.js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { tenantUrn } from "../../shared/domain/urn.ts";
import { AGENT_CARD_1_0_SCHEMA } from "../fixtures/a2a-card-1.0-schema.ts";
import { a2aClient, a2aScript, ada, rootOf, send, serveA2a, TEAM, userMessage } from "./a2a-fixtures.ts";
import { Harness, PERSON } from "./engine-harness.ts";
import { readSse, type SseEvent } from "./sse-client.ts";

/**
 * What the A2A conformance kit (a2aproject/a2a-tck) found on `arbor serve`, each case named by
 * the kit's requirement id: for its 1.0 line the ids of tck/requirements/*.py (CORE-CANCEL-002...),
 * for its 0.3 line the test that checks it (tests/<path>::<test>). The endpoint on
 * @hono/node-server, driven by the SDK's 1.0 client and by raw JSON-RPC where the kit sends what a
 * client library would not (a missing id, a negative historyLength, another media type).
 */
let h: Harness;
let served: Awaited<ReturnType<typeof serveA2a>>;
let url: string;
beforeAll(async () => {
  h = await Harness.create({ script: a2aScript(600), assistants: TEAM, settings: { electionThreshold: -1 } });
  served = await serveA2a(h.engine, { heartbeatMs: 200 });
  url = served.url;
});
afterAll(async () => {
  await served?.close();
  await h?.close();
});
afterEach(async () => {
  await h.idle();
});

interface RpcBody {
  id?: unknown;
  result?: Record<string, unknown>;
  error?: { code: number; message: string };
}

/** JSON-RPC over plain fetch as ada; no A2A-Version header unless `version` names one (0.3 sends none). */
async function rpc(
  method: string,
  params: unknown,
  options: { version?: string; type?: string } = {},
): Promise<{ status: number; json: RpcBody }> {
  const res = await fetch(`${url}/a2a`, {
    method: "POST",
    headers: {
      "content-type": options.type ?? "application/json",
      authorization: `Bearer ${ada.key}`,
      ...(options.version ? { "a2a-version": options.version } : {}),
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 7, method, params }),
  });
  return { status: res.status, json: (await res.json()) as RpcBody };
}

/** A streaming call, read to its end as server-sent events. */
const rpcStream = (method: string, params: unknown, version?: string) =>
  readSse(`${url}/a2a`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      authorization: `Bearer ${ada.key}`,
      ...(version ? { "a2a-version": version } : {}),
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 9, method, params }),
  });
const resultsOf = (events: SseEvent[]) =>
  events.map((e) => (JSON.parse(e.data) as { result: Record<string, unknown> }).result);

/** Everything acme holds: a refused request writes nothing of it. */
const acmeUrns = async () => (await h.rt.resources.descendantUrns(tenantUrn("acme"))).length;

async function collect(stream: AsyncGenerator<StreamResponse>): Promise<StreamResponse[]> {
  const out: StreamResponse[] = [];
  for await (const r of stream) out.push(r);
  return out;
}

/** A cancel refused while the request is not planned yet is tried again, as its message says. */
async function cancelOncePlanned(c: Client, id: string): Promise<Task> {
  for (;;) {
    try {
      return await c.cancelTask({ tenant: "", id, metadata: undefined });
    } catch (e) {
      if (!/not planned yet|being planned/.test(String((e as Error).message))) throw e;
      await sleep(50);
    }
  }
}

// ---- 1. params a method needs -------------------------------------------------------------------------

describe("params a method cannot act on", () => {
  it("a 0.3 call without the task id it names (or with one of another type) is invalid params, -32602, not an internal error; nothing is written", async () => {
    // tests/mandatory/quality/test_error_validation_enhanced.py::test_invalid_params_error_validation
    // and ::test_error_consistency_across_methods (0.3); CORE-ERR-002 (1.0: input validated first).
    const before = await acmeUrns();
    const calls: [string, unknown][] = [
      ["tasks/get", {}],
      ["tasks/get", { id: 12345 }],
      ["tasks/get", { id: "" }],
      ["tasks/cancel", {}],
      [
        "tasks/pushNotificationConfig/set",
        { pushNotificationConfig: { url: "https://hooks.example.com/a2a" } },
      ],
      ["tasks/pushNotificationConfig/set", { taskId: "t1" }],
      ["tasks/pushNotificationConfig/get", {}],
      ["tasks/pushNotificationConfig/list", {}],
      ["tasks/pushNotificationConfig/delete", { id: "t1" }],
    ];
    for (const [method, params] of calls) {
      const { status, json } = await rpc(method, params);
      expect({ method, params, status, code: json.error?.code }).toEqual({
        method,
        params,
        status: 200,
        code: -32602,
      });
      expect(json.error?.message).toMatch(/Invalid params: params\.\w+ (is required|must be)/);
    }
    // tasks/resubscribe is refused the same way, as JSON before any stream begins.
    const sub = await rpcStream("tasks/resubscribe", {});
    expect(sub.contentType).toMatch(/^application\/json/);
    expect(JSON.parse(sub.body)).toMatchObject({ id: 9, error: { code: -32602 } });
    // 1.0 alike: GetTask, CancelTask and SubscribeToTask name their task.
    for (const method of ["GetTask", "CancelTask"])
      expect((await rpc(method, {}, { version: "1.0" })).json.error?.code).toBe(-32602);
    expect(JSON.parse((await rpcStream("SubscribeToTask", {}, "1.0")).body)).toMatchObject({
      error: { code: -32602 },
    });
    expect(await acmeUrns()).toBe(before);
  });

  it("a negative historyLength is invalid params (-32602) in GetTask, ListTasks, a send, and 0.3's tasks/get; the task is unchanged and a refused send writes nothing", async () => {
    // tests/optional/quality/test_edge_cases.py::test_boundary_values (0.3); CORE-ERR-002 and
    // CORE-HIST-002 (1.0: historyLength bounds the history; a negative one bounds nothing).
    const c = await a2aClient(ada.key, url);
    const task = await send(c, userMessage("What is the cost per person?"));
    const before = await acmeUrns();
    for (const historyLength of [-1, 1.5]) {
      expect(
        (await rpc("GetTask", { id: task.id, historyLength }, { version: "1.0" })).json.error,
      ).toMatchObject({
        code: -32602,
        message: expect.stringMatching(/historyLength must be a whole number, 0 or more/),
      });
      expect(
        (await rpc("GetTask", { id: task.id, history_length: historyLength }, { version: "1.0" })).json.error
          ?.code,
      ).toBe(-32602);
      expect((await rpc("ListTasks", { historyLength }, { version: "1.0" })).json.error?.code).toBe(-32602);
      expect((await rpc("tasks/get", { id: task.id, historyLength })).json.error?.code).toBe(-32602);
      const sent = await rpc(
        "SendMessage",
        {
          message: { role: "ROLE_USER", parts: [{ text: "What is 2 + 2?" }], messageId: randomUUID() },
          configuration: { historyLength },
        },
        { version: "1.0" },
      );
      expect(sent.json.error?.code).toBe(-32602);
      expect(
        (
          await rpc("message/send", {
            message: {
              kind: "message",
              role: "user",
              parts: [{ kind: "text", text: "What is 2 + 2?" }],
              messageId: randomUUID(),
            },
            configuration: { historyLength },
          })
        ).json.error?.code,
      ).toBe(-32602);
    }
    expect(await acmeUrns()).toBe(before);
    // 0 is a bound (no history), and the task reads as before.
    const read = await rpc("GetTask", { id: task.id, historyLength: 0 }, { version: "1.0" });
    expect(read.json.result).toMatchObject({ id: task.id, status: { state: "TASK_STATE_COMPLETED" } });
    expect(read.json.result?.history ?? []).toEqual([]);
  });
});

// ---- 2. a second cancel ------------------------------------------------------------------------------

describe("canceling a task that has ended", () => {
  it("a task canceled already is not cancelable (-32002), as a completed one; nothing changes", async () => {
    // CORE-CANCEL-002 (1.0: TaskNotCancelableError for a task completed, failed or canceled);
    // tests/optional/quality/test_task_state_quality.py::test_task_cancel_state_handling (0.3).
    const c = await a2aClient(ada.key, url);
    const task = await send(c, userMessage("Compute the cost slowly"), true);
    const canceled = await cancelOncePlanned(c, task.id);
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    const stored = await c.getTask({ tenant: "", id: task.id, historyLength: undefined });

    await expect(c.cancelTask({ tenant: "", id: task.id, metadata: undefined })).rejects.toThrow(
      /has ended \(canceled\) and cannot be canceled/,
    );
    const again = await rpc("CancelTask", { id: task.id }, { version: "1.0" });
    expect(again.json.error).toMatchObject({
      code: -32002,
      data: [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "TASK_NOT_CANCELABLE" }],
    });
    expect((await rpc("tasks/cancel", { id: task.id })).json.error?.code).toBe(-32002);
    // The task is as the first cancel left it: the same status, time and message.
    expect(await c.getTask({ tenant: "", id: task.id, historyLength: undefined })).toEqual(stored);
  });

  it("a task canceled elsewhere (not over A2A) is not cancelable either, and reads canceled", async () => {
    // CORE-CANCEL-002: the A2A task is a view of Arbor's request, which ended before this cancel.
    const c = await a2aClient(ada.key, url);
    const task = await send(c, userMessage("Compute the cost slowly"), true);
    for (;;) {
      try {
        await h.engine.cancel(rootOf(task), PERSON, "canceled in the console", { tenant: "acme", roles: [] });
        break;
      } catch (e) {
        if (!/not planned|no view|not found/i.test(String((e as Error).message))) throw e;
        await sleep(50);
      }
    }
    await h.idle();
    await expect(c.cancelTask({ tenant: "", id: task.id, metadata: undefined })).rejects.toThrow(
      /cannot be canceled/,
    );
    const read = await c.getTask({ tenant: "", id: task.id, historyLength: undefined });
    expect(read.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
  });
});

// ---- 3. what subscribers see ----------------------------------------------------------------------------

describe("subscribers of one task", () => {
  it("open with the same Task as GetTask has it: the same status time and message id (1.0 and 0.3)", async () => {
    // STREAM-SUB-001 (the Task as it stands when subscribing) and STREAM-ORDER-003 (every stream
    // the same events); tests/optional/capabilities/test_streaming_methods.py::test_tasks_resubscribe (0.3).
    const c = await a2aClient(ada.key, url);
    const waiting = await send(c, userMessage("Email the team about the offsite"));
    expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const [one, two] = await Promise.all([
      collect(c.resubscribeTask({ tenant: "", id: waiting.id })),
      collect(c.resubscribeTask({ tenant: "", id: waiting.id })),
    ]);
    await sleep(20); // a later subscriber still sees the same
    const three = await collect(c.resubscribeTask({ tenant: "", id: waiting.id }));
    const got = await c.getTask({ tenant: "", id: waiting.id, historyLength: undefined });
    for (const stream of [one, two, three]) {
      expect(stream).toHaveLength(1); // interrupted: the Task, and the stream ends
      const first = stream[0]?.payload;
      expect(first?.$case).toBe("task");
      const task = first?.value as Task;
      expect(task.status?.timestamp).toEqual(got.status?.timestamp);
      expect(task.status?.message?.messageId).toBe(got.status?.message?.messageId);
      expect(task.status).toEqual(got.status);
    }
    const legacy = await rpcStream("tasks/resubscribe", { id: waiting.id });
    const [task03] = resultsOf(legacy.events) as {
      kind: string;
      status: { timestamp: string; message: { messageId: string } };
    }[];
    expect(task03?.kind).toBe("task");
    expect(task03?.status.message.messageId).toBe(got.status?.message?.messageId);
    expect(Date.parse(task03?.status.timestamp ?? "")).toBe(Date.parse(String(got.status?.timestamp)));
    await c.cancelTask({ tenant: "", id: waiting.id, metadata: undefined });
  });

  it("at the same moment, on a task whose A2A view is behind Arbor's state, see the one status it is brought to", async () => {
    // STREAM-ORDER-003 and STREAM-SUB-001: acknowledged at once (submitted), then waiting for a
    // person while nobody read it; subscribers and GetTasks at once bring it up once.
    const c = await a2aClient(ada.key, url);
    const task = await send(c, userMessage("Email the team about the offsite"), true);
    expect(task.status?.state).toBe(TaskState.TASK_STATE_SUBMITTED);
    await h.idle();
    const subscribers = Promise.all(
      Array.from({ length: 4 }, () => collect(c.resubscribeTask({ tenant: "", id: task.id }))),
    );
    const readers = Promise.all(
      Array.from({ length: 4 }, () => c.getTask({ tenant: "", id: task.id, historyLength: undefined })),
    );
    const [streams, reads] = await Promise.all([subscribers, readers]);
    const got = reads[0] as Task;
    expect(got.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    for (const read of reads) expect(read.status).toEqual(got.status);
    for (const stream of streams) {
      expect(stream.map((r) => r.payload?.$case)).toEqual(["task"]);
      expect((stream[0]?.payload?.value as Task | undefined)?.status).toEqual(got.status);
    }
    expect(await c.getTask({ tenant: "", id: task.id, historyLength: undefined })).toMatchObject({
      status: got.status,
    });
    await c.cancelTask({ tenant: "", id: task.id, metadata: undefined });
  });

  it("streams of one task receive the same events in the same order, to the end", async () => {
    // STREAM-ORDER-002 (broadcast to every stream) and STREAM-ORDER-003 (the same events, in the same order).
    const c = await a2aClient(ada.key, url);
    const task = await send(c, userMessage("Compute the cost slowly"), true);
    const [one, two] = await Promise.all([
      rpcStream("SubscribeToTask", { id: task.id }, "1.0"),
      rpcStream("SubscribeToTask", { id: task.id }, "1.0"),
    ]);
    expect(one.ended && two.ended).toBe(true);
    const last = resultsOf(one.events).at(-1) as { statusUpdate?: { status: { state: string } } };
    expect(last.statusUpdate?.status.state).toBe("TASK_STATE_COMPLETED");
    expect(resultsOf(two.events)).toEqual(resultsOf(one.events));
    expect(two.events.map((e) => e.id)).toEqual(one.events.map((e) => e.id));
  });
});

// ---- 5. a stream ends where the task is interrupted --------------------------------------------------

describe("a stream at input-required", () => {
  it("0.3's message/stream ends with the question, a status update marked final", async () => {
    // A2A 0.3 §7.2 (`final`: the last event of the stream for this interaction) and
    // tests/optional/capabilities/test_streaming_methods.py::test_message_stream_basic (0.3);
    // STREAM-SUB-002 and CORE-EXECUTION-MODE-001 for 1.0 are in a2a-streams.test.ts (an
    // interrupted task ends its stream), STREAM-ORDER-002/003 above (subscribers of a waiting task).
    const stream = await rpcStream("message/stream", {
      message: {
        kind: "message",
        role: "user",
        messageId: randomUUID(),
        parts: [{ kind: "text", text: "Email the team about the offsite" }],
      },
    });
    expect(stream.ended).toBe(true);
    const results = resultsOf(stream.events) as {
      kind: string;
      final?: boolean;
      status?: { state: string };
    }[];
    expect(results[0]?.kind).toBe("task");
    const last = results.at(-1);
    expect(last).toMatchObject({ kind: "status-update", final: true, status: { state: "input-required" } });
    for (const r of results.slice(0, -1)) expect(r.final ?? false).toBe(false);
    const id = (results[0] as unknown as { id: string }).id;
    expect((await rpc("tasks/cancel", { id })).json.result).toMatchObject({ status: { state: "canceled" } });
  });
});

// ---- 6. A2A's media type -------------------------------------------------------------------------------

describe("the request's media type", () => {
  it("application/a2a+json is JSON: a send and a read are served; another type is still -32005 and writes nothing", async () => {
    // JSONRPC-FMT-002 (the body is JSON) and the 0.3 kit's transport, which sends application/a2a+json.
    const sent = await rpc(
      "SendMessage",
      {
        message: {
          role: "ROLE_USER",
          parts: [{ text: "What is the cost per person?" }],
          messageId: randomUUID(),
        },
      },
      { version: "1.0", type: "application/a2a+json; charset=utf-8" },
    );
    const task = (sent.json.result as { task: { id: string; status: { state: string } } }).task;
    expect(task.status.state).toBe("TASK_STATE_COMPLETED");
    const read = await rpc("tasks/get", { id: task.id }, { type: "application/a2a+json" });
    expect(read.json.result).toMatchObject({ kind: "task", id: task.id, status: { state: "completed" } });

    const before = await acmeUrns();
    const refused = await rpc(
      "SendMessage",
      { message: { role: "ROLE_USER", parts: [{ text: "What is 2 + 2?" }], messageId: randomUUID() } },
      { version: "1.0", type: "text/plain" },
    );
    expect(refused.json.error).toMatchObject({
      code: -32005,
      message: expect.stringMatching(/application\/a2a\+json/),
    });
    expect(await acmeUrns()).toBe(before);
  });
});

// ---- 7. the card per version ------------------------------------------------------------------------------

describe("the agent card per version", () => {
  const card = (headers: Record<string, string> = {}, query = "") =>
    fetch(`${url}/.well-known/agent-card.json${query}`, { headers });

  it("with A2A-Version: 1.0 (or ?A2A-Version=1.0) is valid against 1.0's strict schema, with every required field", async () => {
    // CARD-STRUCT-001 (the fields a.proto requires), CARD-PROTO-001/002 (the interfaces, each with
    // its binding, version and URL), CARD-DISC-001 (served at the well-known path).
    const validate = new Ajv2020({ strict: true, allErrors: true }).compile(AGENT_CARD_1_0_SCHEMA);
    for (const res of [await card({ "A2A-Version": "1.0" }), await card({}, "?A2A-Version=1.0")]) {
      expect(res.status).toBe(200);
      const json = (await res.json()) as Record<string, unknown>;
      expect(validate(json), JSON.stringify(validate.errors)).toBe(true);
      // The combined card this replaced (0.3's fields beside 1.0's) fails the same check.
      expect(validate({ ...json, protocolVersion: "0.3.0", url: "https://x.example/a2a" })).toBe(false);
      for (const field of [
        "name",
        "description",
        "supportedInterfaces",
        "version",
        "capabilities",
        "defaultInputModes",
        "defaultOutputModes",
        "skills",
      ])
        expect(json).toHaveProperty(field);
      expect(json.supportedInterfaces).toEqual([
        { url: `${url}/a2a`, protocolBinding: "JSONRPC", protocolVersion: "1.0" },
        { url: `${url}/a2a`, protocolBinding: "JSONRPC", protocolVersion: "0.3" },
      ]);
    }
    // The card 0.3 readers get (no header) is not a 1.0 card: its 0.3 fields are outside the schema.
    const v03 = (await (await card()).json()) as Record<string, unknown>;
    expect(validate(v03)).toBe(false);
    expect(v03).toMatchObject({ url: `${url}/a2a`, protocolVersion: "0.3.0", preferredTransport: "JSONRPC" });
    // tests/mandatory/protocol/test_agent_card_mandatory.py::test_agent_card_mandatory_fields (0.3)
    for (const field of [
      "name",
      "description",
      "url",
      "version",
      "capabilities",
      "defaultInputModes",
      "defaultOutputModes",
      "skills",
    ])
      expect(v03).toHaveProperty(field);
    expect(await (await card({ "A2A-Version": "0.3" })).text()).toBe(JSON.stringify(v03));
  });

  it("each version's card has its own ETag and a Last-Modified; If-None-Match and If-Modified-Since get 304", async () => {
    // CARD-CACHE-001 (Cache-Control max-age), CARD-CACHE-002 (ETag), CARD-CACHE-003 (Last-Modified);
    // tests/mandatory/protocol/test_a2a_v030_new_methods.py::test_rest_specific_features (0.3:
    // If-Modified-Since and ETag on the card).
    const v10 = await card({ "A2A-Version": "1.0" });
    const v03 = await card();
    for (const res of [v10, v03]) {
      expect(res.headers.get("cache-control")).toBe("public, max-age=300");
      expect(res.headers.get("vary")).toMatch(/A2A-Version/i);
      expect(res.headers.get("etag")).toMatch(/^"[\w-]{16,}"$/);
      expect(Number.isNaN(Date.parse(res.headers.get("last-modified") ?? ""))).toBe(false);
    }
    const etag10 = v10.headers.get("etag") as string;
    const etag03 = v03.headers.get("etag") as string;
    expect(etag10).not.toBe(etag03);
    const modified = v10.headers.get("last-modified") as string;
    expect(v03.headers.get("last-modified")).toBe(modified);

    const hit = await card({ "A2A-Version": "1.0", "If-None-Match": etag10 });
    expect(hit.status).toBe(304);
    expect(hit.headers.get("etag")).toBe(etag10);
    expect(await hit.text()).toBe("");
    // The other version's tag is not this card's.
    expect((await card({ "A2A-Version": "1.0", "If-None-Match": etag03 })).status).toBe(200);
    expect((await card({ "If-None-Match": etag03 })).status).toBe(304);
    // If-Modified-Since, without If-None-Match: not modified since then; an older date gets the card.
    expect((await card({ "A2A-Version": "1.0", "If-Modified-Since": modified })).status).toBe(304);
    const earlier = new Date(Date.parse(modified) - 60_000).toUTCString();
    expect((await card({ "A2A-Version": "1.0", "If-Modified-Since": earlier })).status).toBe(200);
    // If-None-Match decides when both are sent (RFC 9110 §13.1.3).
    expect(
      (await card({ "A2A-Version": "1.0", "If-None-Match": '"old"', "If-Modified-Since": modified })).status,
    ).toBe(200);
  });
});
