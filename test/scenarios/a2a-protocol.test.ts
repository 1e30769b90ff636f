import { randomUUID } from "node:crypto";
import { type AgentCard, type Message, type Task, TaskState } from "@a2a-js/sdk";
import { type Client, ClientFactory, JsonRpcTransportFactory } from "@a2a-js/sdk/client";
import { parseLegacyAgentCard } from "@a2a-js/sdk/compat/v0_3/client";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CALLER_EXTENSION } from "../../shared/channels/a2a/a2a-card.ts";
import type { RunningServer } from "../../shared/channels/http/http-server.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import { untilRead } from "../support/until.ts";
import {
  ANSWER,
  a2aClient,
  a2aScript,
  keys,
  partner,
  partsText,
  root,
  rootOf,
  send,
  TEAM,
  userMessage,
  withKey,
} from "./a2a-fixtures.ts";
import { Harness } from "./engine-harness.ts";
import { serveHttp } from "./http-fixture.ts";

/**
 * A2A 0.3 next to 1.0 on `arbor serve`'s app (the HTTP API and the A2A endpoint on a real server on
 * an ephemeral port), driven by the SDK's 1.0 client, its 0.3 client, and raw JSON-RPC for what a
 * client library would never send (seed 003's request as written, malformed bodies).
 */
let h: Harness;
let server: RunningServer;
let url: string;
beforeAll(async () => {
  h = await Harness.create({ script: a2aScript(400), assistants: TEAM, settings: { electionThreshold: -1 } });
  server = await serveHttp({ engine: h.engine, keys });
  url = server.url;
});
afterAll(async () => {
  await server?.close();
  await h?.close();
});
afterEach(async () => {
  await h.idle();
});

interface RpcBody {
  id?: unknown;
  result?: Record<string, unknown> & { status?: { state?: string }; artifacts?: Artifact03[] };
  error?: { code: number; message: string };
}
interface Artifact03 {
  parts: { kind: string; text?: string; data?: Record<string, unknown> }[];
}

/** JSON-RPC over plain fetch; no A2A-Version header unless `version` names one (as a 0.3 client sends). */
async function rpc(
  method: string,
  params: unknown,
  options: { key?: string; version?: string; path?: string; id?: unknown } = {},
): Promise<{ status: number; headers: Headers; json: RpcBody }> {
  const res = await fetch(`${url}${options.path ?? "/a2a"}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      authorization: `Bearer ${options.key ?? partner.key}`,
      ...(options.version ? { "a2a-version": options.version } : {}),
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: options.id ?? 1, method, params }),
  });
  return { status: res.status, headers: res.headers, json: (await res.json()) as RpcBody };
}

const conversations = (tenant: string) => h.rt.resources.descendantUrns(tenantUrn(tenant));
const rawCard = async () =>
  (await (await fetch(`${url}/.well-known/agent-card.json`)).json()) as Record<string, unknown>;

/** The SDK's 0.3 client, from the card's 0.3 fields alone (as a reader that knows only 0.3 sees it). */
async function legacyClient(key: string): Promise<Client> {
  const { supportedInterfaces: _, ...v03 } = await rawCard();
  const card = parseLegacyAgentCard(v03);
  return new ClientFactory({
    transports: [new JsonRpcTransportFactory({ fetchImpl: withKey(key), legacyCompat: { enabled: true } })],
    clientConfig: { polling: false },
  }).createFromAgentCard(card);
}

const message = (parts: Message["parts"]): Message => ({ ...userMessage("x"), parts });

// ---- the card ------------------------------------------------------------------------------------

describe("the agent card", () => {
  it("without A2A-Version is 0.3's card (1.0's interfaces besides), with a strong ETag that a conditional GET answers with 304", async () => {
    const res = await fetch(`${url}/.well-known/agent-card.json`);
    const etag = res.headers.get("etag") as string;
    expect(etag).toMatch(/^"[\w-]{16,}"$/); // strong: no W/
    expect(res.headers.get("cache-control")).toBe("public, max-age=300");
    const card = (await res.json()) as Record<string, unknown>;
    expect(card).toMatchObject({
      // 0.3
      url: `${url}/a2a`,
      protocolVersion: "0.3.0",
      preferredTransport: "JSONRPC",
      additionalInterfaces: [{ url: `${url}/a2a`, transport: "JSONRPC" }],
      supportsAuthenticatedExtendedCard: true,
      security: [{ arborApiKey: [] }],
      securitySchemes: { arborApiKey: { type: "http", scheme: "bearer" } },
      capabilities: { streaming: true, pushNotifications: false },
      defaultInputModes: ["text/plain", "application/json"],
      defaultOutputModes: ["text/plain", "application/json"],
      // 1.0's, for a 1.0 reader that sent no A2A-Version
      supportedInterfaces: [
        { url: `${url}/a2a`, protocolBinding: "JSONRPC", protocolVersion: "1.0" },
        { url: `${url}/a2a`, protocolBinding: "JSONRPC", protocolVersion: "0.3" },
      ],
    });
    // Nothing else of 1.0's: a 0.3 reader sees a 0.3 card.
    for (const field of ["securityRequirements", "signatures"]) expect(card).not.toHaveProperty(field);
    expect(card.capabilities).not.toHaveProperty("extendedAgentCard");
    expect((card.securitySchemes as Record<string, object>).arborApiKey).not.toHaveProperty(
      "httpAuthSecurityScheme",
    );
    // A 0.3 reader finds the endpoint, the transport and the scheme without any 1.0 field.
    const { supportedInterfaces: _, ...v03 } = card;
    const parsed = parseLegacyAgentCard(v03);
    expect(parsed.supportedInterfaces).toEqual([
      expect.objectContaining({ url: `${url}/a2a`, protocolBinding: "JSONRPC" }),
      expect.objectContaining({ url: `${url}/a2a`, protocolBinding: "JSONRPC" }),
    ]);
    expect(parsed.securitySchemes.arborApiKey?.scheme?.$case).toBe("httpAuthSecurityScheme");

    const again = await fetch(`${url}/.well-known/agent-card.json`, { headers: { "if-none-match": etag } });
    expect(again.status).toBe(304);
    expect(again.headers.get("etag")).toBe(etag);
    expect(await again.text()).toBe("");
    const stale = await fetch(`${url}/.well-known/agent-card.json`, {
      headers: { "if-none-match": '"old"' },
    });
    expect(stale.status).toBe(200);
  });
});

// ---- versions ------------------------------------------------------------------------------------

describe("version negotiation", () => {
  it("no header is 0.3; A2A-Version: 1.0 (header or query) is 1.0; a method of the other version is refused naming the header", async () => {
    const v1InV03 = await rpc("GetTask", { id: "nope" });
    expect(v1InV03.json.error).toMatchObject({
      code: -32601,
      message: expect.stringMatching(
        /GetTask is an A2A 1\.0 method.*no A2A-Version header.*A2A-Version: 1\.0.*tasks\/get/,
      ),
    });
    const v03InV1 = await rpc("tasks/get", { id: "nope" }, { version: "1.0" });
    expect(v03InV1.json.error).toMatchObject({
      code: -32601,
      message: expect.stringMatching(
        /tasks\/get is an A2A 0\.3 method.*without the A2A-Version header.*GetTask/,
      ),
    });
    // Each version's own method reaches the handler: the task is not found, in either.
    expect((await rpc("tasks/get", { id: "nope" })).json.error).toMatchObject({ code: -32001 });
    expect((await rpc("tasks/get", { id: "nope" }, { version: "0.3" })).json.error).toMatchObject({
      code: -32001,
    });
    expect((await rpc("GetTask", { id: "nope" }, { version: "1.0.3" })).json.error).toMatchObject({
      code: -32001,
    });
    expect((await rpc("GetTask", { id: "nope" }, { path: "/a2a?A2A-Version=1.0" })).json.error).toMatchObject(
      {
        code: -32001,
      },
    );
    expect((await rpc("GetTask", { id: "nope" }, { version: "0.2" })).json.error).toMatchObject({
      code: -32009,
      message: expect.stringMatching(/'0\.2' is not supported: Arbor speaks 1\.0 .* and 0\.3/),
    });
  });

  it("streaming and push methods reach the handler in both versions; push is refused where the server sends none", async () => {
    const m03 = {
      kind: "message",
      messageId: randomUUID(),
      role: "user",
      parts: [{ kind: "text", text: "hi" }],
    };
    const m1 = { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "hi" }] };
    const push03 = { taskId: "nope", pushNotificationConfig: { url: "https://example.com/hook" } };
    const cases: [string, unknown, string | undefined, number][] = [
      ["message/stream", { message: { ...m03, parts: [] } }, undefined, -32602],
      ["tasks/resubscribe", { id: "nope" }, undefined, -32001],
      ["tasks/pushNotificationConfig/set", push03, undefined, -32003],
      ["tasks/pushNotificationConfig/get", { id: "nope" }, undefined, -32003],
      ["tasks/pushNotificationConfig/list", { id: "nope" }, undefined, -32003],
      [
        "tasks/pushNotificationConfig/delete",
        { id: "nope", pushNotificationConfigId: "c" },
        undefined,
        -32003,
      ],
      ["SendStreamingMessage", { message: { ...m1, parts: [] } }, "1.0", -32602],
      ["SubscribeToTask", { id: "nope" }, "1.0", -32001],
      [
        "CreateTaskPushNotificationConfig",
        { taskId: "nope", url: "https://example.com/hook" },
        "1.0",
        -32003,
      ],
      ["ListTaskPushNotificationConfigs", { taskId: "nope" }, "1.0", -32003],
    ];
    for (const [method, params, version, code] of cases) {
      const res = await rpc(method, params, version ? { version } : {});
      expect([method, res.status, res.json.error?.code]).toEqual([method, 200, code]);
    }
  });

  it("POST /a2a/ (a trailing slash) is the same endpoint, in both versions", async () => {
    const v1 = await rpc("GetTask", { id: "nope" }, { version: "1.0", path: "/a2a/" });
    expect([v1.status, v1.json.error?.code]).toEqual([200, -32001]);
    const v03 = await rpc("tasks/get", { id: "nope" }, { path: "/a2a/" });
    expect([v03.status, v03.json.error?.code]).toEqual([200, -32001]);
    const c = await a2aClient(partner.key, url);
    expect(
      (await c.getTask({ tenant: "", id: "nope", historyLength: undefined }).catch((e) => e)).message,
    ).toMatch(/Task not found/);
    // Without a key, 401 there as well.
    const res = await fetch(`${url}/a2a/`, { method: "POST", body: "{}" });
    expect(res.status).toBe(401);
  });
});

// ---- 0.3 -----------------------------------------------------------------------------------------

describe("A2A 0.3", () => {
  it("seed 003 §8.1 as written (no header, blocking false, a caller's uuid contextId): an immediate ACK, then tasks/get shows it completed with a data part", async () => {
    const contextId = randomUUID();
    const params = {
      message: {
        kind: "message",
        messageId: randomUUID(),
        role: "user",
        parts: [{ kind: "text", text: "What is the cost per person of the offsite?" }],
        contextId,
      },
      configuration: { blocking: false, acceptedOutputModes: ["text/plain", "application/json"] },
    };
    const ack = await rpc("message/send", params, { id: "req-1" });
    expect(ack.status).toBe(200);
    expect(ack.json).toMatchObject({ jsonrpc: "2.0", id: "req-1", result: { kind: "task", contextId } });
    const task = ack.json.result as { id: string; status: { state: string; timestamp: string } };
    expect(["submitted", "working"]).toContain(task.status.state);
    expect(Date.parse(task.status.timestamp)).not.toBeNaN();
    // The ACK means the request is on disk, as Arbor's: its conversation holds the message.
    const metadata = ack.json.result?.metadata as { arbor: { conversationUrn: string } };
    const { conversationUrn } = metadata.arbor;
    const messages = await h.rt.resources.children(conversationUrn, "common.Message");
    expect(messages.map((m) => (m as { content?: string }).content)).toEqual([
      "What is the cost per person of the offsite?",
    ]);

    const done = await untilRead(
      "the task to complete",
      () => rpc("tasks/get", { id: task.id }),
      (r) => r.json.result?.status?.state === "completed",
    );
    expect(done.json.result).toMatchObject({ kind: "task", id: task.id, contextId });
    const parts = done.json.result?.artifacts?.[0]?.parts ?? [];
    expect(parts).toEqual([
      { kind: "text", text: ANSWER },
      { kind: "data", data: { result: ANSWER, title: "Cost per person" } },
    ]);
    // 1.0 reads the same task, in its own shape.
    const c = await a2aClient(partner.key, url);
    const seen = await c.getTask({ tenant: "", id: task.id, historyLength: undefined });
    expect(seen.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(seen.artifacts[0]?.parts.map((p) => p.content?.$case)).toEqual(["text", "data"]);
  });

  it("a 0.3 configuration that does not say blocking blocks, as 0.3 servers do", async () => {
    const params = {
      message: {
        kind: "message",
        messageId: randomUUID(),
        role: "user",
        parts: [{ kind: "text", text: "Cost?" }],
      },
      configuration: { acceptedOutputModes: ["text/plain"] },
    };
    const res = await rpc("message/send", params);
    expect(res.json.result).toMatchObject({ kind: "task", status: { state: "completed" } });
    expect(res.json.result?.artifacts?.[0]?.parts).toEqual([{ kind: "text", text: ANSWER }]);
  });

  it("the SDK's 0.3 client: a blocking send completes; get, cancel, and the extended card", async () => {
    const c = await legacyClient(partner.key);
    expect(c.protocolVersion).toBe("0.3");
    const done = await send(c, userMessage("What is the cost per person?"));
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(partsText(done.artifacts[0]?.parts)).toBe(ANSWER);
    const again = await c.getTask({ tenant: "", id: done.id, historyLength: undefined });
    expect(again.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);

    const ack = await send(c, userMessage("Compute the cost per person, slowly"), true);
    expect(ack.status?.state).toBe(TaskState.TASK_STATE_SUBMITTED);
    await untilRead(
      "the request to start",
      async () => (await h.engine.result(rootOf(ack))).view?.status,
      (s) => s === "in_progress",
    );
    const canceled = await c.cancelTask({ tenant: "", id: ack.id, metadata: undefined });
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);

    const card = await c.getAgentCard();
    expect(card.name).toBe("Arbor");
    expect(card.capabilities?.extensions).toEqual([
      expect.objectContaining({ uri: CALLER_EXTENSION, params: expect.objectContaining({ tenant: "acme" }) }),
    ]);
  });

  it("refuses malformed 0.3 bodies, unknown configuration and what Arbor does not take, and writes nothing", async () => {
    const before = await conversations("acme");
    const msg = (parts: unknown, extra: Record<string, unknown> = {}) => ({
      message: { kind: "message", messageId: randomUUID(), role: "user", parts, ...extra },
    });
    const text = [{ kind: "text", text: "hello" }];
    const cases: [string, unknown, number, RegExp][] = [
      ["message/send", [], -32602, /Invalid method parameters/],
      ["message/send", {}, -32602, /message/],
      ["message/send", msg([{ text: "no kind" }]), -32602, /parts\[0\]\.kind is required/],
      ["message/send", msg([{ kind: "text", text: 5 }]), -32602, /parts\[0\]\.text must be a string/],
      ["message/send", msg([{ kind: "data", data: "x" }]), -32602, /parts\[0\]\.data must be an object/],
      ["message/send", msg([{ kind: "file", file: {} }]), -32602, /exactly one of bytes, uri/],
      ["message/send", msg([]), -32602, /non-empty array/],
      ["message/send", { message: { kind: "message" } }, -32602, /./],
      ["message/send", msg(text, { role: "robot" }), -32602, /role/],
      // content Arbor does not take: -32005, saying what it takes
      [
        "message/send",
        msg([{ kind: "video", url: "x" }]),
        -32005,
        /kind "video".*text parts \(text\/plain\)/,
      ],
      [
        "message/send",
        msg([{ kind: "file", file: { bytes: "dGNr", mimeType: "application/pdf" } }]),
        -32005,
        /a file \(bytes of media type application\/pdf\).*text parts/,
      ],
      [
        "message/send",
        { ...msg(text), configuration: { acceptedOutputModes: ["image/png"] } },
        -32005,
        /offers text\/plain and application\/json/,
      ],
      // configuration: an unknown field, a wrong type, push (not offered)
      [
        "message/send",
        { ...msg(text), configuration: { blocking: false, returnImmediately: true } },
        -32602,
        /configuration\.returnImmediately \(A2A 0\.3 has acceptedOutputModes, blocking, historyLength, pushNotificationConfig\)/,
      ],
      [
        "message/send",
        { ...msg(text), configuration: { blocking: "no" } },
        -32602,
        /blocking must be true or false/,
      ],
      [
        "message/send",
        { ...msg(text), configuration: { historyLength: -1 } },
        -32602,
        /historyLength must be/,
      ],
      [
        "message/send",
        {
          ...msg(text),
          configuration: { pushNotificationConfig: { url: "https://example.com/hook", token: "t" } },
        },
        -32003,
        /capabilities\.pushNotifications/,
      ],
      ["tasks/list", {}, -32601, /./],
    ];
    for (const [method, params, code, message] of cases) {
      const res = await rpc(method, params, { id: 9 });
      expect([method, JSON.stringify(params), res.status, res.json]).toEqual([
        method,
        JSON.stringify(params),
        200,
        expect.objectContaining({
          id: 9,
          error: expect.objectContaining({ code, message: expect.stringMatching(message) }),
        }),
      ]);
    }
    await h.idle();
    expect(await conversations("acme")).toEqual(before);
  });
});

// ---- 1.0 -----------------------------------------------------------------------------------------

describe("A2A 1.0", () => {
  const sendWith = (c: Client, m: Message, configuration: Record<string, unknown>) =>
    c.sendMessage({
      tenant: "",
      message: m,
      configuration: {
        acceptedOutputModes: [],
        taskPushNotificationConfig: undefined,
        returnImmediately: false,
        ...configuration,
      },
      metadata: undefined,
    }) as Promise<Task>;

  it("acceptedOutputModes application/json gives a data part, kept with the task for later reads", async () => {
    const c = await a2aClient(partner.key, url);
    const ack = await sendWith(c, userMessage("What is the cost per person?"), {
      acceptedOutputModes: ["application/json"],
      returnImmediately: true,
    });
    expect(ack.status?.state).toBe(TaskState.TASK_STATE_SUBMITTED);
    expect(ack.metadata?.arbor?.outputModes).toEqual(["application/json"]);
    const done = await untilRead(
      "the task to complete",
      () => c.getTask({ tenant: "", id: ack.id, historyLength: undefined }),
      (t) => t.status?.state === TaskState.TASK_STATE_COMPLETED,
    );
    expect(done.artifacts[0]?.parts).toEqual([
      expect.objectContaining({
        mediaType: "application/json",
        content: { $case: "data", value: { result: ANSWER, title: "Cost per person" } },
      }),
    ]);
  });

  it("historyLength is honoured: 0 gives no history", async () => {
    const c = await a2aClient(partner.key, url);
    const none = await sendWith(c, userMessage("What is the cost per person?"), { historyLength: 0 });
    expect(none.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(none.history).toEqual([]);
    const all = await c.getTask({ tenant: "", id: none.id, historyLength: undefined });
    expect(all.history.length).toBeGreaterThan(0);
    const one = await c.getTask({ tenant: "", id: none.id, historyLength: 1 });
    expect(one.history).toHaveLength(1);
  });

  it("-32005 for parts Arbor does not take (the TCK's raw part among them) and for output modes it does not give; nothing is written", async () => {
    const before = await conversations("acme");
    const c = await a2aClient(partner.key, url);
    const raw = await rpc(
      "SendMessage",
      {
        message: {
          role: "ROLE_USER",
          parts: [{ raw: "dGNr", mediaType: "application/x-unsupported-tck-type" }],
          messageId: randomUUID(),
        },
      },
      { version: "1.0" },
    );
    expect(raw.json.error).toMatchObject({
      code: -32005,
      message: expect.stringMatching(/application\/x-unsupported-tck-type.*Arbor takes text parts/),
    });
    // A part that holds content of a kind 1.0 does not have (an older draft's `file`): not taken either.
    const file = await rpc(
      "SendMessage",
      {
        message: {
          role: "ROLE_USER",
          parts: [
            { file: { name: "test.txt", mediaType: "text/plain", fileWithUri: "https://example.com/t.txt" } },
          ],
          messageId: randomUUID(),
        },
      },
      { version: "1.0" },
    );
    expect(file.json.error).toMatchObject({
      code: -32005,
      message: expect.stringMatching(/"file", content Arbor does not take/),
    });
    const refused: [Message, Record<string, unknown>, RegExp][] = [
      [
        message([
          {
            content: { $case: "url", value: "https://example.com/a.pdf" },
            metadata: undefined,
            filename: "a.pdf",
            mediaType: "application/pdf",
          },
        ]),
        {},
        /a file \(a URL/,
      ],
      [
        message([
          {
            content: { $case: "text", value: "%PDF" },
            metadata: undefined,
            filename: "",
            mediaType: "application/pdf",
          },
        ]),
        {},
        /text of media type application\/pdf/,
      ],
      [
        message([
          {
            content: { $case: "data", value: { a: 1 } },
            metadata: undefined,
            filename: "",
            mediaType: "text/csv",
          },
        ]),
        {},
        /data of media type text\/csv/,
      ],
      [
        userMessage("hello"),
        { acceptedOutputModes: ["image/png", "audio/*"] },
        /names nothing Arbor answers in/,
      ],
    ];
    for (const [m, configuration, why] of refused)
      await expect(sendWith(c, m, configuration)).rejects.toThrow(why);
    await h.idle();
    expect(await conversations("acme")).toEqual(before);
  });

  it("takes the A2A-Extensions header (extensions it does not know are not activated) and refuses a message without parts", async () => {
    const res = await fetch(`${url}/a2a`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        authorization: `Bearer ${partner.key}`,
        "a2a-version": "1.0",
        "a2a-extensions": "https://example.com/ext/v1,https://example.com/ext/v2",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "nope" } }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("a2a-extensions")).toBeNull();
    expect(((await res.json()) as RpcBody).error?.code).toBe(-32001);
    const empty = await rpc("SendMessage", { message: { kind: "message" } }, { version: "1.0" });
    expect(empty.json.error).toMatchObject({
      code: -32602,
      message: expect.stringMatching(/message\.parts/),
    });
  });

  it("unknown configuration is refused (-32602), push configs are refused as not supported (-32003)", async () => {
    const m = { role: "ROLE_USER", parts: [{ text: "hello" }], messageId: randomUUID() };
    const unknown = await rpc(
      "SendMessage",
      { message: m, configuration: { blocking: false } },
      { version: "1.0" },
    );
    expect(unknown.json.error).toMatchObject({
      code: -32602,
      message: expect.stringMatching(
        /configuration\.blocking \(A2A 1\.0 has acceptedOutputModes, historyLength, returnImmediately, taskPushNotificationConfig\)/,
      ),
    });
    const push = await rpc(
      "SendMessage",
      {
        message: m,
        configuration: { taskPushNotificationConfig: { url: "https://example.com/hook", token: "t" } },
      },
      { version: "1.0" },
    );
    expect(push.json.error).toMatchObject({
      code: -32003,
      message: expect.stringMatching(/capabilities\.pushNotifications: false/),
    });
  });

  it("a message to an ended task is an unsupported operation, a cancel of it not cancelable; a contextId not the task's is refused", async () => {
    const c = await a2aClient(partner.key, url);
    const done = await send(c, userMessage("What is the cost per person?"));
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const ended = await rpc(
      "SendMessage",
      { message: { role: "ROLE_USER", parts: [{ text: "more" }], messageId: randomUUID(), taskId: done.id } },
      { version: "1.0" },
    );
    expect(ended.json.error).toMatchObject({
      code: -32004,
      message: expect.stringMatching(/terminal state/),
    });
    // Nor can it be canceled (-32002); the 1.0 error carries its google.rpc.ErrorInfo.
    const cancel = await rpc("CancelTask", { id: done.id }, { version: "1.0" });
    expect(cancel.json.error).toMatchObject({
      code: -32002,
      data: [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "TASK_NOT_CANCELABLE" }],
    });
    expect((await rpc("tasks/cancel", { id: done.id })).json.error).toMatchObject({ code: -32002 });
    const waiting = await send(c, userMessage("Email the team about the offsite"));
    expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    await expect(
      send(c, userMessage("approve", { taskId: waiting.id, contextId: "another" })),
    ).rejects.toThrow(/contextId mismatch/);
    await c.cancelTask({ tenant: "", id: waiting.id, metadata: undefined });
  });

  it("GetExtendedAgentCard: the card and what the key is; an admin also sees the team; no key: 401", async () => {
    const agent = await a2aClient(partner.key, url);
    const card: AgentCard = await agent.getAgentCard();
    expect(card.capabilities?.extendedAgentCard).toBe(true);
    const ext = card.capabilities?.extensions.find((e) => e.uri === CALLER_EXTENSION);
    expect(ext?.params).toMatchObject({
      tenant: "acme",
      actor: "agent_partner",
      kind: "agent",
      roles: [],
      team: expect.stringMatching(/not readable with this key/),
    });
    expect(card.skills.map((s) => s.id)).toEqual(["run_request"]);

    const admin = await a2aClient(root.key, url);
    const full = await admin.getAgentCard();
    expect(full.capabilities?.extensions[0]?.params).toMatchObject({
      roles: ["admin"],
      team: ["Generalist"],
    });
    expect(full.skills).toEqual([
      expect.objectContaining({ id: "run_request" }),
      expect.objectContaining({ id: "assistant:Generalist", description: TEAM[0]?.purpose }),
    ]);

    const v03 = await rpc("agent/getAuthenticatedExtendedCard", {});
    expect(v03.json.result).toMatchObject({ name: "Arbor", url: `${url}/a2a`, protocolVersion: "0.3" });
    const anonymous = await fetch(`${url}/a2a`, {
      method: "POST",
      headers: { "content-type": "application/json", "a2a-version": "1.0" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "GetExtendedAgentCard", params: {} }),
    });
    expect(anonymous.status).toBe(401);
  });
});
